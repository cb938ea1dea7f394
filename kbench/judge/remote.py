"""The candidate's models as the judge sees them (the runner process itself: remote_process.py).

RemoteModel is a model whose calls run in the runner: the judge puts the arguments in its arenas,
the runner calls ModelNew on them and copies the outputs into the judge's output arenas, and the judge copies
them out again at once into memory only it holds. What the runner says about an output (type, dtype, shape,
device) is checked before its bytes are read; the room it asks for is bounded by what the reference's outputs need
(output_room.py). The timing loop's calls come in batches on a ring of input sets (load_ring, run_batch), timed by
the judge's own clock (sides.py); on a GPU their outputs are read where the calls left them (runner/held.py).
Models are built by instances.py.
"""

from __future__ import annotations

import time
from typing import Callable

import torch

from kbench.failures import RUNNER_REPORTS, Evidence, Kind, Party, Stop
from kbench.judge.copies import BatchOutputs, CopyBuffers, slot_bytes, slots_view
from kbench.judge.output_room import OutputRoom
from kbench.judge.remote_process import RunnerProcess
from kbench.layouts import laid_out, nbytes, plain, storage_bytes
from kbench.loading import release_cached_memory, synchronize
from kbench.runner import wire
from kbench.runner.arenas import dtype_name, dtype_of
from kbench.runner.held import HoldUnusable, Imports, copy_held, overlapping

_PLAIN_KINDS = ("Tensor", "Parameter")

class RemoteModel:
    """ModelNew in the runner. Calling it returns outputs in the judge's memory, or raises Stop."""

    def __init__(self, runner: RunnerProcess, instance: str, of_reference: bool = False,
                 room: OutputRoom | None = None):
        self.runner = runner
        self.instance = instance
        self.of_reference = of_reference  # the problem's Model in the reference's runner: its failures are the problem's
        self.room = room  # None: the reference's runner (no candidate code), bounded only by _sizes
        self.last: wire.CallReply | None = None
        self.ring_slots: list[tuple[str, int]] = []  # per output: the arena of the ring's output slots, bytes per slot
        self.copies = CopyBuffers(runner.device)  # the judge's copies of the ring's output slots (run_batch)
        self.staged: list = []  # the last call's arguments as the runner saw them (arena views; None: not a tensor)
        self.imports = Imports(runner.device) if runner.device.type == "cuda" else None  # held outputs' memory

    def __call__(self, *inputs):
        return self.call(list(inputs))

    def call(self, inputs: list, mode: str = "plain"):
        """The outputs for `inputs`, which are copied into the arenas (unless they are arena views already) and
        stay as they were; what the candidate did to its copies is in `staged` until the next call."""
        message, self.staged = self.stage(inputs)
        output, reply = self.send(message, mode)
        return output

    def begin(self, op: str, init_inputs: list, seed: int, overrides: dict, **fields) -> Callable[[], "RemoteModel"]:
        """Start building this model in its runner by `op` ("build", "stand_in") from init arguments staged like a
        call's; returns what waits for it (and raises the runner's failure)."""
        message, _ = self.stage(init_inputs, prefix="init")
        self.runner.send({"op": op, "instance": self.instance, "init": message["args"], "seed": seed,
                          "overrides": wire.encode_value(dict(overrides)), **fields})

        def built() -> RemoteModel:
            self._reply(self.runner.reply())
            return self
        return built

    def release_arenas(self) -> None:
        """Free the runner's arenas and what both processes keep cached for them (the next call makes new ones):
        on a card they may hold gigabytes the judge needs meanwhile."""
        self.close_held()  # before the runner frees what they map
        self._reply(self.runner.request({"op": "release"}))
        self.staged, self.ring_slots, self.copies = [], [], CopyBuffers(self.runner.device)
        self.runner.arenas.close()
        if self.runner.device.type == "cuda":
            torch.cuda.ipc_collect()  # arenas the runner mapped wait in torch's limbo until it let go
        release_cached_memory(self.runner.device)

    def stage(self, inputs: list, prefix: str = "in") -> tuple[dict, list]:
        """The call's message with the arguments in arenas, and the arena views: each storage the arguments view
        is copied once into the arena of its first argument (as far as its views reach; not when they are the
        arena's views already: the timing loop's buffers), and each view is rebuilt there with its own dtype,
        shape, stride and storage offset, so the runner sees the problem's layout and sharing."""
        inputs = [plain(value) if isinstance(value, torch.Tensor) else value for value in inputs]
        arena_of: dict[int, str] = {}  # input index -> its storage's arena

        def filled_arena(first: int, members: list[int], size: int) -> torch.Tensor:
            arena = self.runner.arenas.ensure(f"{prefix}{first}", size)
            arena_of.update(dict.fromkeys(members, arena))
            buffer = self.runner.arenas.buffers[arena]
            if size and inputs[first].untyped_storage().data_ptr() != buffer.data_ptr():  # else it is there already
                buffer[:size].copy_(storage_bytes(inputs[first], size))
            return buffer
        views = laid_out(inputs, filled_arena)
        arguments = [wire.TensorRef(arena_of[index], dtype_name(value.dtype), tuple(value.shape),
                                    tuple(value.stride()), value.storage_offset()).to_wire()
                     if isinstance(value, torch.Tensor) else {"value": _encoded(value)}
                     for index, value in enumerate(inputs)]
        if self.runner.device.type == "cuda":  # the runner reads them (written on the judge's stream) at once
            torch.cuda.synchronize(self.runner.device)
        return {"op": "call", "instance": self.instance, "args": arguments}, views

    def send(self, message: dict, mode: str) -> tuple[object, wire.CallReply]:
        """Run a staged call; (the outputs, copied into the judge's memory, and the runner's reply)."""
        message = dict(message, mode=mode, outputs=self._output_arenas())
        data = self._reply(self.runner.request(message))
        if "grow" in data:  # the outputs need more room than the arenas have: make it, then take delivery
            arenas = self._grown(_sizes(data["grow"]))
            data = self._reply(self.runner.request({"op": "deliver", "outputs": arenas}))
        reply = _parsed(data)
        self.last = reply
        return self._outputs(reply), reply

    # --- the timing loop's batches ---------------------------------------------------------------------------

    def load_ring(self, input_sets: list[list], output_bytes: list[int]) -> list[list]:
        """Stage the ring (untimed): each of the K input sets in arenas of its own (the first in the plain calls'
        arenas, the others with the prefix "r{i}_"), and per output an arena of K slots of `output_bytes` (rounded
        up) each, the plain calls' output arena grown; the runner resolves them once. Returns each set's views,
        which the timing loop refills in place before every batch."""
        calls, views = [], []
        for index, inputs in enumerate(input_sets):
            message, staged = self.stage(inputs, prefix=f"r{index}_" if index else "in")
            calls.append(message["args"])
            views.append([view if view is not None else value for view, value in zip(staged, inputs)])
        strides = [slot_bytes(size) for size in output_bytes]
        self.ring_slots = [(self.runner.arenas.ensure(f"out{index}", len(input_sets) * stride), stride)
                           for index, stride in enumerate(strides)]
        self._reply(self.runner.request({"op": "ring", "calls": calls,
                                         "outputs": [{"arena": arena, "stride": stride}
                                                     for arena, stride in self.ring_slots]}))
        return views

    def run_batch(self, count: int, precision: str | None = None, kept: bool = False,
                  hold: bool = False, into: int = 0) -> BatchOutputs:
        """`count` calls in the runner, call i on the ring's input set i; returns their outputs, copied into the
        judge's buffer `into` (copies.py; valid until the next batch into it) before it returns: out of the ring's
        slots, or with `hold` (on a GPU) out of the runner's own memory where its calls left them (runner/held.py;
        HoldUnusable where they cannot be read there). The judge's clock around it (sides.BatchTimer) stops only
        once the judge holds them, so work the runner left queued, or did after its reply, is either inside the
        clock or missing from the copies (and fails their check). `kept`: each call returns the outputs keep() kept,
        at no cost (the reference's runner's calibration batches)."""
        reply = self._batch_reply(count, precision, kept, hold)
        replied_at = time.perf_counter()
        self.last = reply
        if hold and count:
            rings = self._held_copies(reply, count, shared=kept, into=into)
        else:
            rings = self._ring_copies(reply, count, into) if count else []
        outputs = BatchOutputs(rings, reply.sequence, replied_at)
        synchronize(self.runner.device)
        if hold:
            self.imports.close_unused()
        return outputs

    def close_held(self) -> None:
        """Close the runner's allocations the judge opened to read held outputs (none on a CPU)."""
        if self.imports is not None:
            self.imports.close()

    def keep(self) -> None:
        """Have the runner keep the model's outputs on its ring's first input sets (untimed), for run_batch(kept)."""
        self._reply(self.runner.request({"op": "keep", "instance": self.instance}))

    def copy_ms(self, count: int, hold: bool = False) -> float:
        """The judge's own copy of `count` slots of every output (what each batch of `count` does inside its clock),
        timed on its clock: measured with the runners idle, it is subtracted from every batch (timed_sides.py). With
        `hold`, the copy of `count` held outputs (those of a batch of kept outputs, run first, untimed)."""
        reply = self._batch_reply(count, kept=True, hold=True) if hold else None
        synchronize(self.runner.device)
        started = time.perf_counter()
        if hold:
            self._held_copies(reply, count, shared=True)
        else:
            for index, (arena, stride) in enumerate(self.ring_slots):
                self._copied(index, arena, count * stride)
        synchronize(self.runner.device)
        return (time.perf_counter() - started) * 1e3

    def reserve_copies(self, count: int, into: int) -> None:
        """The judge's buffer `into` for the outputs of a batch of `count` calls, made now (untimed)."""
        for index, (_, stride) in enumerate(self.ring_slots):
            self.copies.buffer(index, count * stride, into)

    def _batch_reply(self, count: int, precision: str | None = None, kept: bool = False,
                     hold: bool = False) -> wire.CallReply:
        """The runner's reply to a batch of `count` calls (run_batch says what the options ask)."""
        message = {"op": "batch", "instance": self.instance, "count": count}
        message.update({name: value for name, value in (("precision", precision), ("kept", kept), ("hold", hold))
                        if value})
        return _parsed(self._reply(self.runner.request(message)))

    def _ring_copies(self, reply: wire.CallReply, count: int, into: int = 0) -> list[torch.Tensor]:
        """Per output: its `count` slots copied into the judge's buffer `into` in one copy, seen as [count, *shape]."""
        rings = []
        for index, (arena, stride, dtype, shape) in enumerate(self._readable(reply)):
            copied = self._copied(index, arena, count * stride, into)
            rings.append(slots_view(copied, dtype, shape, count, stride))
        return rings

    def _held_copies(self, reply: wire.CallReply, count: int, shared: bool = False,
                     into: int = 0) -> list[torch.Tensor]:
        """Per output: each call's output copied out of the runner's memory, where the call left it, into slot i of
        the judge's buffer `into` for it (held.copy_held), seen as [count, *shape]. HoldUnusable where the reply does
        not name a place for every call's output, or (unless `shared`: kept outputs, which repeat) names overlapping
        places: memory a later call overwrote."""
        held = reply.held
        if len(held.calls) != count:
            raise HoldUnusable(f"the runner named places for {len(held.calls)} of {count} calls' outputs")
        rings, spans = [], []
        for index, (arena, stride, dtype, shape) in enumerate(self._readable(reply)):
            ring = slots_view(self.copies.buffer(index, count * stride, into), dtype, shape, count, stride)
            rings.append(ring)
            if nbytes(dtype, shape):
                spans += copy_held(self.imports, held, index, dtype, shape, self.copies.slot_list(ring, index, into))
        if not shared and overlapping(spans):
            raise HoldUnusable("two calls' outputs share memory (a later call may have overwritten an earlier one's)")
        return rings

    def _readable(self, reply: wire.CallReply) -> list[tuple[str, int, torch.dtype, tuple]]:
        """Per output the reply describes: its slots' arena and stride, its dtype and shape; a Stop where it is not
        a plain tensor on the judge's device that fits its slot."""
        found = []
        for index, meta in enumerate(reply.outputs):
            self._check_meta(index, meta)
            if index >= len(self.ring_slots):
                raise self._stop(Kind.WRONG_OUTPUT, f"returned {len(reply.outputs)} outputs, the reference "
                                                   f"{len(self.ring_slots)}")
            arena, stride = self.ring_slots[index]
            try:
                dtype = dtype_of(meta.dtype)
                if nbytes(dtype, meta.shape) > stride:
                    raise ValueError(f"larger than the reference's ({stride} bytes)")
            except ValueError as error:
                raise self._stop(Kind.WRONG_OUTPUT, f"output {index} could not be read ({error})")
            found.append((arena, stride, dtype, meta.shape))
        return found

    def _copied(self, index: int, arena: str, size: int, into: int = 0) -> torch.Tensor:
        """The first `size` bytes of `arena`, copied into the judge's buffer `into` for output `index`."""
        buffer = self.copies.buffer(index, size, into)
        buffer[:size].copy_(self.runner.arenas.buffers[arena][:size])
        return buffer

    def reserve_output_room(self) -> None:
        """The output arenas the reference's outputs need, made now, before the candidate's code runs on: room
        the runner cannot have taken first."""
        for index, size in enumerate(self.room.sizes):
            self.runner.arenas.ensure(f"out{index}", size)

    def _grown(self, sizes: list[int]) -> list[str]:
        """The output arenas, with room for `sizes` bytes each (within the room the reference's outputs allow)."""
        refusal = None if self.room is None else self.room.refusal(sizes)
        if refusal:
            raise self._stop(Kind.WRONG_OUTPUT, f"kbench gave its outputs no more room: it {refusal}")
        try:
            return [self.runner.arenas.ensure(f"out{index}", size) for index, size in enumerate(sizes)]
        except (torch.OutOfMemoryError, OSError) as error:  # the room it asked for, within its bounds: its outputs'
            raise self._stop(Kind.OUT_OF_MEMORY, f"its outputs ({sum(sizes)} bytes) did not fit in the memory "
                                                   f"left: {str(error).splitlines()[0][:200]}")

    def _output_arenas(self) -> list[str]:
        slots = self.runner.arenas.slots
        return [slots[f"out{index}"] for index in range(len(slots)) if f"out{index}" in slots]

    def _reply(self, data: dict) -> dict:
        failure = wire.Failure.in_reply(data)
        if failure is not None:
            raise self._stop(RUNNER_REPORTS[failure.status], failure.message)
        return data

    def _stop(self, kind: Kind, message: str) -> Stop:
        if self.of_reference:
            return Stop(Evidence(Party.REFERENCE, kind, f"the reference failed in its runner: {message}"))
        return Stop(Evidence(Party.CANDIDATE, kind, message))

    def _check_meta(self, index: int, meta: wire.OutputMeta) -> None:
        if meta.kind not in _PLAIN_KINDS:
            raise self._stop(Kind.WRONG_OUTPUT, f"output {index} is a {meta.kind}, not a plain torch.Tensor")
        if meta.device != str(self.runner.device) and not (
                self.runner.device.type == "cuda" and meta.device == "cuda" and self.runner.device.index is None):
            raise self._stop(Kind.WRONG_OUTPUT, f"output {index} is on {meta.device}, not on {self.runner.device}")

    def _outputs(self, reply: wire.CallReply):
        """Plain tensors of the judge's, copied out of the output arenas, in the structure the runner returned."""
        values = []
        arenas = self._output_arenas()
        for index, meta in enumerate(reply.outputs):
            self._check_meta(index, meta)
            try:
                dtype = dtype_of(meta.dtype)
                shared = self.runner.arenas.view(arenas[index], dtype, meta.shape)
                values.append(shared.clone())
            except (ValueError, IndexError) as error:
                raise self._stop(Kind.WRONG_OUTPUT, f"output {index} could not be read ({error})")
        if not reply.sequence:
            if len(values) != 1:
                raise self._stop(Kind.WRONG_OUTPUT, "returned no output")
            return values[0]
        return tuple(values)


def _encoded(value):
    try:
        return wire.encode_value(value)
    except TypeError as error:
        raise Stop(Evidence(Party.REFERENCE, Kind.RAISED, f"{error} (an argument of the problem's)"))


def _sizes(values) -> list[int]:
    if not isinstance(values, list) or len(values) > 64 or not all(isinstance(v, int) and 0 <= v < (1 << 40)
                                                                     for v in values):
        raise Stop(Evidence(Party.CANDIDATE, Kind.BROKE_PROTOCOL, "asked for output room kbench cannot give"))
    return values


def _parsed(data: dict) -> wire.CallReply:
    try:
        return wire.CallReply.from_wire(data)
    except wire.ProtocolError as error:
        raise Stop(Evidence(Party.CANDIDATE, Kind.BROKE_PROTOCOL, f"the runner's reply broke the protocol: {error}"))
