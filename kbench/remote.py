"""The judge's end of the boundary: the runner process, and the candidate's models as the judge sees them.

RunnerProcess starts the runner (kbench.sandbox.runner: a fork of the judge before it touches CUDA, else a fresh
interpreter) in a session of its own, speaks to it through two pipes (sandbox/wire.py) and kills it and
everything it left behind when the evaluation ends, before the judge writes its verdict. RemoteModel is a model whose calls run in the runner: the judge puts the arguments in its arenas,
the runner calls ModelNew on them and copies the outputs into the judge's output arenas, and the judge copies
them out again at once into memory only it holds. What the runner says about an output (type, dtype, shape,
device) is checked before its bytes are read; a call it says it timed is bounded by the judge's own clock
(timing.RemoteTimer).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from kbench.progress import Stop
from kbench.results import Status
from kbench.sandbox import wire
from kbench.sandbox.arenas import JudgeArenas, dtype_name, dtype_of, nbytes, view
from kbench.sandbox.limits import is_subreaper

_PLAIN_KINDS = ("Tensor", "Parameter")


class RunnerDied(Exception):
    """The runner's pipe closed: it exited or was killed (`returncode` as subprocess gives it)."""

    def __init__(self, returncode: int | None):
        self.returncode = returncode
        super().__init__(describe_exit(returncode))


def describe_exit(returncode: int | None) -> str:
    if returncode is None:
        return "the runner stopped answering"
    if returncode < 0:
        try:
            return f"the runner was killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"the runner was killed by signal {-returncode}"
    return f"the runner exited with code {returncode}"


class RunnerProcess:
    """One runner: started (warming up) as early as the judge can, used by one evaluation, then killed."""

    def __init__(self, device: str):
        self.device = torch.device(device)
        base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
        self.exchange = Path(tempfile.mkdtemp(prefix="kbench-exchange-", dir=base))
        self.scratch = Path(tempfile.mkdtemp(prefix="kbench-scratch-"))
        commands_read, self.commands = os.pipe()
        self.replies, replies_write = os.pipe()
        environment = {"TMPDIR": str(self.scratch), "TORCHINDUCTOR_CACHE_DIR": str(self.scratch / "inductor")}
        arguments = [str(commands_read), str(replies_write), device]
        if torch.cuda.is_initialized():  # a fork could not use CUDA: a fresh interpreter
            self.process = subprocess.Popen([sys.executable, "-m", "kbench.sandbox.runner", *arguments],
                                            pass_fds=(commands_read, replies_write), start_new_session=True,
                                            env=dict(os.environ, **environment), stdin=subprocess.DEVNULL)
        else:  # torch is imported already and nothing of CUDA exists: a fork starts in milliseconds
            self.process = _fork_runner(arguments, environment, keep=(commands_read, replies_write))
        os.close(commands_read)
        os.close(replies_write)
        self.arenas = JudgeArenas(self.device, self.exchange)
        self.instances = 0

    def request(self, message: dict, on_progress=None) -> dict:
        """Send a command and wait for its reply; progress messages on the way go to `on_progress`."""
        message = dict(message, arenas=self.arenas.take_unsent())
        try:
            wire.send(self.commands, message)
            while True:
                reply = wire.receive(self.replies)
                if reply.get("event") == "building":
                    if on_progress is not None:
                        on_progress(wire.Progress(str(reply.get("building") or "")[:200], _number(reply.get("since"))))
                    continue
                return reply
        except (wire.ChannelClosed, BrokenPipeError):
            raise RunnerDied(self._returncode()) from None

    def new_instance(self) -> str:
        self.instances += 1
        return f"model{self.instances}"

    def _returncode(self) -> int | None:
        try:
            return self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return None

    def pause(self) -> None:
        """Stop the runner's process group while the judge times the reference: nothing of the candidate's runs
        beside it on the CPU, nor launches GPU work. (A child the candidate moved to a group of its own is not
        stopped; scanning the session for it every round would cost more than the rounds: guards.md.)"""
        _signal_group(self.process.pid, signal.SIGSTOP)

    def resume(self) -> None:
        _signal_group(self.process.pid, signal.SIGCONT)

    def stop(self) -> None:
        """Kill the runner's session and whatever of it was reparented to the judge (a subreaper: limits.py);
        remove its folders."""
        _signal_group(self.process.pid, signal.SIGKILL)
        try:
            os.kill(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait()
        # A judge (a subreaper) has no children but its runner's: what is left is what the runner left behind.
        for _ in range(10 if is_subreaper() else 0):
            orphans = _children_of(os.getpid())
            if not orphans:
                break
            for pid in orphans:
                try:
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                except (ProcessLookupError, ChildProcessError):
                    pass
        for fd in (self.commands, self.replies):
            try:
                os.close(fd)
            except OSError:
                pass
        self.arenas.close()
        shutil.rmtree(self.exchange, ignore_errors=True)
        shutil.rmtree(self.scratch, ignore_errors=True)


class _Forked:
    """A forked runner, with the part of subprocess.Popen's interface the judge uses."""

    def __init__(self, pid: int):
        self.pid = pid
        self.returncode: int | None = None

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.returncode is None:
            pid, status = os.waitpid(self.pid, 0 if deadline is None else os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
            elif time.monotonic() > deadline:
                raise subprocess.TimeoutExpired("runner", timeout)
            else:
                time.sleep(0.01)
        return self.returncode


def _fork_runner(arguments: list[str], environment: dict, keep: tuple[int, ...]) -> _Forked:
    pid = os.fork()
    if pid:
        _wait_for_own_session(pid)
        return _Forked(pid)
    try:  # the child: a session of its own, only its pipes and the standard streams open
        os.setsid()
        os.closerange(3, min(keep))
        os.closerange(min(keep) + 1, max(keep))
        os.closerange(max(keep) + 1, 1 << 16)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.environ.update(environment)
        from kbench.sandbox import runner
        code = runner.main(arguments)
    except BaseException:
        import traceback
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _wait_for_own_session(pid: int) -> None:
    """Until the child's setsid() has run, its process group is the judge's: signals to its group would miss it."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            if os.getpgid(pid) == pid:
                return
        except ProcessLookupError:
            return
        time.sleep(0.0005)


def _number(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) else None


def _signal_group(pid: int, signum: int) -> None:
    try:
        os.killpg(pid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def _children_of(parent: int) -> list[int]:
    """Living processes whose parent is `parent` (Linux /proc)."""
    found = []
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == parent and fields[0] != "Z":
            found.append(int(entry))
    return found


# --- the candidate's model, seen from the judge --------------------------------------------------------------

class RemoteModel:
    """ModelNew in the runner. Calling it returns outputs in the judge's memory, or raises Stop."""

    def __init__(self, runner: RunnerProcess, instance: str):
        self.runner = runner
        self.instance = instance
        self.last: wire.CallReply | None = None
        self.received_at = 0.0
        self.private: dict[int, torch.Tensor] = {}  # the judge's copies of timed outputs, by output index

    def __call__(self, *inputs):
        return self.call(list(inputs))

    def call(self, inputs: list, mode: str = "plain", write_back: bool = True):
        message, views = self.stage(inputs)
        output, reply = self.send(message, mode)
        if write_back:  # what the candidate did to its inputs, for the judge's mutation check
            for value, staged in zip(inputs, views):
                if staged is not None:
                    value.copy_(staged)
        return output

    def arena_views(self, inputs: list) -> list:
        """Views of the input arenas shaped like `inputs`, holding their contents (the timing loop's buffers)."""
        _, views = self.stage(inputs)
        return [view if view is not None else value for view, value in zip(views, inputs)]

    def stage(self, inputs: list, prefix: str = "in") -> tuple[dict, list]:
        """The call's message with the arguments in arenas (copied there now), and the arena views."""
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
        if self.runner.device.type == "cuda":
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
        # The judge's clock stops once it holds the outputs (timing.RemoteTimer): a runner that replied before
        # its work was done either waited for it here or handed over what its work had not yet written.
        self.received_at = time.perf_counter()
        return outputs, reply

    def _output_arenas(self) -> list[str]:
        slots = self.runner.arenas.slots
        return [slots[f"out{index}"] for index in range(len(slots)) if f"out{index}" in slots]

    @staticmethod
    def _reply(data: dict) -> dict:
        if "failure" in data:
            failure = wire.Failure.from_wire(data["failure"] if isinstance(data["failure"], dict) else {})
            raise Stop(failure.status, failure.message)
        return data

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
                raise Stop(Status.INCORRECT, f"output {index} is a {meta.kind}, not a plain torch.Tensor")
            if meta.device != str(self.runner.device) and not (
                    self.runner.device.type == "cuda" and meta.device == "cuda" and self.runner.device.index is None):
                raise Stop(Status.INCORRECT, f"output {index} is on {meta.device}, not on {self.runner.device}")
            try:
                dtype = dtype_of(meta.dtype)
                shared = self.runner.arenas.view(arenas[index], dtype, meta.shape)
                values.append(self._private(index, shared) if timed else shared.clone())
            except (ValueError, IndexError) as error:
                raise Stop(Status.INCORRECT, f"output {index} could not be read ({error})")
        if not reply.sequence:
            if len(values) != 1:
                raise Stop(Status.INCORRECT, "returned no output")
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


def new_candidate(runner: RunnerProcess, init_inputs: list, seed: int, overrides: dict) -> RemoteModel:
    """ModelNew(*init_inputs) built in the runner right after `seed`, as the reference was, at the sizes
    `overrides` set (the runner's copy of the problem follows them); the runner's earlier instances go."""
    model = RemoteModel(runner, runner.new_instance())
    message, _ = model.stage(init_inputs, prefix="init")
    RemoteModel._reply(runner.request({"op": "build", "instance": model.instance, "init": message["args"],
                                       "seed": seed, "overrides": wire.encode_value(dict(overrides))}))
    return model


def failure_of(error: RunnerDied, phase: str) -> Stop:
    """A runner that died is the candidate's doing: crashed (with the signal), in the phase it died in."""
    return Stop(Status.CRASHED, f"{describe_exit(error.returncode)} while {phase}")

