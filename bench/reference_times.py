"""Time every problem's reference at its official size on a GPU, under both precision policies.

    PYTHONPATH=$PWD python3 bench/reference_times.py [--problems problems] [--csv out.csv]

Loads each problem file, builds Model from get_init_inputs() and inputs from get_inputs() on the
GPU, then times the eager reference with kbench's own timer (CUDA events, L2 flushed between calls),
alternating strict float32 (TF32 off: kbench's checking policy) with PyTorch's default settings
(TF32 allowed in cuDNN). Prints a table and writes a CSV. A problem that fails is reported, not fatal.
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

import torch

from kbench import policy, stats
from kbench.judge import timing
from kbench.config import STRICT_FP32
from kbench.problem import load_module


def time_problem(path: Path, device: torch.device, budget_s: float) -> dict:
    module = load_module(path, "bench_problem")
    torch.manual_seed(0)
    model = module.Model(*module.get_init_inputs()).to(device)
    torch.manual_seed(1)
    with torch.device(device):
        inputs = list(module.get_inputs())
    input_gb = sum(x.numel() * x.element_size() for x in inputs if isinstance(x, torch.Tensor)) / 1e9

    def strict():
        policy.apply_policy(STRICT_FP32)
        model(*inputs)

    def default():
        policy.set_pytorch_default_precision()
        model(*inputs)

    rule = timing.StopRule(warmup=2, min_samples=10, max_samples=200, target_rse=0.005, budget_s=budget_s)
    with torch.no_grad():
        strict_samples, default_samples = timing.sample_interleaved([timing.Side(strict), timing.Side(default)],
                                                                    timing.CudaEventTimer(device), rule)
    strict_ms, default_ms = strict_samples.ms, default_samples.ms
    policy.apply_policy(STRICT_FP32)
    return {"problem": path.stem, "input_gb": round(input_gb, 3),
            "strict_fp32_ms": round(stats.median(strict_ms), 4),
            "pytorch_default_ms": round(stats.median(default_ms), 4),
            "samples": len(strict_ms), "error": ""}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", type=Path, default=Path("problems"))
    parser.add_argument("--csv", type=Path, default=None)
    parser.add_argument("--budget", type=float, default=3.0, help="seconds of sampling per problem")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("needs a CUDA device", file=sys.stderr)
        return 2
    device = torch.device("cuda:0")
    rows = []
    for path in sorted(args.problems.glob("*.py")):
        try:
            row = time_problem(path, device, args.budget)
        except Exception as error:  # report and go on: one broken problem must not hide the rest
            row = {"problem": path.stem, "error": f"{type(error).__name__}: {error}".splitlines()[0]}
        rows.append(row)
        torch.cuda.empty_cache()
        print(row, flush=True)
    print(f"\nReference times on {torch.cuda.get_device_name(device)}, torch {torch.__version__}")
    print(f"{'problem':36} {'input GB':>9} {'strict fp32 ms':>15} {'PyTorch default ms':>19}")
    for row in rows:
        if row.get("error"):
            print(f"{row['problem']:36} error: {row['error']}")
        else:
            print(f"{row['problem']:36} {row['input_gb']:>9} {row['strict_fp32_ms']:>15} {row['pytorch_default_ms']:>19}")
    if args.csv:
        with args.csv.open("w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=["problem", "input_gb", "strict_fp32_ms", "pytorch_default_ms",
                                                        "samples", "error"], restval="")
            writer.writeheader()
            writer.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
