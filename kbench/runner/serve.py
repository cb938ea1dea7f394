"""The runner: the process that imports the candidate, builds ModelNew and calls it for the judge.

`python -m kbench.runner.serve COMMANDS_FD REPLIES_FD DEVICE [protected] [build]`, started by the judge
(kbench.judge.remote_process) in a session of its own. The judge starts two: the candidate's, and the
reference's (`protected`), which builds only the problem's own Model (the "stand_in" op) and never imports a
solution and warms up (the CUDA context) at once. The candidate's runner confines itself (limits.py) while it is
its only thread, before anything starts a thread: confinement reaches only the thread that asks for it and the
threads it starts later, and a candidate can run code on any thread of its process. An evaluation's runner does
it at its start, to its own folders (scratch, inputs: whatever its job, no build cache), and then warms up
(the CUDA context, the op recording) before its job comes; it loads the candidate's extensions from the build
cache as the build phase left them, without writing there. A build's runner, which needs no CUDA context, confines
itself when its job comes, to its folders and the solution's own extension folder. Then it does what the judge asks:
import the solution in the problem's namespace (KernelBench's convention: `class ModelNew(Model)` works), build
instances, call them on tensors in the judge's arenas and copy their outputs into the judge's output arenas.
Everything here is the candidate's to change once it is imported; the judge trusts none of it (remote.py says how
it checks).
"""

from __future__ import annotations

import os
import socket
import sys
import tempfile
import traceback
from pathlib import Path

import torch

from kbench.extensions.cache import BuildRecord
from kbench.failures import one_line
from kbench.layouts import nbytes
from kbench.loading import model_dtype, release_cached_memory, synchronize
from kbench.op_recording import record_ops
from kbench.processes import die_with_parent, flush_output, open_files_to_the_limit, open_log, output_to
from kbench.runner import landlock, limits, startup, wire
from kbench.runner.arenas import RunnerArenas, aliasing, dtype_of
from kbench.runner.batches import Ring, advance_versions, as_items, describe, is_plain, precision
from kbench.runner.solution_side import Namespaces, OutputRecord, build_info, load_failure


def main(argv: list[str]) -> int:
    commands, replies, device = int(argv[0]), int(argv[1]), torch.device(argv[2])
    die_with_parent()
    open_files_to_the_limit()
    tempfile.tempdir = None  # a fork keeps the judge's choice: read TMPDIR (the runner's scratch folder) again
    protected, build_only = "protected" in argv[3:], "build" in argv[3:]
    if device.type == "cpu":
        # As the judge does (worker.single_threaded); and a fork of a process whose OpenMP threads ran would
        # hang in its first parallel op.
        torch.set_num_threads(1)
        startup.fixed_malloc_thresholds()
    runner = Runner(device, commands, replies, build_only)
    if protected:  # the reference's runner: no candidate code runs in it, nor may reach it
        limits.protect()
        if not build_only:
            startup.warm_up(device)
    else:
        startup.import_ahead(for_build=build_only)
        if not build_only:  # a build needs no CUDA context (dozens at once would fill a GPU): it confines itself later
            runner.confine_and_warm_up()
    wire.send(replies, {"event": "ready"})
    while True:
        try:
            message = wire.receive(commands, limit=1 << 30)
        except wire.ChannelClosed:
            return 0
        if message.get("op") == "quit":
            return 0
        try:
            reply = runner.handle(message)
        except Exception as error:  # a fault of ours or the candidate's: say it, and go on
            traceback.print_exc()
            reply = {"failure": {"status": "runtime_error", "message": one_line(error)}}
        flush_output()
        wire.send(replies, reply)


class Runner:
    def __init__(self, device: torch.device, commands: int, replies: int, build_only: bool):
        self.device = device
        self.commands, self.replies = commands, replies
        self.build_only = build_only  # confined when its job comes, to the solution's extension folder among others
        self.notes: list[str] = []  # what the confinement could not do
        self.start_failure = ""     # the warm-up's error: said in reply to the job, before any candidate code
        self.arenas = RunnerArenas()
        self.views: dict[tuple, torch.Tensor] = {}
        self.problem = None
        self.solution = None
        self.instances: dict[str, object] = {}
        self.pending = None         # outputs waiting for bigger arenas
        self.ring = Ring()          # the timing loop's input sets and output slots, and kept outputs (batches.py)

    def handle(self, message: dict) -> dict:
        arenas = message.get("arenas", [])
        descriptors = _received_descriptors(self.commands, sum(arena["kind"] == "memfd" for arena in arenas))
        try:
            for description in arenas:
                self.arenas.open(description, descriptors)
        finally:
            for descriptor in descriptors:  # each mapping holds its own
                os.close(descriptor)
        op = message.get("op")
        if op == "job":
            return self._job(message)
        if op == "stand_in":
            return self._stand_in(message)
        if op == "load":
            return self._load(message)
        if op == "build":
            return self._build(message)
        if op == "call":
            return self._call(message)
        if op == "deliver":
            return self._deliver(message["outputs"])
        if op == "ring":
            return self._ring(message)
        if op == "batch":
            return self._batch(message)
        if op == "keep":
            return self._keep(message)
        if op == "release":
            return self._release()
        return {"failure": {"status": "runtime_error", "message": f"unknown command {op!r}"}}

    # --- loading ----------------------------------------------------------------------------------------

    def _problem(self, message: dict):
        """The problem module (loaded once: the Model's in the reference's runner, the solution's namespace in the
        candidate's), with the judge's precision policy and no autograd, as the judge calls the reference (the
        candidate may change both)."""
        from kbench import policy
        from kbench.problem import load_module
        policy.apply_policy(message["policy"])
        torch.set_grad_enabled(False)
        if self.problem is None:
            self.problem = load_module(Path(message["problem"]), "kbench_problem")
        return self.problem

    def _stand_in(self, message: dict) -> dict:
        """The problem's own Model, built in the reference's runner: the reference the judge times under the
        candidate's protocol (measure.py)."""
        from kbench.problem import overridden
        if message.get("log_path"):
            output_to(open_log(message["log_path"]))
        problem = self._problem(message)
        init = [self._argument(item) for item in message["init"]]
        with overridden(problem, wire.decode_value(message.get("overrides", {}))):
            torch.manual_seed(int(message["seed"]))
            model = problem.Model(*init).to(self.device, model_dtype(message.get("precision")))
            self.instances[message["instance"]] = model
        return {"ok": True}

    def confine_and_warm_up(self) -> None:
        """An evaluation's runner, at its start: confined to its own folders (the judge names them in its
        environment), then warmed up, while the judge waits for a job."""
        self.notes = limits.confine(landlock.Access.from_environment(gpu=self.device.type == "cuda"))
        try:
            startup.warm_up(self.device, for_candidate=True)
        except Exception as error:
            traceback.print_exc()
            self.start_failure = one_line(error)

    def _job(self, message: dict) -> dict:
        """The judge's first command to the candidate's runner: the job's log (its descriptor follows the
        message), the compiler wrappers the judge wrote, the Triton cache; a build's runner confines itself now,
        while it is the only thread (nothing before it ran torch code), to the folders the message names."""
        if message.get("log"):
            _take_output(self.commands)
        os.environ["TRITON_CACHE_DIR"] = message["triton_cache"]
        os.environ.update({name: str(value) for name, value in (message.get("environment") or {}).items()
                           if name in ("CXX", "PYTORCH_NVCC")})
        if self.build_only:  # an evaluation's runner confined itself at its start
            self.notes = limits.confine(landlock.Access.from_environment(
                writable=message["writable"], readable=message.get("readable") or ()))  # and no CUDA context
        if self.start_failure:
            return {"failure": {"status": "runtime_error", "message": self.start_failure}}
        return {"ok": True, "notes": self.notes}

    def _load(self, message: dict) -> dict:
        from kbench.extensions.cache import BuildError, install_build_hooks
        from kbench.problem import load_module_in
        record = (OutputRecord if message.get("log_path") else BuildRecord)()
        record.on_change = lambda: wire.send(self.replies, {"event": "building", "building": record.building,
                                                            "since": record.building_since})
        # An evaluation's runner writes no build cache: what the build phase left there it loads as it is, and it
        # builds anything else in its scratch folder (gone with it).
        private = None if self.build_only else Path(tempfile.gettempdir()) / "extensions"
        install_build_hooks(Path(message["extensions"]), record, private)
        try:
            self.solution = load_module_in(Path(message["solution"]), "kbench_solution", self._problem(message))
        except BuildError as error:
            return load_failure("compile_error", str(error), record)
        except (Exception, SystemExit) as error:
            traceback.print_exc()
            return load_failure("load_error", one_line(error), record)
        if not isinstance(getattr(self.solution, "ModelNew", None), type):
            return load_failure("load_error", "the solution defines no ModelNew class", record)
        self.namespaces = Namespaces(self.problem, self.solution)
        return {"ok": True, "build": build_info(record)}

    def _build(self, message: dict) -> dict:
        from kbench.extensions.cache import BuildError
        self.namespaces.set(wire.decode_value(message.get("overrides", {})))
        init = [self._argument(item) for item in message["init"]]
        self.instances = {}  # one ModelNew at a time
        torch.manual_seed(int(message["seed"]))
        try:
            model = self.solution.ModelNew(*init)
            if isinstance(model, torch.nn.Module):
                model = model.to(self.device, model_dtype(message.get("precision")))
        except BuildError as error:
            return {"failure": {"status": "compile_error", "message": str(error)}}
        except Exception as error:
            traceback.print_exc()
            return {"failure": {"status": "load_error",
                                "message": f"ModelNew(*get_init_inputs()) failed: {one_line(error)}"}}
        self.instances[message["instance"]] = model
        return {"ok": True}

    # --- calls ------------------------------------------------------------------------------------------

    def _argument(self, item):
        """An argument: a tensor in an arena, laid out as the problem made it (stride, storage offset; arguments
        that share a storage share the arena), the same tensor object whenever the judge sends the same view,
        its version counter advanced as a write would advance it: the judge wrote new contents; or a value."""
        if isinstance(item, dict) and "tensor" in item:
            ref = item["tensor"]
            key = (ref["arena"], ref["dtype"], tuple(ref["shape"]), tuple(ref["stride"]), ref["offset"])
            tensor = self.views.get(key)
            if tensor is None or key[0] not in self.arenas.buffers:
                tensor = self.views[key] = self.arenas.view(ref["arena"], dtype_of(ref["dtype"]), *key[2:])
            else:
                advance_versions([tensor])
            return tensor
        return wire.decode_value(item["value"])

    def _call(self, message: dict) -> dict:
        model = self.instances[message["instance"]]
        arguments = [self._argument(item) for item in message["args"]]
        mode = message.get("mode", "plain")
        reply: dict = {}
        with precision(message.get("precision")):
            return self._called(model, arguments, mode, reply, message["outputs"])

    def _called(self, model, arguments: list, mode: str, reply: dict, outputs: list[str]) -> dict:
        try:
            if mode == "ops":
                returned: list = []
                reply["ops"] = sorted(record_ops(lambda: returned.append(model(*arguments))))
                output = returned[0]
            elif mode == "kernels":
                from kbench.runner import kernels
                output, reply["library_only"] = kernels.profiled_once(model, arguments)
            else:
                output = model(*arguments)
            synchronize(self.device)
        except Exception as error:
            traceback.print_exc()
            return {"failure": {"status": "runtime_error", "message": one_line(error)}}
        items, sequence = as_items(output)
        reply.update(sequence=sequence, outputs=[describe(item) for item in items],
                     aliases_input=aliasing(items, arguments))
        self.pending = (items, reply)
        return self._deliver(outputs)

    # --- batches: the timing loop's calls ---------------------------------------------------------------

    def _ring(self, message: dict) -> dict:
        """The timing loop's ring, untimed: K input sets in the judge's arenas and, per output, an arena of K slots
        of `stride` bytes each. Each batch calls the model on them; the judge rewrites their contents in place."""
        calls = [[self._argument(item) for item in arguments] for arguments in message["calls"]]
        slots = [(self.arenas.buffers[item["arena"]], int(item["stride"])) for item in message["outputs"]]
        self.ring.load(calls, slots)
        return {"ok": True}

    def _batch(self, message: dict) -> dict:
        return self.ring.batch(self.instances[message["instance"]], message, self.device)

    def _keep(self, message: dict) -> dict:
        return self.ring.keep(self.instances[message["instance"]], self.device)

    def _release(self) -> dict:
        """Let go of every arena (the judge frees them once no process maps them) and of the memory this process
        keeps cached: between the reference's time alone and the timing loop, the judge needs the room."""
        self.arenas.buffers.clear()
        self.views.clear()
        self.ring.clear()
        self.pending = None
        synchronize(self.device)
        release_cached_memory(self.device)
        return {"ok": True}

    def _deliver(self, arenas: list[str]) -> dict:
        """Copy the pending outputs into the judge's output arenas, or ask for room."""
        items, reply = self.pending
        plain = [item for item in items if is_plain(item)]
        needed = [nbytes(item.dtype, item.shape) for item in plain]
        if len(arenas) < len(plain) or any(size > self.arenas.buffers[arena].numel()
                                           for size, arena in zip(needed, arenas)):
            return {"grow": needed}
        for item, arena in zip(plain, arenas):
            self.arenas.view(arena, item.dtype, item.shape).copy_(item.detach())
        synchronize(self.device)
        self.pending = None
        return reply


def _take_output(commands: int) -> None:
    """This process's stdout and stderr (and the compilers') to the file whose descriptor the judge sends next
    (the evaluation's log, which a runner confined before its job could not open)."""
    for descriptor in _received_descriptors(commands, 1):
        output_to(descriptor)


def _received_descriptors(commands: int, count: int) -> list[int]:
    """The `count` descriptors the judge sends next on the command socket (none: nothing is read)."""
    if not count:
        return []
    channel = socket.socket(fileno=commands)
    descriptors: list[int] = []
    try:
        while len(descriptors) < count:  # the judge sends them in messages of a few hundred at most
            _, received, _, _ = socket.recv_fds(channel, 1, count - len(descriptors))
            if not received:
                raise ConnectionError(f"the judge sent {len(descriptors)} of {count} descriptors")
            descriptors += received
    finally:
        channel.detach()
    return descriptors


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
