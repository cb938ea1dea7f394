"""Messages between the judge and a runner: length-prefixed JSON over a pipe, one typed record per message.

JSON, never pickle: the judge reads what an untrusted process wrote, and a pickle runs code when it is read.
Torch-free, so both sides import it cheaply."""

from __future__ import annotations

import base64
import json
import os
import struct
from dataclasses import dataclass
from typing import NamedTuple

# The judge refuses a runner's message larger than this (a message carries descriptions, never data).
MAX_MESSAGE_BYTES = 4 << 20
HANDLE_BYTES = 64  # a CUDA IPC memory handle
_HEADER = struct.Struct("<I")


class ChannelClosed(EOFError):
    """The other end closed its pipe (it exited, or died)."""


class ProtocolError(ValueError):
    """A message that is not what the protocol allows (too large, not JSON, fields of the wrong kind)."""


def send(fd: int, message: dict) -> None:
    payload = json.dumps(message, separators=(",", ":")).encode()
    data = _HEADER.pack(len(payload)) + payload
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def receive(fd: int, limit: int = MAX_MESSAGE_BYTES) -> dict:
    (size,) = _HEADER.unpack(_read_exactly(fd, _HEADER.size))
    if size > limit:
        raise ProtocolError(f"a message of {size} bytes (the limit is {limit})")
    try:
        message = json.loads(_read_exactly(fd, size))
    except ValueError as error:
        raise ProtocolError(f"a message that is not JSON ({error})")
    if not isinstance(message, dict):
        raise ProtocolError("a message that is not a JSON object")
    return message


def _read_exactly(fd: int, size: int) -> bytes:
    chunks, remaining = [], size
    while remaining:
        chunk = os.read(fd, min(remaining, 1 << 20))
        if not chunk:
            raise ChannelClosed("the other end closed the pipe")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


# --- what crosses: values, arguments and outputs

def encode_value(value):
    """A plain Python value as JSON that keeps tuples tuples (a kernel_size, say) and dtypes dtypes."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, tuple):
        return {"tuple": [encode_value(item) for item in value]}
    if isinstance(value, list):
        return [encode_value(item) for item in value]
    if isinstance(value, dict) and all(isinstance(key, str) for key in value):
        return {"dict": {key: encode_value(item) for key, item in value.items()}}
    if type(value).__module__ == "torch" and type(value).__name__ == "dtype":
        return {"torch_dtype": str(value).removeprefix("torch.")}
    raise TypeError(f"kbench cannot pass a {type(value).__name__} to the runner")


def decode_value(data):
    if isinstance(data, list):
        return [decode_value(item) for item in data]
    if isinstance(data, dict):
        if "tuple" in data:
            return tuple(decode_value(item) for item in data["tuple"])
        if "dict" in data:
            return {key: decode_value(item) for key, item in data["dict"].items()}
        if "torch_dtype" in data:
            import torch
            return getattr(torch, data["torch_dtype"])
    return data


# --- arguments and outputs ----------------------------------------------------------------

@dataclass(frozen=True)
class TensorRef:
    """A tensor that lives in an arena: `arena` names the buffer, the rest says how to view its bytes (as the
    problem's argument was laid out in its storage, which the arena holds from its first byte)."""

    arena: str
    dtype: str                 # "float32", as torch names it without "torch."
    shape: tuple[int, ...]
    stride: tuple[int, ...]    # in elements
    offset: int                # storage offset, in elements

    def to_wire(self) -> dict:
        return {"tensor": {"arena": self.arena, "dtype": self.dtype, "shape": list(self.shape),
                           "stride": list(self.stride), "offset": self.offset}}


@dataclass(frozen=True)
class OutputMeta:
    """What the runner says one output tensor is; its bytes are in the judge's output arena `index`."""

    dtype: str
    shape: tuple[int, ...]
    device: str                # "cpu", "cuda:0"
    kind: str = "Tensor"       # the Python type's name: anything but Tensor/Parameter is a failure

    @classmethod
    def from_wire(cls, data) -> "OutputMeta":
        if not isinstance(data, dict):
            raise ProtocolError("an output description that is not an object")
        shape = data.get("shape")
        if not isinstance(shape, list) or not all(isinstance(n, int) and n >= 0 for n in shape):
            raise ProtocolError(f"an output shape that is not a list of sizes: {shape!r}")
        return cls(dtype=_text(data.get("dtype")), shape=tuple(shape), device=_text(data.get("device")),
                   kind=_text(data.get("kind")))


def _text(value) -> str:
    if not isinstance(value, str) or len(value) > 200:
        raise ProtocolError(f"a field that should be a short string: {value!r:.80}")
    return value


# --- replies -----------------------------------------------------------------------------------------------

# The statuses a runner may report for its own failures. Anything else it claims is read as a load error: a
# runner cannot report a verdict that helps it.
RUNNER_FAILURES = ("load_error", "compile_error", "runtime_error")


@dataclass(frozen=True)
class Failure:
    status: str
    message: str

    @classmethod
    def in_reply(cls, reply: dict) -> "Failure | None":
        """The failure a reply reports (None: it reports none)."""
        if "failure" not in reply:
            return None
        return cls.from_wire(reply["failure"] if isinstance(reply["failure"], dict) else {})

    @classmethod
    def from_wire(cls, data: dict) -> "Failure":
        status = data.get("status")
        message = data.get("message") if isinstance(data.get("message"), str) else "(no message)"
        return cls(status if status in RUNNER_FAILURES else "load_error", message[:2000])


class HeldRef(NamedTuple):
    """One output a batch's call left in the runner's memory (runner/held.py): its allocation (an index into the
    batch's handles), the byte at which the output's storage starts there, and its layout over that storage. A
    named tuple, checked in one pass: the judge reads one per call and output inside its clock, where a frozen
    dataclass and a helper per field cost more than the rest of its parse."""

    handle: int
    at: int
    stride: tuple[int, ...]
    offset: int

    def to_wire(self) -> list:
        return [self.handle, self.at, list(self.stride), self.offset]

    @classmethod
    def from_wire(cls, data, handles: int) -> "HeldRef | None":
        if data is None:
            return None
        if type(data) is not list or len(data) != 4:
            raise ProtocolError("a held output that is not [handle, at, stride, offset]")
        handle, at, stride, offset = data
        if type(handle) is not int or not 0 <= handle < handles:
            raise ProtocolError("a held output whose handle the batch did not send")
        for count in (at, offset):
            if type(count) is not int or not 0 <= count < _COUNT_LIMIT:
                raise ProtocolError("a held output whose place is not a count")
        if type(stride) is not list or len(stride) > 64:
            raise ProtocolError("a held output whose stride is not a list of at most 64 counts")
        for step in stride:
            if type(step) is not int or step < 0:
                raise ProtocolError("a held output whose stride is not a list of at most 64 counts")
        return cls(handle, at, tuple(stride), offset)


@dataclass(frozen=True)
class HeldOutputs:
    """Where a batch's calls left their outputs: the allocations' CUDA IPC handles, and per call, per plain output,
    its place in one of them (None: an empty output, or one in memory the driver does not share)."""

    handles: tuple[bytes, ...] = ()
    calls: tuple[tuple[HeldRef | None, ...], ...] = ()

    @classmethod
    def from_wire(cls, data) -> "HeldOutputs":
        if data is None:
            return cls()
        if not isinstance(data, dict):
            raise ProtocolError("held outputs that are not an object")
        try:
            handles = tuple(base64.b64decode(_text(value), validate=True) for value in _list(data.get("handles")))
        except ValueError:
            raise ProtocolError("a held output's handle that is not base64")
        if any(len(handle) != HANDLE_BYTES for handle in handles):
            raise ProtocolError("a held output's handle that is not a CUDA IPC handle")
        calls = tuple(tuple(HeldRef.from_wire(item, len(handles)) for item in _list(call)[:64])
                      for call in _list(data.get("calls")))
        return cls(handles, calls)


@dataclass(frozen=True)
class CallReply:
    """The runner's account of one call; every field is a claim the judge checks or bounds."""

    outputs: tuple[OutputMeta, ...] = ()
    sequence: bool = False     # a tuple or list of tensors (else one tensor)
    aliases_input: tuple[int, ...] = ()  # outputs whose storage overlaps an input's
    ops: tuple[str, ...] = ()  # aten ops the call dispatched (when asked)
    library_only: str | None = None  # kernel attribution's finding (when asked)
    grow: tuple[int, ...] = ()  # bytes each output needs, when an arena is too small (nothing copied)
    held: HeldOutputs = HeldOutputs()  # a batch's outputs left where its calls put them

    @classmethod
    def from_wire(cls, data: dict) -> "CallReply":
        outputs = data.get("outputs", [])
        if not isinstance(outputs, list) or len(outputs) > 64:
            raise ProtocolError("outputs that are not a short list")
        return cls(outputs=tuple(OutputMeta.from_wire(item) for item in outputs),
                   sequence=bool(data.get("sequence")),
                   aliases_input=tuple(_ints(data.get("aliases_input", []))),
                   ops=tuple(_text(op) for op in _list(data.get("ops", []))),
                   library_only=None if data.get("library_only") is None else _text(data["library_only"][:200]),
                   grow=tuple(_ints(data.get("grow", []))),
                   held=HeldOutputs.from_wire(data.get("held")))


def _list(value) -> list:
    if not isinstance(value, list) or len(value) > 10000:
        raise ProtocolError("a field that should be a list")
    return value


_COUNT_LIMIT = 1 << 48


def _count(value) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < _COUNT_LIMIT:
        raise ProtocolError("a field that should be a count")
    return value


def _ints(value) -> list[int]:
    items = _list(value)
    if not all(isinstance(item, int) and item >= 0 for item in items):
        raise ProtocolError("a field that should be a list of counts")
    return items


@dataclass(frozen=True)
class BuildInfo:
    """What the runner says its builds did (shown, never decisive)."""

    seconds: float | None = None
    reused: bool | None = None
    extensions: int = 0

    @classmethod
    def from_wire(cls, data) -> "BuildInfo":
        if not isinstance(data, dict):
            return cls()
        seconds = data.get("seconds")
        reused = data.get("reused")
        count = data.get("extensions")
        return cls(float(seconds) if isinstance(seconds, (int, float)) else None,
                   reused if isinstance(reused, bool) else None, count if isinstance(count, int) else 0)


@dataclass(frozen=True)
class Progress:
    """An unsolicited message while the runner works: the extension it is building now ("" when none)."""

    building: str = ""
    since: float | None = None
