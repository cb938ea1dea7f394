"""Tensors' layouts: the bytes a view reaches in its storage, the tensors that view one storage, a view rebuilt over a
storage's bytes, and a copy of arguments that keeps their layout (dtype, shape, stride, storage offset, the storages
they share). The judge copies the problem's arguments so, as its runners get them through their arenas
(runner/arenas.py, which sends and rebuilds each tensor so)."""

from __future__ import annotations

from typing import Callable

import torch


def nbytes(dtype: torch.dtype, shape) -> int:
    count = 1
    for size in shape:
        count *= int(size)
    return count * torch.empty((), dtype=dtype).element_size()


def view(buffer: torch.Tensor, dtype: torch.dtype, shape, stride=None, offset: int = 0) -> torch.Tensor:
    """`buffer` (uint8, from its storage's first byte) seen as a tensor of `dtype` and `shape`: contiguous from
    its first byte, or with `stride` and storage `offset` (in elements) as the problem's argument had them."""
    if stride is None:
        size = nbytes(dtype, shape)
        if size > buffer.numel():
            raise ValueError(f"{size} bytes do not fit an arena of {buffer.numel()}")
        if size == 0:
            return torch.empty(tuple(shape), dtype=dtype, device=buffer.device)
        return buffer[:size].view(dtype).view(tuple(shape))
    size = reach(dtype, shape, stride, offset)
    if size > buffer.numel():
        raise ValueError(f"a view reaching {size} bytes does not fit an arena of {buffer.numel()}")
    rebuilt = torch.empty(0, dtype=dtype, device=buffer.device)
    return rebuilt.set_(buffer.untyped_storage(), int(offset), tuple(shape), tuple(stride))


def reach(dtype: torch.dtype, shape, stride, offset: int) -> int:
    """Bytes from its storage's start to the end of the last element a view reaches (0: it has none)."""
    if any(int(size) == 0 for size in shape):
        return 0
    if any(int(step) < 0 for step in stride) or int(offset) < 0:
        raise ValueError("a view with a negative stride or offset")
    last = int(offset) + sum((int(size) - 1) * int(step) for size, step in zip(shape, stride))
    return (last + 1) * torch.empty((), dtype=dtype).element_size()


def dense(shape, stride) -> bool:
    """Whether a view of `shape` and `stride` covers the memory it spans once: a contiguous layout, its dimensions
    in any order (no element shares memory with another, as an expanded view's do; no gaps, as a slice's)."""
    expected = 1
    for size, step in sorted(((int(size), int(step)) for size, step in zip(shape, stride) if int(size) != 1),
                             key=lambda dimension: dimension[1]):
        if step != expected:
            return False
        expected *= size
    return True


def extent(tensor: torch.Tensor) -> int:
    return reach(tensor.dtype, tensor.shape, tensor.stride(), tensor.storage_offset())


def storage_groups(values: list) -> dict[int, list[int]]:
    """The tensors among `values` by the storage they view: the index of the first tensor on a storage -> the
    indices of every tensor on it (views of one storage share it; an empty storage is shared with none)."""
    groups: dict[int, list[int]] = {}
    first_on: dict[tuple, int] = {}
    for index, value in enumerate(values):
        if not isinstance(value, torch.Tensor):
            continue
        storage = value.untyped_storage()
        key = (str(value.device), storage.data_ptr()) if storage.nbytes() else ("empty", index)
        first = first_on.setdefault(key, index)
        groups.setdefault(first, []).append(index)
    return groups


def storage_bytes(tensor: torch.Tensor, size: int) -> torch.Tensor:
    """The first `size` bytes of the storage `tensor` views, as a uint8 tensor over them."""
    return torch.empty(0, dtype=torch.uint8, device=tensor.device).set_(tensor.untyped_storage(), 0, (size,), (1,))


def laid_out(values: list, storage_for: Callable[[int, list[int], int], torch.Tensor]) -> list:
    """Each tensor of `values` rebuilt with its dtype, shape, stride and storage offset over the uint8 buffer that
    `storage_for(first, members, size)` gives for its storage (first: the index of the storage's first tensor;
    members: the indices of all its tensors; size: the bytes they reach), once a storage, so views that share a
    storage share that buffer; None for other values. copied_with_layout and the judge's arenas
    (remote.RemoteModel.stage) differ only in the buffer."""
    views: list = [None] * len(values)
    for first, members in storage_groups(values).items():
        buffer = storage_for(first, members, max(extent(values[index]) for index in members))
        for index in members:
            value = values[index]
            views[index] = view(buffer, value.dtype, value.shape, value.stride(), value.storage_offset())
    return views


def copied_with_layout(values: list) -> list:
    """A copy of `values` whose tensors keep their layout: dtype, shape, stride, storage offset, and the views that
    share a storage share one copy of it (as far as they reach). Other values stay as they are."""
    values = [plain(value) if isinstance(value, torch.Tensor) else value for value in values]
    copies = laid_out(values, lambda first, members, size: storage_bytes(values[first], size).clone())
    return [copy if isinstance(value, torch.Tensor) else value for value, copy in zip(values, copies)]


def plain(value: torch.Tensor) -> torch.Tensor:
    """`value` with the bits its bytes do not hold (a conjugate or negative view) applied, and dense if sparse: what
    can cross to a runner as (bytes, dtype, shape, stride, offset)."""
    if value.layout != torch.strided:
        value = value.to_dense()
    return value.resolve_conj().resolve_neg()
