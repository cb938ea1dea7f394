"""Mean cross-entropy loss over a batch of class logits.

Adapted from KernelBench level 1 problem 95 ("95_CrossEntropyLoss"): same Model, but its
official size (32768 x 4096 logits, 0.5 GB, ~0.13 ms on an H200) is too small for timing, so
this problem uses an LLM-vocabulary-sized batch instead and carries no KERNELBENCH_ID.

Computes loss = mean_i( logsumexp(predictions[i, :]) - predictions[i, targets[i]] ), a scalar.

Official configuration: predictions (16384, 128256) float32 (2.10e9 elements, just under 2^31;
8.4 GB), targets (16384,) int64 drawn with torch.randint  ->  scalar loss.
Memory bound: >= 8.4 GB read, ~2.1 ms at 4 TB/s.

Addition: a global `input_scale` (official 1.0 leaves the torch.rand logits untouched) scales the
logits; the sweep also draws 10 and 100 so that a logsumexp without max-subtraction overflows.
"""
import torch
import torch.nn as nn

KBENCH_FAMILY = "cross_entropy"


class Model(nn.Module):
    """loss = F.cross_entropy(predictions, targets) (mean reduction)."""

    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.cross_entropy(predictions, targets)


# Official sizes
batch_size = 16384
num_classes = 128256
input_scale = 1.0

KBENCH_SWEEP = {
    "batch_size": [1, 3, 64, 129],
    "num_classes": [1, 2, 7, 1000, 32003],
    "input_scale": [1.0, 10.0, 100.0],
}
KBENCH_SMALL = {"batch_size": 64, "num_classes": 32000}


def get_inputs():
    predictions = torch.rand(batch_size, num_classes)
    if input_scale != 1.0:
        predictions.mul_(input_scale)
    targets = torch.randint(0, num_classes, (batch_size,))
    return [predictions, targets]


def get_init_inputs():
    return []
