"""Checksums of tensor contents that change when any bit does, swaps of two elements included.

A snapshot of the reference records its weights' contents this way (reference_guard.py): a candidate that
scales or swaps them through `.data` keeps their identity, storage and version counter.
"""

from __future__ import annotations

import os

import torch

# Each element's bits are multiplied by a random weight per column of a row of this width.
_WIDTH = 1021
# Rows per step: bounds the temporary memory; on a CPU, small enough to stay in cache (a tenth of the time of
# steps of 4M elements), on a GPU large enough for few launches.
_CHUNK_ROWS_CPU = 256
_CHUNK_ROWS_GPU = 4096
_BITS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


class TensorChecksum:
    """Checksums under column weights drawn from os.urandom when it is made (unknown to a candidate)."""

    def __init__(self):
        generator = torch.Generator().manual_seed(int.from_bytes(os.urandom(4), "little"))
        self._weights_cpu = torch.randint(1, 1 << 31, (_WIDTH,), generator=generator, dtype=torch.int64)
        self._weights: dict = {}  # device -> the weights there

    def contents(self, tensors: list[torch.Tensor]) -> list[tuple]:
        """(version counter, checksum) per tensor; one synchronisation per device for the checksums."""
        sums = [self.of(tensor) for tensor in tensors]
        by_device: dict = {}
        for index, value in enumerate(sums):
            if value is not None:
                by_device.setdefault(value.device, []).append(index)
        resolved: list = [None] * len(tensors)
        for indices in by_device.values():
            for index, number in zip(indices, torch.stack([sums[i] for i in indices]).tolist()):
                resolved[index] = number
        return [(_version(tensor), number) for tensor, number in zip(tensors, resolved)]

    def of(self, tensor: torch.Tensor):
        """A 0-d int64 tensor that changes when any bit of the tensor does (swaps included): sum of bits
        times random column weights plus row sums times row weights, modulo 2**64. None for a tensor
        without plain strided contents."""
        if tensor.layout != torch.strided or tensor.is_meta or tensor.is_quantized:
            return None
        flat = tensor.detach().reshape(-1)
        if flat.is_complex():
            flat = torch.view_as_real(flat).reshape(-1)
        if flat.dtype == torch.bool:
            flat = flat.view(torch.uint8)
        bits = flat.contiguous().view(_BITS[flat.element_size()])
        weights = self._weights.setdefault(bits.device, self._weights_cpu.to(bits.device))
        total = torch.zeros((), dtype=torch.int64, device=bits.device)
        step = (_CHUNK_ROWS_CPU if bits.device.type == "cpu" else _CHUNK_ROWS_GPU) * _WIDTH
        for start in range(0, bits.numel(), step):
            # A copy even of int64 bits: the products are taken in place.
            chunk = bits[start:start + step].to(torch.int64, copy=True)
            pad = (-chunk.numel()) % _WIDTH  # only the last step's
            rows = (torch.nn.functional.pad(chunk, (0, pad)) if pad else chunk).view(-1, _WIDTH)
            row_index = torch.arange(rows.shape[0], device=rows.device, dtype=torch.int64) + start // _WIDTH
            row_sums = rows.sum(1)
            total += rows.mul_(weights).sum() + (row_sums * (row_index * 2654435761 + 1)).sum()
        return total


def _version(tensor: torch.Tensor):
    try:
        return tensor._version
    except Exception:  # inference tensors have no version counter
        return None
