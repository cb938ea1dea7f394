"""One evaluation, run in a fresh child process: load, build, check, time, sweep, write a result file.

The parent (runner.py) starts `python -m kbench.worker JOB.json` with its output going to a log file
and a wall-clock timeout. Everything the candidate can do wrong that Python can see becomes a
status here; what Python cannot see (a segfault, a hang) the parent turns into one, helped by the
progress file this worker keeps up to date.
"""

from __future__ import annotations

import copy
import ctypes
import faulthandler
import json
import math
import os
import platform
import random
import resource
import signal
import sys
import time
import traceback
from dataclasses import dataclass, replace
from itertools import islice
from pathlib import Path
from typing import Callable

import torch

# Everything the worker checks and times with is imported before any candidate, so the harness
# snapshot (guards.HarnessSnapshot) holds the real functions.
from kbench import check, guards, params, slots, stats, timing
from kbench.build import BuildError, BuildRecord, install_build_hooks, versions_tag
from kbench.config import PYTORCH_DEFAULT, RunConfig
from kbench.problem import describe_overrides, load_module, overridden
from kbench.results import ClockRecord, Result, Status, SweepResult, Timing

# Errors that, on a CPU-only run, mean the candidate needs CUDA rather than that it is wrong.
_NO_CUDA_MESSAGES = ("not compiled with CUDA", "no NVIDIA driver", "CUDA_HOME", "No CUDA GPUs",
                     "Found no NVIDIA", "CUDA driver", "cuda runtime")
# A sweep gives up drawing after this many configurations per requested one (invalid ones are skipped).
_SWEEP_ATTEMPTS_PER_CONFIGURATION = 4
_PR_SET_PDEATHSIG = 1  # prctl option, <linux/prctl.h>


@dataclass(frozen=True)
class Job:
    """Everything one evaluation needs; a plain value so any executor can carry it."""

    problem_path: str          # reference file
    solution_path: str         # candidate file
    device: str                # resolved: "cpu" or "cuda:N"
    config: dict               # RunConfig.to_dict()
    result_path: str           # where the worker writes its Result as JSON
    state_path: str            # where the worker records its progress, for the parent's messages
    overrides: dict            # problem globals to override (empty: official, or small on a CPU)
    run_id: str = ""
    log_path: str = ""         # the worker's stdout/stderr file (build output lands there)
    build_only: bool = False   # import the solution (building its extensions) and stop

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(self.__dict__))

    @classmethod
    def load(cls, path: Path) -> "Job":
        return cls(**json.loads(Path(path).read_text()))


class Stop(Exception):
    """Ends an evaluation early with a verdict (a failure is data, not a traceback)."""

    def __init__(self, status: str, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


def one_line(error: BaseException) -> str:
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    text = lines[0] if lines else ""
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def write_json_atomic(path: Path, data: dict) -> None:
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(data))
    os.replace(temporary, path)


def main(argv: list[str]) -> int:
    """`python -m kbench.worker JOB.json`, or `--wait DEVICE`: warm up, then read the job path from stdin.

    A waiting worker has already imported torch and created its CUDA context while the previous
    evaluation ran, so an evaluation does not pay for them. It is still a fresh process: it runs one
    job and exits.
    """
    faulthandler.enable()  # a segfault leaves a Python stack in the log
    _die_with_parent()
    os.nice(int(os.environ.get("KBENCH_NICE", "0")))  # a build: the compilers it starts inherit it
    if argv[0] == "--wait":
        _warm_up(argv[1])
        line = sys.stdin.readline().strip()
        if not line:
            return 0  # the parent closed the pipe: no job came
        job = Job.load(Path(line))
        _redirect_output(job.log_path)
    else:
        job = Job.load(Path(argv[0]))
    result = run(job)
    write_json_atomic(Path(job.result_path), result.to_dict())
    # The verdict is written: skip interpreter and CUDA teardown, which the parent would wait for.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _die_with_parent() -> None:
    """Have Linux kill this worker when its parent dies (strictly: when the parent's thread that started it
    ends; kbench starts every worker from one thread that lives as long as it does, runner._launcher, or
    forks it from the one-threaded fork server, which dies with kbench in turn).

    A parent killed outright (a lost Ray worker, kill -9 of kbench) cannot kill its evaluation, and an
    orphan would run on (a hang: forever) beside the retried evaluation on the same GPU. The kernel's
    signal works even while a candidate spins holding the GIL.
    """
    if not sys.platform.startswith("linux") or "KBENCH_PARENT_PID" not in os.environ:
        return  # not started by kbench's runner
    ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != int(os.environ["KBENCH_PARENT_PID"]):
        os._exit(1)  # the parent died before the request above took effect


def _warm_up(device: str) -> None:
    """Importing this module loaded torch and kbench; prime the dispatcher and create the CUDA context."""
    guards.prime_dispatch()
    if device.startswith("cuda"):
        torch.cuda.set_device(torch.device(device))
        torch.zeros(1, device=device)  # creates the CUDA context


def _redirect_output(log_path: str) -> None:
    """Send this process's stdout/stderr (and its children's) to the job's log file."""
    sys.stdout.flush()
    sys.stderr.flush()
    descriptor = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.dup2(descriptor, 1)
    os.dup2(descriptor, 2)
    os.close(descriptor)


def run(job: Job):
    """Evaluate one job; every failure the worker can observe becomes the result's status."""
    config = RunConfig.from_dict(job.config)
    device = torch.device(job.device)
    if device.type == "cuda":
        torch.cuda.set_device(device)  # .cuda() and new tensors inside the candidate land on this GPU
    state = Progress(Path(job.state_path))
    state.base = Result(
        problem=Path(job.problem_path).stem, solution=job.solution_path, status=Status.CRASHED,
        problem_path=job.problem_path, device=job.device, device_name=_device_name(device),
        torch_version=torch.__version__, cuda_version=torch.version.cuda or "", policy=config.policy,
        sizes=describe_overrides(job.overrides), run_id=job.run_id,
    )
    build = state.build = BuildRecord(log_path=Path(job.log_path) if job.log_path else None)
    build.on_change = lambda: state.write(state.phase)
    os.environ.setdefault("TRITON_CACHE_DIR", str(config.cache_dir / "triton" / versions_tag()))
    install_build_hooks(config.cache_dir / "extensions" / versions_tag(), build)
    slots.install_compiler_wrappers(config.cache_dir / "extensions" / versions_tag())
    guards.apply_policy(config.policy)
    try:
        return _evaluate(job, config, device, state)
    except Stop as stop:
        status, message = stop.status, stop.message
        if device.type == "cpu" and status in (Status.LOAD_ERROR, Status.COMPILE_ERROR, Status.RUNTIME_ERROR) \
                and any(text.lower() in message.lower() for text in _NO_CUDA_MESSAGES):
            status, message = Status.SKIPPED, f"needs a CUDA device ({message})"
        return state.finish(status=status, message=message, check=state.check)
    finally:
        state.write("done")


def _evaluate(job: Job, config, device, state: "Progress"):
    problem_module = _load_problem(job, state)
    overrides = dict(job.overrides)
    if device.type == "cpu" and not config.full_size and not overrides:
        overrides = params.small_overrides(problem_module)
    state.base = replace(state.base, sizes=describe_overrides(overrides))

    # Taken before the candidate is imported: what settings and harness functions must stay as they are.
    state.expected_settings = guards.snapshot_settings()
    # A build's import is repeated by the evaluation, whose snapshot judges it; the snapshot primes the
    # dispatcher first, which would cost each build worker seconds of CPU (forkserver.py).
    state.harness = None if job.build_only else guards.HarnessSnapshot()
    solution_module = _load_solution(job, state)
    _guard(state, "importing the solution")
    if job.build_only:
        return state.finish(status=Status.BUILT)

    with torch.no_grad():
        with overridden(problem_module, overrides):
            state.write("building models")
            reference_model, candidate_model = _build_models(problem_module, solution_module, config.seed,
                                                             device)
            _guard(state, "constructing ModelNew")
            make_inputs = _input_maker(problem_module, device)
            state.write("checking")
            _check_trials(reference_model, candidate_model, make_inputs, config, device, state)
            if not state.check.passed:
                raise Stop(Status.INCORRECT, state.check.first_mismatch or "outputs differ")
            if config.guards:
                _note_reference_ops(reference_model, candidate_model, make_inputs(config.seed), device, state)
            timed = _time(reference_model, candidate_model, make_inputs, config, device, state)
            _guard(state, "timing ModelNew")
        state.provisional = state.finish(status=Status.CORRECT, check=state.check, **timed,
                                         message="; ".join(state.flag_messages + state.notes))
        sweep = None
        if config.sweep > 0:
            sweep = _sweep(problem_module, solution_module, config, device, state)
            if sweep.first_failure:
                state.flag(guards.SWEEP_FAILED, f"sweep failed at {sweep.first_failure}")
            _guard(state, "sweeping ModelNew")
    result = state.finish(status=Status.CORRECT, check=state.check, **timed, sweep=sweep,
                          message="; ".join(state.flag_messages + state.notes))
    return strict_verdict(result, config.strict)


def strict_verdict(result, strict: bool):
    """Noting flags (sweep failure, reference op, low precision, weak check) fail a result only under --strict."""
    if strict and result.status == Status.CORRECT and any(name in guards.NOTING for name in result.flags):
        return replace(result, status=Status.INCORRECT)
    return result


def _load_problem(job: Job, state: "Progress"):
    state.write("loading problem")
    try:
        module = load_module(Path(job.problem_path), "kbench_problem")
    except Exception as error:
        raise Stop(Status.REFERENCE_ERROR, f"problem file failed to load: {one_line(error)}")
    for name in ("Model", "get_inputs", "get_init_inputs"):
        if not hasattr(module, name):
            raise Stop(Status.REFERENCE_ERROR, f"problem file defines no {name}")
    return module


def _load_solution(job: Job, state: "Progress"):
    state.write("loading solution")
    try:
        module = load_module(Path(job.solution_path), "kbench_solution")
    except BuildError as error:
        raise Stop(Status.COMPILE_ERROR, str(error))
    except (Exception, SystemExit) as error:
        traceback.print_exc()
        raise Stop(Status.LOAD_ERROR, one_line(error))
    if not isinstance(getattr(module, "ModelNew", None), type):
        raise Stop(Status.LOAD_ERROR, "the solution defines no ModelNew class")
    return module


def _build_models(problem_module, solution_module, seed: int, device):
    """Model and ModelNew from the same init arguments, each built right after the same seed."""
    torch.manual_seed(seed)
    try:
        init_inputs = list(problem_module.get_init_inputs())
        reference_model = problem_module.Model(*init_inputs).to(device)
    except Exception as error:
        raise Stop(Status.REFERENCE_ERROR, f"reference failed to build: {one_line(error)}")
    torch.manual_seed(seed)
    try:
        candidate_model = solution_module.ModelNew(*init_inputs).to(device)
    except BuildError as error:
        raise Stop(Status.COMPILE_ERROR, str(error))
    except Exception as error:
        traceback.print_exc()
        raise Stop(Status.LOAD_ERROR, f"ModelNew(*get_init_inputs()) failed: {one_line(error)}")
    return reference_model, candidate_model


def _input_maker(problem_module, device):
    def make_inputs(seed: int) -> list:
        torch.manual_seed(seed)
        with torch.device(device):
            return list(problem_module.get_inputs())
    return make_inputs


def _call(model, inputs, device, failure_status: str, what: str):
    """Run a forward and wait for the device, so asynchronous CUDA errors surface here."""
    try:
        output = model(*inputs)
        _synchronize(device)
        return output
    except Exception as error:
        traceback.print_exc()
        raise Stop(failure_status, f"{what}{one_line(error)}")


def _check_trials(reference_model, candidate_model, make_inputs, config, device, state):
    outcomes = []
    for trial in range(config.trials):
        inputs = make_inputs(config.seed + trial)
        candidate_inputs = _clone(inputs)

        def run_candidate():
            return _call(candidate_model, candidate_inputs, device, Status.RUNTIME_ERROR, "")

        def run_reference():
            return _call(reference_model, _clone(inputs), device, Status.REFERENCE_ERROR,
                         "reference forward failed: ")

        # Alternate who runs first, so a candidate cannot rely on the reference's leftovers.
        if trial % 2 == 0:
            candidate_output, reference_output = run_candidate(), run_reference()
        else:
            reference_output = run_reference()
            candidate_output = run_candidate()
        _guard(state, "calling ModelNew")
        _guard_output(state, candidate_output)
        state.input_bytes = max(state.input_bytes, _tensor_bytes(inputs))
        state.output_bytes = max(state.output_bytes, _tensor_bytes(reference_output))
        if guards.inputs_mutated(inputs, candidate_inputs):
            state.flag(guards.MUTATED_INPUTS, "forward changed its input tensors in place")
        _raise_if_rejected(state)
        outcome = check.compare(candidate_output, reference_output, config.tolerance_for)
        outcomes.append(outcome)
        state.check = check.summarise(outcomes)
        if trial == 0 and outcome.passed and config.guards:
            weak = guards.weak_check_reason(reference_output, config.tolerance_for)
            if weak:
                state.flag(guards.WEAK_CHECK, weak)
            _note_low_precision(reference_model, inputs, reference_output, candidate_output, state)
        guards.poison(reference_output)  # freed reference memory must not hold the answer for the next call
        del candidate_output, reference_output


def _guard_output(state, output) -> None:
    odd_types = guards.non_plain_outputs(output)
    if odd_types:
        state.flag(guards.NON_PLAIN_OUTPUT, f"returned {', '.join(odd_types)} instead of a plain torch.Tensor")


def _note_reference_ops(reference_model, candidate_model, inputs, device, state) -> None:
    """Noting flag when the candidate runs the aten ops that carry the reference's work."""
    reference_ops = guards.record_ops(lambda: reference_model(*_clone(inputs)))
    candidate_ops = guards.record_ops(
        lambda: _call(candidate_model, _clone(inputs), device, Status.RUNTIME_ERROR, ""))
    shared = guards.shared_work_ops(reference_ops, candidate_ops)
    if shared:
        state.flag(guards.CALLS_REFERENCE_OP, f"calls the reference's own op(s): {', '.join('aten.' + op for op in shared)}")


def _note_low_precision(reference_model, inputs, reference_output, candidate_output, state) -> None:
    """Noting flag when the candidate's error against a float64 truth is 10x the float32 reference's."""
    try:
        truth_model = copy.deepcopy(reference_model).double()
        truth = truth_model(*[x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x
                              for x in inputs])
    except Exception as error:  # some ops have no float64 kernel: then there is no truth to compare with
        print(f"kbench: no float64 truth for the precision check ({one_line(error)})", flush=True)
        return
    reference_error = check.error_against(reference_output, truth)
    candidate_error = check.error_against(candidate_output, truth)
    del truth, truth_model
    if candidate_error is None or reference_error is None:
        return
    if candidate_error >= guards.LOW_PRECISION_MIN_ERROR and \
            candidate_error >= guards.LOW_PRECISION_RATIO * reference_error:
        state.flag(guards.LOW_PRECISION, f"error against float64 truth {candidate_error:.2g}, "
                                         f"{candidate_error / max(reference_error, 1e-300):.0f}x the float32 "
                                         f"reference's {reference_error:.2g}")


def _time(reference_model, candidate_model, make_inputs, config, device, state) -> dict:
    """Result fields of timing: reference_timing, candidate_timing, baselines, clocks (empty when off).

    With guards on, timed calls rotate through several input sets loaded into the same buffers, the
    candidate's outputs are checked against the reference's for those inputs (a random sample of
    calls when outputs are large), and reference outputs are poisoned before they are freed.
    Baselines (PyTorch's default precision settings, torch.compile) are timed in the same rounds.
    """
    if not config.time:
        return {}
    state.write("timing")
    rotation = _rotation_size(state.input_bytes, state.output_bytes, len(config.baselines) + 1,
                              _free_bytes(device)) if config.guards else 1
    input_sets = [make_inputs(config.seed + 100 + index) for index in range(rotation)]
    expected = [_call(reference_model, _clone(inputs), device, Status.REFERENCE_ERROR, "reference forward failed: ")
                for inputs in input_sets] if config.guards else []
    checker = _TimedOutputChecker(expected, config, state) if config.guards else None

    def loader(buffers, on_load=lambda index: None):
        position = {"next": 0}

        def load():
            index = position["next"] % rotation
            position["next"] += 1
            _load_into(buffers, input_sets[index])
            on_load(index)
        return load

    def side(model, settings=None, inspect=guards.poison if config.guards else timing.do_nothing,
             on_load=lambda index: None):
        buffers = _clone(input_sets[0])
        load = loader(buffers, on_load)

        def prepare():
            load()
            if settings:
                settings()

        def after(output):
            inspect(output)
            guards.apply_policy(config.policy)  # whatever a baseline changed, the checking policy is back
        return _TimedSide(timing.Side(lambda: model(*buffers), prepare=prepare, inspect=after), settings, buffers)

    def track_input_set(index: int) -> None:
        if checker:
            checker.current = index  # which expected output the candidate's next output is checked against

    sides = {"eager": side(reference_model),
             "candidate": side(candidate_model, inspect=checker.inspect if checker else timing.do_nothing,
                               on_load=track_input_set)}
    # PyTorch's defaults differ from strict float32 only in cuDNN's TF32, on a GPU, under the strict policy.
    default_is_eager = device.type != "cuda" or config.policy == PYTORCH_DEFAULT
    if "default" in config.baselines and not default_is_eager:
        sides["default"] = side(reference_model, settings=guards.set_pytorch_default_precision)
    if "compile" in config.baselines:
        compiled = _compiled_reference(reference_model, input_sets[0], state)
        if compiled is not None:
            sides["compile"] = side(compiled)
    timer = timing.CudaEventTimer(device) if device.type == "cuda" else timing.HostTimer()
    timer_name = timer.name
    graph = _graph_sides(sides, timer, make_inputs(config.seed + 200), config, state) \
        if config.cuda_graph and device.type == "cuda" else None
    if graph:
        sides, timer_name = graph.sides, "cuda-graph"
    rule = timing.StopRule(warmup=config.warmup, min_samples=config.min_samples, max_samples=config.max_samples,
                           target_rse=config.target_rse, budget_s=config.time_budget_s)
    clock_log = timing.ClockLog(timing.nvml_clock_reader(device)) if device.type == "cuda" else None
    try:
        samples = dict(zip(sides, timing.sample_interleaved([timed.side for timed in sides.values()], timer, rule,
                                                            clock_log=clock_log)))
    except Stop:
        raise
    except Exception as error:
        raise Stop(Status.RUNTIME_ERROR, f"failed while timing: {one_line(error)}")
    _raise_if_rejected(state)
    if config.guards and device.type == "cuda":
        # Events and wall times as taken (per replay under --cuda-graph): only their gap matters.
        hidden = guards.hidden_work_message(samples["eager"].ms, samples["eager"].wall_ms,
                                            samples["candidate"].ms, samples["candidate"].wall_ms)
        if hidden:
            state.flag(guards.SIDE_STREAM, hidden)
    if graph:
        samples = graph.per_call(samples)
    reference_samples, candidate_samples = samples.pop("eager"), samples.pop("candidate")
    clocks = ClockRecord.from_readings(clock_log.readings) if clock_log else None
    throttled = guards.throttle_message(clocks)
    if throttled:
        state.flag(guards.THROTTLED, throttled)
    reference_timing = Timing(tuple(reference_samples.ms), timer_name)
    baselines = {name: Timing(tuple(side_samples.ms), timer_name) for name, side_samples in samples.items()}
    if "default" in config.baselines and default_is_eager:
        baselines["default"] = reference_timing
    return {"reference_timing": reference_timing, "candidate_timing": Timing(tuple(candidate_samples.ms), timer_name),
            "baselines": tuple(baselines.items()), "clocks": clocks}


# Under --cuda-graph each timed replay repeats the call until it lasts about this long, so the events'
# own overhead (~2 us on an H200) is spread over the repeats. The timer flushes L2 before each replay;
# inside the graph an L2 flush runs between the calls, timed as a side of its own and subtracted.
GRAPH_REPLAY_MS = 0.5
MAX_GRAPH_REPEATS = 100
FLUSH_REPEATS = 10


@dataclass
class _TimedSide:
    side: timing.Side                       # what the sampling loop runs
    settings: Callable[[], None] | None     # precision settings of this side (a baseline's), None: the policy's
    buffers: list                           # the input buffers its call reads


@dataclass
class _GraphSides:
    sides: dict                # name -> _TimedSide whose call replays a graph, and "flush"
    repeats: dict[str, int]    # calls per replay, per side

    def per_call(self, samples: dict) -> dict:
        """Milliseconds per call: each replay's time less the flushes between its calls, over its calls."""
        flush = samples.pop("flush")
        flush_ms = stats.median(flush.ms) / self.repeats["flush"]
        return {name: timing.Samples(ms=[(ms - (self.repeats[name] - 1) * flush_ms) / self.repeats[name]
                                         for ms in side_samples.ms], wall_ms=side_samples.wall_ms)
                for name, side_samples in samples.items()}


def _graph_sides(sides: dict, timer, probe_inputs: list, config, state) -> _GraphSides | None:
    """Every side's call captured as a CUDA graph; None (timed without graphs, with a note) when any
    side cannot be captured or its replay does not compute what the call computed before capture.

    The check uses inputs of its own (`probe_inputs`): a replay that computes nothing returns what
    the capture left behind, which matches no other inputs. Kernels launched outside the captured
    stream (the legacy default stream, say) go missing from a graph without any error.
    """
    captured, repeats = {}, {}
    for name, timed in sides.items():
        try:
            expected = _call_on(timed, probe_inputs)  # before any capture: what the call computes
            timed.side.prepare()  # inputs loaded and the side's settings applied, as for a timed call
            call_ms, _, _ = timer.measure(timed.side.call)  # one plain call sizes the repeats
            repeats[name] = max(1, min(MAX_GRAPH_REPEATS, math.ceil(GRAPH_REPLAY_MS / max(call_ms, 1e-3))))
            replay = timing.capture_graph(timed.side.call, repeats[name], between=timer.flush)
            replayed = _call_on(replace(timed, side=replace(timed.side, call=replay)), probe_inputs)
            outcome = check.compare(replayed, expected, config.tolerance_for)
            if not outcome.passed:
                raise RuntimeError(f"its replay does not compute what the call does: {outcome.mismatch}")
        except Exception as error:
            torch.cuda.synchronize()
            guards.apply_policy(config.policy)
            state.notes.append(f"timed without CUDA graphs: {name} could not be captured ({one_line(error)})")
            return None
        guards.apply_policy(config.policy)
        captured[name] = replace(timed, side=replace(timed.side, call=replay))
    flush = timing.capture_graph(timer.flush, FLUSH_REPEATS, warmup=0)
    captured["flush"] = _TimedSide(timing.Side(flush), None, [])
    repeats["flush"] = FLUSH_REPEATS
    return _GraphSides(captured, repeats)


def _load_into(buffers: list, inputs: list) -> None:
    """Copy inputs into a side's input buffers (non-tensor arguments stay as they are)."""
    for buffer, source in zip(buffers, inputs):
        if isinstance(buffer, torch.Tensor):
            buffer.copy_(source)


def _call_on(timed: _TimedSide, inputs: list):
    """A copy of the side's output for `inputs`, loaded into its buffers, under its settings."""
    _load_into(timed.buffers, inputs)
    if timed.settings:
        timed.settings()
    return _clone_output(timed.side.call())


def _clone_output(output):
    if isinstance(output, (tuple, list)):
        return type(output)(_clone(list(output)))
    return output.clone() if isinstance(output, torch.Tensor) else output


def _compiled_reference(reference_model, inputs, state):
    """torch.compile of the reference, compiled here (untimed); None when it does not compile."""
    try:
        compiled = torch.compile(reference_model)
        compiled(*_clone(inputs))
        return compiled
    except Exception as error:  # the baseline is missing, which is not the candidate's fault
        print(f"kbench: torch.compile baseline unavailable: {one_line(error)}", flush=True)
        state.notes.append(f"compile baseline unavailable ({one_line(error)})")
        return None


# Timed outputs up to this size are all checked; larger ones on a random sample of calls.
_CHECK_EVERY_CALL_BYTES = 64 << 20
_CHECK_PROBABILITY = 0.25


class _TimedOutputChecker:
    """Checks outputs produced inside the timing loop against the reference for the same inputs."""

    def __init__(self, expected: list, config, state):
        self.expected = expected
        self.config = config
        self.state = state
        self.current = 0
        self.calls = 0
        # Unpredictable to the candidate: it cannot tell which calls are checked.
        self.random = random.Random(int.from_bytes(os.urandom(8), "little"))
        sizes = [_tensor_bytes(output) for output in expected]
        self.check_all = max(sizes, default=0) <= _CHECK_EVERY_CALL_BYTES

    def inspect(self, output) -> None:
        self.calls += 1
        if not (self.check_all or self.calls <= 2 or self.random.random() < _CHECK_PROBABILITY):
            return
        _guard_output(self.state, output)
        _raise_if_rejected(self.state)
        outcome = check.compare(output, self.expected[self.current], self.config.tolerance_for)
        if not outcome.passed:
            self.state.flag(guards.STALE_OUTPUT, f"timed call {self.calls} returned a wrong output for its "
                                                 f"inputs (memoised or skipped work): {outcome.mismatch}")
            raise Stop(Status.REJECTED, "; ".join(self.state.flag_messages))


def _tensor_bytes(values) -> int:
    """Bytes of the tensors in a tensor, tuple or list (an input set, an output)."""
    values = values if isinstance(values, (tuple, list)) else [values]
    return sum(v.numel() * v.element_size() for v in values if isinstance(v, torch.Tensor))


def _rotation_size(input_bytes: int, output_bytes: int, sides: int, free_bytes: int | None) -> int:
    """How many input sets the timing loop rotates through: 3, fewer when GPU memory is tight
    (free_bytes: what the device has free; None on a CPU, where memory is not the limit).

    Each set holds its inputs and the reference's outputs for them. Besides the sets, each timed side
    has input buffers of its own, and a call's output, the output being checked and the comparison's
    workspace are alive at once (an output can be 8x its inputs: conv2d's official size).
    """
    if free_bytes is None:
        return 3
    alongside = sides * input_bytes + 2 * output_bytes + check.COMPARE_WORKSPACE_BYTES
    for count in (3, 2):
        if alongside + count * (input_bytes + output_bytes) < 0.8 * free_bytes:
            return count
    return 1


def _free_bytes(device) -> int | None:
    """Device memory this process can still use: the driver's free memory plus torch's unused cache."""
    if device.type != "cuda":
        return None
    free_bytes, _ = torch.cuda.mem_get_info(device)
    return free_bytes + torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)


def _sweep(problem_module, solution_module, config, device, state):
    """Check the candidate at random configurations of the problem's globals (small sizes).

    Configurations the reference rejects (invalid combinations) are skipped and counted; draws
    continue until `config.sweep` configurations ran or too many were drawn.
    """
    cap = params.SMALL_INPUT_BYTES if device.type == "cpu" else params.SWEEP_INPUT_BYTES
    configurations = params.iter_configurations(problem_module, config.seed, cap)
    passed = run = skipped = 0
    first_failure = None
    for index, configuration in enumerate(islice(configurations,
                                                 config.sweep * _SWEEP_ATTEMPTS_PER_CONFIGURATION)):
        if run == config.sweep:
            break
        described = describe_overrides(configuration) or "official sizes"
        state.sweep_counts = {"passed": passed, "run": run, "skipped": skipped}
        state.write("sweeping", current=described)
        outcome = _sweep_one(problem_module, solution_module, configuration, config, device,
                             config.seed + 1000 + index)
        if outcome == "skipped":
            skipped += 1
            continue
        run += 1
        if outcome == "passed":
            passed += 1
        elif first_failure is None:
            first_failure = f"{described}: {outcome}"
    return SweepResult(passed=passed, run=run, skipped=skipped, first_failure=first_failure)


def _sweep_one(problem_module, solution_module, configuration, config, device, input_seed) -> str:
    """'passed', 'skipped' (the reference rejects the configuration or returns nothing), or why it failed."""
    with overridden(problem_module, configuration):
        try:
            reference_model, candidate_model = _build_models(problem_module, solution_module, config.seed, device)
        except Stop as stop:
            return "skipped" if stop.status == Status.REFERENCE_ERROR else stop.message
        try:
            inputs = _input_maker(problem_module, device)(input_seed)
            reference_output = reference_model(*_clone(inputs))
            _synchronize(device)
        except Exception:
            return "skipped"
        if all(isinstance(value, torch.Tensor) and value.numel() == 0
               for value in check.as_tensor_list(reference_output)):
            return "skipped"  # a degenerate configuration: nothing to compare
        try:
            candidate_output = _call(candidate_model, _clone(inputs), device, Status.RUNTIME_ERROR, "")
        except Stop as stop:
            return stop.message
        outcome = check.compare(candidate_output, reference_output, config.tolerance_for)
        return "passed" if outcome.passed else outcome.mismatch


class Progress:
    """The worker's progress, mirrored to a small JSON file the parent reads after a crash or hang.

    `provisional` holds a finished verdict while the sweep runs, so a sweep that crashes or hangs
    the worker does not lose the official result.
    """
    def __init__(self, path: Path):
        self.path = path
        self.started = time.monotonic()
        self.phase = "starting"
        self.phase_started = self.started
        self.phase_seconds: dict[str, float] = {}
        self.current = ""
        self.base = None
        self.build = None
        self.check = None
        self.provisional = None
        self.sweep_counts: dict = {}
        self.expected_settings: dict = {}
        self.harness = None
        self.flags: list[str] = []
        self.flag_messages: list[str] = []
        self.notes: list[str] = []  # things worth saying that are not flags (a baseline that could not run)
        self.input_bytes = 0        # largest input set and reference output of the trials (sizes timing memory)
        self.output_bytes = 0

    def write(self, phase: str, current: str = "") -> None:
        now = time.monotonic()
        if phase != self.phase:  # seconds per phase, for the result's phase_s
            self.phase_seconds[self.phase] = self.phase_seconds.get(self.phase, 0.0) + now - self.phase_started
            self.phase_started = now
        self.phase, self.current = phase, current
        build = self.build
        write_json_atomic(self.path, {
            "phase": phase, "current": current, "building": bool(build and build.building),
            "build_s": _build_seconds(build), "flags": self.flags,
            "provisional": self.provisional.to_dict() if self.provisional else None,
            "sweep_counts": self.sweep_counts,
        })

    def flag(self, name: str, message: str) -> None:
        if name not in self.flags:
            self.flags.append(name)
            self.flag_messages.append(message)
            self.write(self.phase, self.current)

    def finish(self, **fields):
        """The result so far: base fields, build record and flags, plus the given fields."""
        build = self.build
        seconds = dict(self.phase_seconds, **{self.phase: self.phase_seconds.get(self.phase, 0.0)
                                              + time.monotonic() - self.phase_started})
        phases = "; ".join(f"{name} {value:.2f}" for name, value in seconds.items() if value >= 0.005)
        return replace(self.base, build_s=_build_seconds(build), build_reused=build.all_reused if build else None,
                       flags=tuple(self.flags), wall_s=time.monotonic() - self.started, phase_s=phases,
                       cpu_s=_cpu_seconds(), **fields)


def _raise_if_rejected(state: Progress) -> None:
    if any(name in guards.REJECTING for name in state.flags):
        raise Stop(Status.REJECTED, "; ".join(state.flag_messages))


def _guard(state: Progress, when: str) -> None:
    """Global settings and harness functions must be as they were before the candidate was imported."""
    changes = guards.changed_settings(state.expected_settings, guards.snapshot_settings())
    if changes:
        state.flag(guards.CHANGED_SETTINGS, f"global settings changed while {when}: {', '.join(changes)}")
        guards.restore_settings(state.expected_settings)
    tampered = state.harness.changed() if state.harness else []
    if tampered:
        state.flag(guards.HARNESS_TAMPERING, f"replaced {', '.join(tampered)} while {when}")
    _raise_if_rejected(state)


def _cpu_seconds() -> float:
    """CPU time of this worker and of the children it waited for (ninja, and through it the compilers)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return round(own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime, 3)


def _build_seconds(build) -> float | None:
    return round(build.seconds, 3) if build is not None and build.any else None


def _clone(inputs: list) -> list:
    return [value.clone() if isinstance(value, torch.Tensor) else value for value in inputs]


def _synchronize(device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _device_name(device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return platform.processor() or platform.machine() or "cpu"


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
