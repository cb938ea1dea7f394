"""Arenas: byte buffers the judge allocates and shares with its runner, through which arguments go in and
outputs come out. On a CPU an arena is a file in a folder of the judge's (the runner's exchange folder, which
no other runner may write) mapped by both processes; on a GPU it is device memory shared through CUDA IPC. The
judge never maps anything the runner names: the runner asks for room and the judge allocates it."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import torch

# Arena sizes round up to this (so views of any dtype start aligned, and small growth reuses the arena).
_ALIGN = 256

_DTYPES = {str(dtype).removeprefix("torch."): dtype for dtype in (
    torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.uint8, torch.int16,
    torch.int32, torch.int64, torch.bool, torch.complex64, torch.complex128)}


def dtype_of(name: str) -> torch.dtype:
    try:
        return _DTYPES[name]
    except KeyError:
        raise ValueError(f"unsupported dtype {name!r}") from None


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def nbytes(dtype: torch.dtype, shape) -> int:
    count = 1
    for size in shape:
        count *= int(size)
    return count * torch.empty((), dtype=dtype).element_size()


def view(buffer: torch.Tensor, dtype: torch.dtype, shape) -> torch.Tensor:
    """`buffer` (uint8) seen as a contiguous tensor of `dtype` and `shape` from its first byte."""
    size = nbytes(dtype, shape)
    if size > buffer.numel():
        raise ValueError(f"{size} bytes do not fit an arena of {buffer.numel()}")
    if size == 0:
        return torch.empty(tuple(shape), dtype=dtype, device=buffer.device)
    return buffer[:size].view(dtype).view(tuple(shape))


def aliasing(items: list, arguments: list) -> list[int]:
    """Outputs whose memory overlaps an input's."""
    spans = [_span(value) for value in arguments if isinstance(value, torch.Tensor)]
    found = []
    for index, item in enumerate(items):
        if type(item) in (torch.Tensor, torch.nn.Parameter) and item.numel():
            start, end = _span(item)
            if any(start < other_end and other_start < end for other_start, other_end in spans):
                found.append(index)
    return found


def _span(tensor: torch.Tensor) -> tuple[int, int]:
    storage = tensor.untyped_storage()
    return storage.data_ptr(), storage.data_ptr() + storage.nbytes()


def _rounded(size: int) -> int:
    return max(_ALIGN, -(-size // _ALIGN) * _ALIGN)


class JudgeArenas:
    """The judge's arenas for one runner, by slot name ("in0", "out1"): each grows (a new arena) when a
    tensor does not fit."""

    def __init__(self, device: torch.device, folder: Path):
        self.device = device
        self.folder = folder
        self.buffers: dict[str, torch.Tensor] = {}   # arena id -> uint8 buffer
        self.slots: dict[str, str] = {}              # slot -> arena id
        self.unsent: list[dict] = []                 # descriptions the runner has not been sent yet
        self._count = 0

    def ensure(self, slot: str, size: int) -> str:
        """The arena id of `slot`, with room for `size` bytes (a new arena's description waits in `unsent` for
        the next message to the runner)."""
        current = self.slots.get(slot)
        if current is not None and self.buffers[current].numel() >= size:
            return current
        if current is not None:
            self._drop(current)
        self._count += 1
        arena = f"{slot}.{self._count}"
        capacity = _rounded(size)
        if self.device.type == "cuda":
            buffer = torch.empty(capacity, dtype=torch.uint8, device=self.device)
            description = {"id": arena, "kind": "cuda", "bytes": capacity, "ipc": _ipc_handle(buffer)}
        else:
            path = self.folder / arena
            buffer = torch.from_file(str(path), shared=True, size=capacity, dtype=torch.uint8)
            description = {"id": arena, "kind": "file", "bytes": capacity, "path": str(path)}
        self.buffers[arena] = buffer
        self.slots[slot] = arena
        self.unsent.append(description)
        return arena

    def take_unsent(self) -> list[dict]:
        """Descriptions of the arenas made since the last message, for the runner to open before it reads it."""
        unsent, self.unsent = self.unsent, []
        return [description for description in unsent if description["id"] in self.buffers]

    def view(self, arena: str, dtype: torch.dtype, shape) -> torch.Tensor:
        return view(self.buffers[arena], dtype, shape)

    def _drop(self, arena: str) -> None:
        del self.buffers[arena]
        if self.device.type != "cuda":
            try:
                os.unlink(self.folder / arena)
            except OSError:
                pass

    def close(self) -> None:
        """Drop every arena; the next ensure() makes new ones."""
        for arena in list(self.buffers):
            self._drop(arena)
        self.slots.clear()
        self.unsent.clear()


def _ipc_handle(buffer: torch.Tensor) -> list:
    storage = buffer.untyped_storage()
    shared = list(storage._share_cuda_())
    return [base64.b64encode(item).decode() if isinstance(item, bytes) else item for item in shared]


_BYTE_FIELDS = (1, 4, 6)  # positions of bytes in _share_cuda_'s tuple: handle, ref counter, event handle


class RunnerArenas:
    """The runner's side: arenas opened from the judge's descriptions, by id."""

    def __init__(self):
        self.buffers: dict[str, torch.Tensor] = {}

    def open(self, description: dict) -> None:
        arena, size = description["id"], int(description["bytes"])
        if description["kind"] == "cuda":
            parts = list(description["ipc"])
            for position in _BYTE_FIELDS:
                parts[position] = base64.b64decode(parts[position])
            storage = torch.UntypedStorage._new_shared_cuda(*parts)
            buffer = torch.empty(0, dtype=torch.uint8, device=torch.device("cuda", parts[0]))
            buffer.set_(storage, 0, (size,), (1,))
        else:
            buffer = torch.from_file(description["path"], shared=True, size=size, dtype=torch.uint8)
        self.buffers[arena] = buffer
        for other in [name for name in self.buffers if name != arena and name.split(".")[0] == arena.split(".")[0]]:
            del self.buffers[other]  # the slot's older arena: the judge let it go

    def view(self, arena: str, dtype: torch.dtype, shape) -> torch.Tensor:
        return view(self.buffers[arena], dtype, shape)
