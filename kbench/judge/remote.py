"""The candidate's models as the judge sees them (the runner process itself: remote_process.py).

RemoteModel is a model whose calls run in the runner: the judge puts the arguments in its arenas,
the runner calls ModelNew on them and copies the outputs into the judge's output arenas, and the judge copies
them out again at once into memory only it holds. What the runner says about an output (type, dtype, shape,
device) is checked before its bytes are read; a call it says it timed is bounded by the judge's own clock
(timed_sides.RemoteTimer).
"""

from __future__ import annotations

import time
from typing import Callable

import torch

from kbench.judge.progress import Stop
from kbench.judge.remote_process import RunnerDied, RunnerProcess, describe_exit
from kbench.loading import release_cached_memory
from kbench.results import Status
from kbench.runner import wire
from kbench.runner.arenas import dtype_name, dtype_of, nbytes, view

_PLAIN_KINDS = ("Tensor", "Parameter")


class RemoteModel:
    """ModelNew in the runner. Calling it returns outputs in the judge's memory, or raises Stop."""

    def __init__(self, runner: RunnerProcess, instance: str, of_reference: bool = False):
        self.runner = runner
        self.instance = instance
        self.of_reference = of_reference  # the problem's Model in the reference's runner: its failures are the problem's
        self.last: wire.CallReply | None = None
        self.received_at = 0.0
        self.private: dict[int, torch.Tensor] = {}  # the judge's copies of timed outputs, by output index
        self.staged: list = []  # the last call's arguments as the runner saw them (arena views; None: not a tensor)

    def __call__(self, *inputs):
        return self.call(list(inputs))

    def call(self, inputs: list, mode: str = "plain"):
        """The outputs for `inputs`, which are copied into the arenas (unless they are arena views already) and
        stay as they were; what the candidate did to its copies is in `staged` until the next call."""
        message, self.staged = self.stage(inputs)
        output, reply = self.send(message, mode)
        return output

    def release_arenas(self) -> None:
        """Free the runner's arenas and what both processes keep cached for them (the next call makes new ones):
        on a card they may hold gigabytes the judge needs meanwhile."""
        self._reply(self.runner.request({"op": "release"}))
        self.staged, self.private = [], {}
        self.runner.arenas.close()
        if self.runner.device.type == "cuda":
            torch.cuda.ipc_collect()  # arenas the runner mapped wait in torch's limbo until it let go
        release_cached_memory(self.runner.device)

    def arena_views(self, inputs: list) -> list:
        """Views of the input arenas shaped like `inputs`, holding their contents (the timing loop's buffers)."""
        _, views = self.stage(inputs)
        return [view if view is not None else value for view, value in zip(views, inputs)]

    def stage(self, inputs: list, prefix: str = "in") -> tuple[dict, list]:
        """The call's message with the arguments in arenas (copied there now, unless they are the arenas'
        views already: the timing loop's buffers), and the arena views."""
        arguments, views = [], []
        for index, value in enumerate(inputs):
            if isinstance(value, torch.Tensor):
                arena = self.runner.arenas.ensure(f"{prefix}{index}", nbytes(value.dtype, value.shape))
                staged = self.runner.arenas.view(arena, value.dtype, value.shape)
                if staged.data_ptr() != value.data_ptr() or not staged.numel():  # else it is there already
                    staged.copy_(value)
                views.append(staged)
                arguments.append(wire.TensorRef(arena, dtype_name(value.dtype), tuple(value.shape)).to_wire())
            else:
                views.append(None)
                arguments.append({"value": _encoded(value)})
        if self.runner.device.type == "cuda":  # the runner reads them (written on the judge's stream) at once
            torch.cuda.synchronize(self.runner.device)
        return {"op": "call", "instance": self.instance, "args": arguments}, views

    def send(self, message: dict, mode: str) -> tuple[object, wire.CallReply]:
        """Run a staged call; (the outputs, copied into the judge's memory, and the runner's reply)."""
        message = dict(message, mode=mode, outputs=self._output_arenas())
        data = self._reply(self.runner.request(message))
        if "grow" in data:  # the outputs need more room than the arenas have: make it, then take delivery
            arenas = [self.runner.arenas.ensure(f"out{index}", size) for index, size in enumerate(_sizes(data["grow"]))]
            data = self._reply(self.runner.request({"op": "deliver", "outputs": arenas}))
        reply = _parsed(data)
        self.last = reply
        outputs = self._outputs(reply, timed=mode == "timed")
        if self.runner.device.type == "cuda":
            torch.cuda.synchronize(self.runner.device)
        # The judge's clock stops once it holds the outputs (timed_sides.RemoteTimer): a runner that replied before
        # its work was done either waited for it here or handed over what its work had not yet written.
        self.received_at = time.perf_counter()
        return outputs, reply

    def _output_arenas(self) -> list[str]:
        slots = self.runner.arenas.slots
        return [slots[f"out{index}"] for index in range(len(slots)) if f"out{index}" in slots]

    def _reply(self, data: dict) -> dict:
        failure = wire.Failure.in_reply(data)
        if failure is not None:
            raise self._stop(failure.status, failure.message)
        return data

    def _stop(self, status: str, message: str) -> Stop:
        if self.of_reference:
            return Stop(Status.REFERENCE_ERROR, f"the reference failed in its runner: {message}")
        return Stop(status, message)

    def _private(self, index: int, shared: torch.Tensor) -> torch.Tensor:
        """A copy of `shared` in a buffer of the judge's kept for output `index` of timed calls: no allocation
        between the request and the judge's clock (the copy is valid until the next timed call)."""
        size = shared.numel() * shared.element_size()
        buffer = self.private.get(index)
        if buffer is None or buffer.numel() < size:
            buffer = self.private[index] = torch.empty(max(size, 1), dtype=torch.uint8, device=shared.device)
        copy = view(buffer, shared.dtype, shared.shape)
        copy.copy_(shared)
        return copy

    def _outputs(self, reply: wire.CallReply, timed: bool = False):
        """Plain tensors of the judge's, copied out of the output arenas, in the structure the runner returned."""
        values = []
        arenas = self._output_arenas()
        for index, meta in enumerate(reply.outputs):
            if meta.kind not in _PLAIN_KINDS:
                raise self._stop(Status.INCORRECT, f"output {index} is a {meta.kind}, not a plain torch.Tensor")
            if meta.device != str(self.runner.device) and not (
                    self.runner.device.type == "cuda" and meta.device == "cuda" and self.runner.device.index is None):
                raise self._stop(Status.INCORRECT, f"output {index} is on {meta.device}, not on {self.runner.device}")
            try:
                dtype = dtype_of(meta.dtype)
                shared = self.runner.arenas.view(arenas[index], dtype, meta.shape)
                values.append(self._private(index, shared) if timed else shared.clone())
            except (ValueError, IndexError) as error:
                raise self._stop(Status.INCORRECT, f"output {index} could not be read ({error})")
        if not reply.sequence:
            if len(values) != 1:
                raise self._stop(Status.INCORRECT, "returned no output")
            return values[0]
        return tuple(values)


def _encoded(value):
    try:
        return wire.encode_value(value)
    except TypeError as error:
        raise Stop(Status.REFERENCE_ERROR, f"{error} (an argument of the problem's)")


def _sizes(values) -> list[int]:
    if not isinstance(values, list) or len(values) > 64 or not all(isinstance(v, int) and 0 <= v < (1 << 40)
                                                                     for v in values):
        raise Stop(Status.INCORRECT, "asked for output room kbench cannot give")
    return values


def _parsed(data: dict) -> wire.CallReply:
    try:
        return wire.CallReply.from_wire(data)
    except wire.ProtocolError as error:
        raise Stop(Status.INCORRECT, f"the runner's reply broke the protocol: {error}")


def new_candidate(runner: RunnerProcess, init_inputs: list, seed: int, overrides: dict,
                  precision: str = "float32") -> RemoteModel:
    """ModelNew(*init_inputs) built in the runner right after `seed` and cast to `precision`, as the reference was,
    at the sizes `overrides` set (the runner's copy of the problem follows them); the runner's earlier instances
    go."""
    return _built(RemoteModel(runner, runner.new_instance()), "build", init_inputs, seed, overrides,
                  precision=precision)


def begin_stand_in(runner: RunnerProcess, problem_path: str, policy: str, init_inputs: list, seed: int,
                   overrides: dict, log_path: str = "", precision: str = "float32") -> Callable[[], RemoteModel]:
    """Start building the problem's own Model in the reference's runner, right after `seed` as the judge's was:
    the reference the timing loop times (measure.py). Returns what waits for it, so the judge can run its own
    reference meanwhile. The runner's output goes to `log_path` from then on."""
    return _begin(RemoteModel(runner, "stand_in", of_reference=True), "stand_in", init_inputs, seed, overrides,
                  problem=problem_path, policy=policy, log_path=log_path, precision=precision)


def _built(model: RemoteModel, op: str, init_inputs: list, seed: int, overrides: dict, **fields) -> RemoteModel:
    """`model`, built in its runner by `op` from init arguments staged like a call's."""
    return _begin(model, op, init_inputs, seed, overrides, **fields)()


def _begin(model: RemoteModel, op: str, init_inputs: list, seed: int, overrides: dict,
           **fields) -> Callable[[], RemoteModel]:
    message, _ = model.stage(init_inputs, prefix="init")
    model.runner.send({"op": op, "instance": model.instance, "init": message["args"], "seed": seed,
                       "overrides": wire.encode_value(dict(overrides)), **fields})

    def built() -> RemoteModel:
        model._reply(model.runner.reply())
        return model
    return built


def failure_of(error: RunnerDied, phase: str) -> Stop:
    """A runner that died is the candidate's doing: crashed (with the signal), in the phase it died in."""
    return Stop(Status.CRASHED, f"{describe_exit(error.returncode)} while {phase}")

