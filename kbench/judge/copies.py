"""The judge's own copies of a timed batch's outputs (remote.RemoteModel.run_batch): buffers only the judge holds,
made before the clock starts and kept from batch to batch, each seen as a ring of slots, one per call.

A side's outputs of one batch are compared with the reference's after the side's next batch has run where a round
has two turns (fresh.py), so a model keeps a buffer per turn (`into`)."""

from __future__ import annotations

import torch

from kbench.layouts import nbytes


class CopyBuffers:
    """Per (turn, output index): a byte buffer on `device`, and the list of its slots copy_held writes into."""

    def __init__(self, device: torch.device):
        self.device = device
        self.buffers: dict[tuple[int, int], torch.Tensor] = {}
        self.slot_lists: dict[tuple[int, int], tuple[tuple, list]] = {}

    def buffer(self, index: int, size: int, into: int = 0) -> torch.Tensor:
        """Buffer `into` for output `index`, `size` bytes at least (no allocation between the request and the
        judge's clock once it exists)."""
        buffer = self.buffers.get((into, index))
        if buffer is None or buffer.numel() < size:
            buffer = self.buffers[into, index] = torch.empty(max(size, 1), dtype=torch.uint8, device=self.device)
        return buffer

    def slot_list(self, ring: torch.Tensor, index: int, into: int = 0) -> list[torch.Tensor]:
        """The slots of `ring` (a view of buffer `into` of output `index`) as a list of tensors, made once per layout
        of the ring, not inside the judge's clock at every batch."""
        key = (ring.data_ptr(), ring.dtype, tuple(ring.shape), tuple(ring.stride()))
        if self.slot_lists.get((into, index), (None,))[0] != key:
            self.slot_lists[into, index] = (key, list(ring.unbind(0)))
        return self.slot_lists[into, index][1]


class BatchOutputs:
    """A batch's outputs in the judge's memory: per output, its calls' values as one [count, *shape] tensor; and
    when the runner's reply came (time.perf_counter(): the log splits a batch's wall there, sides.BatchTimer)."""

    def __init__(self, rings: list[torch.Tensor], sequence: bool, replied_at: float = 0.0):
        self.rings = rings
        self.sequence = sequence
        self.replied_at = replied_at

    def call(self, index: int):
        """Call `index`'s output, in the structure the runner returned."""
        values = tuple(ring[index] for ring in self.rings)
        return values if self.sequence else values[0]


def slot_bytes(size: int) -> int:
    return max(256, -(-size // 256) * 256)  # each slot starts aligned for any dtype's vector loads


def slots_view(buffer: torch.Tensor, dtype: torch.dtype, shape, count: int, stride: int) -> torch.Tensor:
    """`count` slots of `stride` bytes from the start of `buffer` (uint8), each a contiguous tensor of `shape`."""
    if not nbytes(dtype, shape):
        return torch.empty((count, *shape), dtype=dtype, device=buffer.device)
    element = torch.empty((), dtype=dtype).element_size()
    inner = torch.empty(tuple(shape), dtype=dtype, device="meta").stride()
    return buffer[:count * stride].view(dtype).as_strided((count, *shape), (stride // element, *inner))
