"""Outputs the judge reads where a call left them (on a GPU): the runner keeps each timed call's outputs in its own
memory and names them by CUDA IPC handle (export), and the judge opens those allocations and copies the outputs out
itself (Imports), so that no runner copy of an output is timed and none is subtracted (judge/timed_sides.py).

Both sides speak to the CUDA driver directly (ctypes on libcuda, which torch has loaded already): torch's own sharing
of a storage makes a reference-count file in /dev/shm that the importer opens by a name the exporter chose, and the
judge never opens a path a runner named. What a runner names is checked where it is read: the judge opens only
handles, reads only within the allocation the driver says a handle maps, and a handle that does not open is the
runner's failure to hold its outputs, which sends the timing back to copies (judge/measure.py)."""

from __future__ import annotations

import base64
import ctypes

import torch

from kbench.layouts import dense, reach
from kbench.runner.wire import HANDLE_BYTES, HeldOutputs, HeldRef

_LAZY_PEER_ACCESS = 1  # CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS


class _Handle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_char * HANDLE_BYTES)]


class HoldUnusable(Exception):
    """A batch's outputs cannot be read where its calls left them (not all exported, overlapping, a handle that does
    not open, or a wrong output among them): the timing goes back to outputs copied into the ring's slots."""


_driver = None


def _cuda():
    """libcuda's IPC and address-range calls, typed (loaded once; torch loaded the library already)."""
    global _driver
    if _driver is None:
        library = ctypes.CDLL("libcuda.so.1")
        library.cuIpcGetMemHandle.argtypes = [ctypes.POINTER(_Handle), ctypes.c_uint64]
        library.cuIpcOpenMemHandle_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), _Handle, ctypes.c_uint]
        library.cuIpcCloseMemHandle.argtypes = [ctypes.c_uint64]
        library.cuMemGetAddressRange_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_size_t),
                                                    ctypes.c_uint64]
        for name in ("cuIpcGetMemHandle", "cuIpcOpenMemHandle_v2", "cuIpcCloseMemHandle", "cuMemGetAddressRange_v2"):
            getattr(library, name).restype = ctypes.c_int
        _driver = library
    return _driver


def _address_range(pointer: int) -> tuple[int, int] | None:
    """The base and size of the allocation that holds device address `pointer` (this process's view), or None."""
    base, size = ctypes.c_uint64(), ctypes.c_size_t()
    if _cuda().cuMemGetAddressRange_v2(ctypes.byref(base), ctypes.byref(size), ctypes.c_uint64(pointer)):
        return None
    return base.value, size.value


class Exports:
    """The runner's side: each held output named by its allocation's handle, once its batch's calls are all queued (a
    driver call between calls could stall their launches; after them it overlaps their kernels). An allocation's handle
    is asked of the driver once and kept for later batches (a runner's allocator hands them the same memory); `begin`
    starts a batch's table of handles, in the order first named."""

    def __init__(self):
        self.known: dict[tuple[int, int], bytes] = {}  # (allocation base, size) -> its handle
        self.pointers: dict[int, tuple[int, bytes]] = {}  # an output's address -> its allocation's base, handle
        self.handles: list[bytes] = []
        self.numbers: dict[bytes, int] = {}

    def begin(self) -> None:
        self.handles, self.numbers = [], {}

    def export(self, item: torch.Tensor) -> HeldRef | None:
        """`item` named by its allocation's handle, or None: memory the driver will not export (imported from
        another process, mapped by cuMem*, not a device allocation)."""
        start = item.untyped_storage().data_ptr()
        base, handle = self.pointers.get(start) or self._allocation(start)
        if handle is None:
            return None
        number = self.numbers.setdefault(handle, len(self.handles))
        if number == len(self.handles):
            self.handles.append(handle)
        return HeldRef(number, start - base, tuple(item.stride()), item.storage_offset())

    def _allocation(self, start: int) -> tuple[int, bytes | None]:
        """The base and handle of the allocation holding address `start`, asked of the driver (None: no handle).
        Kept by address: the next batches' outputs mostly land where this one's did, and the allocator returns its
        memory to the driver only when emptied (a handle kept past that names memory gone or reused, which the judge
        reads wrong and times again with copies)."""
        found = _address_range(start)
        if found is None:
            return 0, None
        handle = self.known.get(found)
        if handle is None:
            exported = _Handle()
            if _cuda().cuIpcGetMemHandle(ctypes.byref(exported), ctypes.c_uint64(found[0])):
                return 0, None
            handle = self.known[found] = bytes(exported)
        self.pointers[start] = (found[0], handle)
        return found[0], handle

    def to_wire(self) -> list[str]:
        return [base64.b64encode(handle).decode() for handle in self.handles]


# Batches in a row that may leave an opened allocation unnamed before the judge closes it: batches of different
# lengths in turn (the time alone's of one call and of eight) name different allocations, and one opened again
# (cuIpcOpenMemHandle) would be opened inside the judge's clock.
UNUSED_BATCHES = 4


def batches_unused(idle: dict[bytes, int], opened, used: set[bytes]) -> dict[bytes, int]:
    """Per opened handle, the batches in a row, this one included, that named none of it (0: this one did)."""
    return {handle: 0 if handle in used else idle.get(handle, 0) + 1 for handle in opened}


class Imports:
    """The judge's side: allocations of one runner opened by handle, each seen as a uint8 tensor of the size the
    driver gives it here. Kept open while batches name them (a runner's allocator hands its calls the same memory
    batch after batch); close_unused lets go of those no batch named for a while."""

    def __init__(self, device: torch.device):
        self.device = device
        self.opened: dict[bytes, tuple[int, torch.Tensor]] = {}  # handle -> (address here, the allocation's bytes)
        self.places: dict[tuple, tuple[torch.Tensor, int, int]] = {}  # a place's view and byte span, once made
        self.used: set[bytes] = set()
        self.idle: dict[bytes, int] = {}  # handle -> batches in a row that named none of it

    def place(self, handle: bytes, ref: HeldRef, dtype: torch.dtype, shape) -> tuple[torch.Tensor, int, int]:
        """Output `ref` of `dtype` and `shape` over its opened allocation, and the bytes it spans there (start, end);
        HoldUnusable if it does not open or reaches beyond it. Made once per place: a runner's outputs land in the
        same places batch after batch, and a view made per call would cost more than many a call."""
        key = (handle, ref.at, ref.stride, ref.offset, dtype, tuple(shape))
        self.used.add(handle)
        found = self.places.get(key)
        if found is None:
            found = self.places[key] = self._viewed(handle, ref, dtype, tuple(shape))
        return found

    def _viewed(self, handle: bytes, ref: HeldRef, dtype: torch.dtype, shape: tuple) -> tuple[torch.Tensor, int, int]:
        allocation = self._open(handle)
        element = dtype.itemsize
        if ref.at % element:
            raise HoldUnusable(f"an output {ref.at} bytes into its allocation, not aligned for {dtype}")
        offset = ref.at // element + ref.offset
        try:
            if len(ref.stride) != len(shape) or reach(dtype, shape, ref.stride, offset) > allocation.numel():
                raise ValueError("beyond its allocation")
        except ValueError as error:
            raise HoldUnusable(f"an output that does not lie in its allocation ({error})")
        if not dense(shape, ref.stride):  # the judge's copy of it would not be the dense copy it calibrated
            raise HoldUnusable("an output whose elements share memory or leave gaps (an expanded or sliced view)")
        viewed = torch.empty(0, dtype=dtype, device=allocation.device)
        viewed.set_(allocation.untyped_storage(), offset, shape, ref.stride)
        return viewed, offset * element, reach(dtype, shape, ref.stride, offset)

    def _open(self, handle: bytes) -> torch.Tensor:
        if handle in self.opened:
            return self.opened[handle][1]
        if len(handle) != HANDLE_BYTES:
            raise HoldUnusable("a handle that is not a CUDA IPC handle")
        pointer = ctypes.c_uint64()
        with torch.cuda.device(self.device):
            status = _cuda().cuIpcOpenMemHandle_v2(ctypes.byref(pointer), _Handle.from_buffer_copy(handle),
                                                   _LAZY_PEER_ACCESS)
            if status:
                raise HoldUnusable(f"a handle that does not open (CUDA driver error {status})")
            found = _address_range(pointer.value)
        if found is None:
            _close(pointer.value, self.device)
            raise HoldUnusable("an opened handle whose size the driver does not know")
        allocation = torch.as_tensor(_DeviceBytes(found[0], found[1]), device=self.device)
        self.opened[handle] = (pointer.value, allocation)
        return allocation

    def close_unused(self, after: int = UNUSED_BATCHES) -> None:
        """After a batch (once the judge's copies from it are done): close the allocations that more than `after`
        batches in a row, this one included, named none of."""
        self.idle = batches_unused(self.idle, self.opened, self.used)
        unused = {handle for handle, batches in self.idle.items() if batches > after}
        self.places = {key: found for key, found in self.places.items() if key[0] not in unused}
        for handle in unused:
            pointer, _ = self.opened.pop(handle)
            del self.idle[handle]
            _close(pointer, self.device)
        self.used = set()

    def close(self) -> None:
        self.used = set()
        self.close_unused(after=0)  # none named now: every one


def _close(pointer: int, device: torch.device) -> None:
    with torch.cuda.device(device):
        _cuda().cuIpcCloseMemHandle(ctypes.c_uint64(pointer))


class _DeviceBytes:
    """Device memory torch sees through the CUDA array interface (no copy; the tensor keeps this object alive)."""

    def __init__(self, pointer: int, size: int):
        self.__cuda_array_interface__ = {"shape": (size,), "typestr": "|u1", "data": (pointer, False),
                                         "version": 3, "strides": None}


def copy_held(imports: Imports, held: HeldOutputs, index: int, dtype: torch.dtype, shape,
              slots: list[torch.Tensor]) -> list[tuple[bytes, int, int]]:
    """Each call's output `index`, of `dtype` and `shape`, copied from where the runner holds it into its slot (one
    launch for all); the bytes each one spans in its allocation (handle, start, end). HoldUnusable where a call
    names no place for it (memory the driver does not share)."""
    sources, spans = [], []
    for call in held.calls:
        place = call[index] if index < len(call) else None
        if place is None:
            raise HoldUnusable(f"output {index} of a call is in memory the driver does not share")
        handle = held.handles[place.handle]
        source, start, end = imports.place(handle, place, dtype, shape)
        sources.append(source)
        spans.append((handle, start, end))
    torch._foreach_copy_(slots, sources)
    return spans


def overlapping(spans: list[tuple[bytes, int, int]]) -> bool:
    """Whether any two byte ranges (allocation, start, end) of one allocation overlap."""
    reached: dict[bytes, int] = {}  # per allocation: the furthest end of the ranges before this one
    for allocation, start, end in sorted(spans):
        if start < reached.get(allocation, -1):
            return True
        reached[allocation] = max(end, reached.get(allocation, -1))
    return False
