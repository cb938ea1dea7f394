"""One evaluation, run in a fresh child process: load, build, check, time, sweep, write a result file.

The parent (runner.py) starts `python -m kbench.worker JOB.json` with its output going to a log file
and a wall-clock timeout. Everything the candidate can do wrong that Python can see becomes a
status here; what Python cannot see (a segfault, a hang) the parent turns into one, helped by the
progress file this worker keeps up to date.
"""

from __future__ import annotations

import faulthandler
import json
import os
import platform
import sys
import time
import traceback
from dataclasses import dataclass, replace
from itertools import islice
from pathlib import Path

# Errors that, on a CPU-only run, mean the candidate needs CUDA rather than that it is wrong.
_NO_CUDA_MESSAGES = ("not compiled with CUDA", "no NVIDIA driver", "CUDA_HOME", "No CUDA GPUs",
                     "Found no NVIDIA", "CUDA driver", "cuda runtime")
# A sweep gives up drawing after this many configurations per requested one (invalid ones are skipped).
_SWEEP_ATTEMPTS_PER_CONFIGURATION = 4


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
    faulthandler.enable()  # a segfault leaves a Python stack in the log
    job = Job.load(Path(argv[0]))
    result = run(job)
    write_json_atomic(Path(job.result_path), result.to_dict())
    return 0


def run(job: Job):
    """Evaluate one job; every failure the worker can observe becomes the result's status."""
    import torch

    from kbench import guards
    from kbench.build import BuildRecord, install_build_hooks, versions_tag
    from kbench.config import RunConfig
    from kbench.problem import describe_overrides
    from kbench.results import Result, Status

    config = RunConfig.from_dict(job.config)
    device = torch.device(job.device)
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
    guards.set_strict_precision()
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
    import torch

    from kbench import guards, params
    from kbench.problem import describe_overrides, overridden
    from kbench.results import Status

    problem_module = _load_problem(job, state)
    overrides = dict(job.overrides)
    if device.type == "cpu" and not config.full_size and not overrides:
        overrides = params.small_overrides(problem_module)
    state.base = replace(state.base, sizes=describe_overrides(overrides))

    expected_settings = guards.snapshot_settings()
    solution_module = _load_solution(job, state)
    _guard_settings(state, expected_settings, "importing the solution")
    if job.build_only:
        return state.finish(status=Status.BUILT)

    with torch.no_grad():
        with overridden(problem_module, overrides):
            state.write("building models")
            reference_model, candidate_model = _build_models(problem_module, solution_module, config.seed,
                                                             device)
            _guard_settings(state, expected_settings, "constructing ModelNew")
            make_inputs = _input_maker(problem_module, device)
            state.write("checking")
            _check_trials(reference_model, candidate_model, make_inputs, config, device, state,
                          expected_settings)
            if not state.check.passed:
                raise Stop(Status.INCORRECT, state.check.first_mismatch or "outputs differ")
            timings = _time(reference_model, candidate_model, make_inputs(config.seed), config, device, state)
            _guard_settings(state, expected_settings, "timing ModelNew")
            _raise_if_rejected(state)
        result = state.finish(status=Status.CORRECT, check=state.check, reference_timing=timings[0],
                              candidate_timing=timings[1])
        if config.sweep > 0:
            state.provisional = result
            sweep = _sweep(problem_module, solution_module, config, device, state)
            result = state.finish(status=Status.CORRECT, check=state.check, reference_timing=timings[0],
                                  candidate_timing=timings[1], sweep=sweep)
            _guard_settings(state, expected_settings, "sweeping ModelNew")
            _raise_if_rejected(state)
            if sweep.first_failure:
                result = with_sweep_failure(result, config.strict)
    return result


def with_sweep_failure(result, strict: bool):
    """A sweep failure keeps the official verdict but flags it; --strict makes it `incorrect`."""
    from kbench.guards import SWEEP_FAILED
    from kbench.results import Status

    flags = result.flags + ((SWEEP_FAILED,) if SWEEP_FAILED not in result.flags else ())
    message = f"sweep failed at {result.sweep.first_failure}"
    if strict:
        return replace(result, status=Status.INCORRECT, flags=flags, message=message)
    return replace(result, flags=flags, message=message)


def _load_problem(job: Job, state: "Progress"):
    from kbench.problem import load_module
    from kbench.results import Status

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
    from kbench.build import BuildError
    from kbench.problem import load_module
    from kbench.results import Status

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
    import torch

    from kbench.build import BuildError
    from kbench.results import Status

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
    import torch

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


def _check_trials(reference_model, candidate_model, make_inputs, config, device, state, expected_settings):
    from kbench import check, guards
    from kbench.results import Status

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
        if guards.inputs_mutated(inputs, candidate_inputs):
            state.flag(guards.MUTATED_INPUTS, "forward changed its input tensors in place")
        _guard_settings(state, expected_settings, "calling ModelNew")
        outcomes.append(check.compare(candidate_output, reference_output, config.tolerance_for))
        del candidate_output, reference_output
        state.check = check.summarise(outcomes)
    _raise_if_rejected(state)


def _time(reference_model, candidate_model, inputs, config, device, state):
    """(reference Timing, candidate Timing), or (None, None) when timing is off."""
    from kbench import timing
    from kbench.results import Status, Timing

    if not config.time:
        return None, None
    state.write("timing")
    reference_inputs, candidate_inputs = _clone(inputs), _clone(inputs)
    timer = timing.CudaEventTimer(device) if device.type == "cuda" else timing.HostTimer()
    rule = timing.StopRule(warmup=config.warmup, min_samples=config.min_samples, max_samples=config.max_samples,
                           target_rse=config.target_rse, budget_s=config.time_budget_s)
    try:
        reference_ms, candidate_ms = timing.sample_interleaved(
            lambda: reference_model(*reference_inputs), lambda: candidate_model(*candidate_inputs), timer, rule)
    except Exception as error:
        raise Stop(Status.RUNTIME_ERROR, f"failed while timing: {one_line(error)}")
    return Timing(tuple(reference_ms), timer.name), Timing(tuple(candidate_ms), timer.name)


def _sweep(problem_module, solution_module, config, device, state):
    """Check the candidate at random configurations of the problem's globals (small sizes).

    Configurations the reference rejects (invalid combinations) are skipped and counted; draws
    continue until `config.sweep` configurations ran or too many were drawn.
    """
    from kbench import params
    from kbench.problem import describe_overrides
    from kbench.results import SweepResult

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
    """'passed', 'skipped' (the reference itself rejects the configuration), or why it failed."""
    from kbench import check
    from kbench.problem import overridden
    from kbench.results import Status

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
        self.current = ""
        self.base = None
        self.build = None
        self.check = None
        self.provisional = None
        self.sweep_counts: dict = {}
        self.flags: list[str] = []
        self.flag_messages: list[str] = []

    def write(self, phase: str, current: str = "") -> None:
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
        return replace(self.base, build_s=_build_seconds(build), build_reused=build.all_reused if build else None,
                       flags=tuple(self.flags), wall_s=time.monotonic() - self.started, **fields)


def _raise_if_rejected(state: Progress) -> None:
    from kbench import guards
    from kbench.results import Status

    if any(name in guards.REJECTING for name in state.flags):
        raise Stop(Status.REJECTED, "; ".join(state.flag_messages))


def _guard_settings(state: Progress, expected: dict, when: str) -> None:
    from kbench import guards

    changes = guards.changed_settings(expected, guards.snapshot_settings())
    if changes:
        state.flag(guards.CHANGED_SETTINGS, f"global settings changed while {when}: {', '.join(changes)}")
        guards.restore_settings(expected)


def _build_seconds(build) -> float | None:
    return round(build.seconds, 3) if build is not None and build.any else None


def _clone(inputs: list) -> list:
    import torch

    return [value.clone() if isinstance(value, torch.Tensor) else value for value in inputs]


def _synchronize(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _device_name(device) -> str:
    import torch

    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return platform.processor() or platform.machine() or "cpu"


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
