"""Arenas: byte buffers the judge allocates and shares with its runner, through which arguments go in and
outputs come out. On a CPU an arena is anonymous shared memory (a memfd) the judge creates, maps and hands the
runner over its command socket; on a GPU it is device memory shared through CUDA IPC. No arena has a path: the judge
never opens a file the runner could have named or linked, and never maps anything the runner names (the runner asks
for room and the judge allocates it, within what the reference's outputs need: output_room.OutputRoom).

Arguments keep the layout the problem made them with: each distinct storage the arguments view is copied once into
an arena (as far as its views reach), and each tensor is sent as (arena, dtype, shape, stride, storage offset), so
the runner rebuilds the same views over the same bytes, sharing a storage where the problem's arguments share one."""

from __future__ import annotations

import base64
import mmap
import os

import torch

from kbench.layouts import extent, plain, storage_bytes, storage_groups, view

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


def refill(buffers: list, sources: list) -> None:
    """Copy the contents of `sources` into `buffers` (non-tensors are left alone): storage by storage where the
    buffers are laid out as the sources are (a view whose elements overlap, an expanded one, cannot be written
    element by element), else element by element."""
    sources = [plain(value) if isinstance(value, torch.Tensor) else value for value in sources]
    for first, members in storage_groups(sources).items():
        if all(isinstance(buffers[index], torch.Tensor) and _same_layout(buffers[index], sources[index])
               for index in members) and len(storage_groups([buffers[index] for index in members])) == 1:
            size = max(extent(sources[index]) for index in members)
            storage_bytes(buffers[first], size).copy_(storage_bytes(sources[first], size))
        else:
            for index in members:
                buffers[index].copy_(sources[index])


def _same_layout(one: torch.Tensor, other: torch.Tensor) -> bool:
    return (one.dtype, one.shape, one.stride(), one.storage_offset()) == (
        other.dtype, other.shape, other.stride(), other.storage_offset())


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

    def __init__(self, device: torch.device):
        self.device = device
        self.buffers: dict[str, torch.Tensor] = {}   # arena id -> uint8 buffer
        self.slots: dict[str, str] = {}              # slot -> arena id
        self.unsent: list[dict] = []                 # descriptions the runner has not been sent yet
        self.descriptors: dict[str, int] = {}        # arena id -> its memfd, until the runner is sent it (a CPU's)
        self._count = 0

    def ensure(self, slot: str, size: int) -> str:
        """The arena id of `slot`, with room for `size` bytes (a new arena's description waits in `unsent` for
        the next message to the runner). Running out of memory raises torch.OutOfMemoryError or OSError."""
        current = self.slots.get(slot)
        if current is not None and self.buffers[current].numel() >= size:
            return current
        if current is not None:
            self._drop(current)
            del self.slots[slot]
        self._count += 1
        arena = f"{slot}.{self._count}"
        capacity = _rounded(size)
        if self.device.type == "cuda":
            buffer = torch.empty(capacity, dtype=torch.uint8, device=self.device)
            description = {"id": arena, "kind": "cuda", "bytes": capacity, "ipc": _ipc_handle(buffer)}
        else:
            buffer, self.descriptors[arena] = _shared_memory(arena, capacity)
            description = {"id": arena, "kind": "memfd", "bytes": capacity}
        self.buffers[arena] = buffer
        self.slots[slot] = arena
        self.unsent.append(description)
        return arena

    def take_unsent(self) -> tuple[list[dict], list[int]]:
        """Descriptions of the arenas made since the last message, for the runner to open before it reads it, and
        the descriptors to send it right after the message (a memfd's description says which, by position): the
        caller closes them once sent."""
        unsent, self.unsent = [description for description in self.unsent if description["id"] in self.buffers], []
        descriptors = []
        for description in unsent:
            if description["kind"] == "memfd":
                description["fd"] = len(descriptors)
                descriptors.append(self.descriptors.pop(description["id"]))
        return unsent, descriptors

    def view(self, arena: str, dtype: torch.dtype, shape, stride=None, offset: int = 0) -> torch.Tensor:
        return view(self.buffers[arena], dtype, shape, stride, offset)

    def _drop(self, arena: str) -> None:
        """Let go of an arena: its memory goes once neither process maps it (nor holds a view of it)."""
        del self.buffers[arena]
        descriptor = self.descriptors.pop(arena, None)
        if descriptor is not None:
            os.close(descriptor)

    def close(self) -> None:
        """Drop every arena; the next ensure() makes new ones."""
        for arena in list(self.buffers):
            self._drop(arena)
        self.slots.clear()
        self.unsent.clear()


def _shared_memory(name: str, size: int) -> tuple[torch.Tensor, int]:
    """`size` bytes of anonymous shared memory, mapped here (the tensor keeps the mapping), and its descriptor."""
    descriptor = os.memfd_create(f"kbench-arena-{name}", os.MFD_CLOEXEC)
    try:
        os.ftruncate(descriptor, size)
        return torch.frombuffer(mmap.mmap(descriptor, size), dtype=torch.uint8), descriptor
    except BaseException:
        os.close(descriptor)
        raise


def _ipc_handle(buffer: torch.Tensor) -> list:
    storage = buffer.untyped_storage()
    shared = list(storage._share_cuda_())
    return [base64.b64encode(item).decode() if isinstance(item, bytes) else item for item in shared]


_BYTE_FIELDS = (1, 4, 6)  # positions of bytes in _share_cuda_'s tuple: handle, ref counter, event handle


class RunnerArenas:
    """The runner's side: arenas opened from the judge's descriptions, by id."""

    def __init__(self):
        self.buffers: dict[str, torch.Tensor] = {}

    def open(self, description: dict, descriptors: list[int]) -> None:
        """Map the arena `description` gives (a memfd's descriptor is among `descriptors`, which came with it)."""
        arena, size = description["id"], int(description["bytes"])
        if description["kind"] == "cuda":
            parts = list(description["ipc"])
            for position in _BYTE_FIELDS:
                parts[position] = base64.b64decode(parts[position])
            storage = torch.UntypedStorage._new_shared_cuda(*parts)
            buffer = torch.empty(0, dtype=torch.uint8, device=torch.device("cuda", parts[0]))
            buffer.set_(storage, 0, (size,), (1,))
        else:
            buffer = torch.frombuffer(mmap.mmap(descriptors[description["fd"]], size), dtype=torch.uint8)
        self.buffers[arena] = buffer
        for other in [name for name in self.buffers if name != arena and name.split(".")[0] == arena.split(".")[0]]:
            del self.buffers[other]  # the slot's older arena: the judge let it go

    def view(self, arena: str, dtype: torch.dtype, shape, stride=None, offset: int = 0) -> torch.Tensor:
        return view(self.buffers[arena], dtype, shape, stride, offset)
