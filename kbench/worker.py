"""One evaluation, run in a fresh child process: load, build, check, time, write a result file.

The parent (runner.py) starts `python -m kbench.worker JOB.json` with its output going to a log file
and a wall-clock timeout. Everything the candidate can do wrong that Python can see becomes a
status here; what Python cannot see (a segfault, a hang) the parent turns into one.
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
from pathlib import Path

# Names whose appearance in an error on a CPU-only run means the candidate needs CUDA, not that it is wrong.
_NO_CUDA_MESSAGES = ("not compiled with CUDA", "no NVIDIA driver", "CUDA_HOME", "No CUDA GPUs",
                     "Found no NVIDIA", "CUDA driver", "cuda runtime")


@dataclass(frozen=True)
class Job:
    """Everything one evaluation needs; a plain value so any executor can carry it."""

    problem_path: str          # reference file
    solution_path: str         # candidate file
    device: str                # resolved: "cpu" or "cuda:N"
    config: dict               # RunConfig.to_dict()
    result_path: str           # where the worker writes its Result as JSON
    state_path: str            # where the worker records its phase, for the parent's messages
    overrides: dict            # problem globals to override (empty: official sizes)
    log_path: str = ""         # the worker's stdout/stderr file (build output lands there)
    build_only: bool = False   # import the solution (building its extensions) and stop
    run_id: str = ""

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
    state = _State(Path(job.state_path))
    base = Result(
        problem=Path(job.problem_path).stem, solution=job.solution_path, status=Status.CRASHED,
        problem_path=job.problem_path, device=job.device, device_name=_device_name(device),
        torch_version=torch.__version__, cuda_version=torch.version.cuda or "", policy=config.policy,
        sizes=describe_overrides(job.overrides), run_id=job.run_id,
    )
    build = BuildRecord(log_path=Path(job.log_path) if job.log_path else None)
    state.build = build
    build.on_change = lambda: state.write(state.phase)
    os.environ.setdefault("TRITON_CACHE_DIR", str(config.cache_dir / "triton" / versions_tag()))
    install_build_hooks(config.cache_dir / "extensions" / versions_tag(), build)
    guards.set_strict_precision()
    try:
        return _evaluate(job, config, device, state, build, base)
    except Stop as stop:
        status, message = stop.status, stop.message
        if device.type == "cpu" and status in (Status.LOAD_ERROR, Status.COMPILE_ERROR, Status.RUNTIME_ERROR) \
                and any(text.lower() in message.lower() for text in _NO_CUDA_MESSAGES):
            status, message = Status.SKIPPED, f"needs a CUDA device ({message})"
        return replace(base, status=status, message=message, check=state.check,
                       build_s=_build_seconds(build), build_reused=build.all_reused,
                       flags=tuple(state.flags), wall_s=time.monotonic() - state.started)
    finally:
        state.write("done")


def _evaluate(job, config, device, state, build, base):
    import torch

    from kbench import check, guards, timing
    from kbench.build import BuildError
    from kbench.problem import load_module, overridden
    from kbench.results import Status, Timing

    state.write("loading problem")
    try:
        problem_module = load_module(Path(job.problem_path), "kbench_problem")
    except Exception as error:
        raise Stop(Status.REFERENCE_ERROR, f"problem file failed to load: {one_line(error)}")
    for name in ("Model", "get_inputs", "get_init_inputs"):
        if not hasattr(problem_module, name):
            raise Stop(Status.REFERENCE_ERROR, f"problem file defines no {name}")

    expected_settings = guards.snapshot_settings()
    state.write("loading solution")
    try:
        solution_module = load_module(Path(job.solution_path), "kbench_solution")
    except BuildError as error:
        raise Stop(Status.COMPILE_ERROR, str(error))
    except (Exception, SystemExit) as error:
        traceback.print_exc()
        raise Stop(Status.LOAD_ERROR, one_line(error))
    if not isinstance(getattr(solution_module, "ModelNew", None), type):
        raise Stop(Status.LOAD_ERROR, "the solution defines no ModelNew class")
    _guard_settings(state, expected_settings, "importing the solution")
    if job.build_only:
        return replace(base, status=Status.BUILT, build_s=_build_seconds(build), build_reused=build.all_reused,
                       wall_s=time.monotonic() - state.started)

    with overridden(problem_module, job.overrides), torch.no_grad():
        state.write("building models")
        torch.manual_seed(config.seed)
        try:
            init_inputs = list(problem_module.get_init_inputs())
            reference_model = problem_module.Model(*init_inputs).to(device)
        except Exception as error:
            raise Stop(Status.REFERENCE_ERROR, f"reference failed to build: {one_line(error)}")
        torch.manual_seed(config.seed)
        try:
            candidate_model = solution_module.ModelNew(*init_inputs).to(device)
        except BuildError as error:
            raise Stop(Status.COMPILE_ERROR, str(error))
        except Exception as error:
            traceback.print_exc()
            raise Stop(Status.LOAD_ERROR, f"ModelNew(*get_init_inputs()) failed: {one_line(error)}")
        _guard_settings(state, expected_settings, "constructing ModelNew")

        def make_inputs(seed: int) -> list:
            torch.manual_seed(seed)
            with torch.device(device):
                return list(problem_module.get_inputs())

        def call_reference(inputs):
            try:
                output = reference_model(*inputs)
                _synchronize(device)
                return output
            except Exception as error:
                raise Stop(Status.REFERENCE_ERROR, f"reference forward failed: {one_line(error)}")

        def call_candidate(inputs):
            try:
                output = candidate_model(*inputs)
                _synchronize(device)
                return output
            except Exception as error:
                traceback.print_exc()
                raise Stop(Status.RUNTIME_ERROR, one_line(error))

        state.write("checking")
        outcomes = []
        for trial in range(config.trials):
            inputs = make_inputs(config.seed + trial)
            candidate_inputs = _clone(inputs)
            # Alternate who runs first, so a candidate cannot rely on the reference's leftovers.
            if trial % 2 == 0:
                candidate_output = call_candidate(candidate_inputs)
                reference_output = call_reference(_clone(inputs))
            else:
                reference_output = call_reference(_clone(inputs))
                candidate_output = call_candidate(candidate_inputs)
            if guards.inputs_mutated(inputs, candidate_inputs):
                state.flag(guards.MUTATED_INPUTS, "forward changed its input tensors in place")
            _guard_settings(state, expected_settings, "calling ModelNew")
            outcomes.append(check.compare(candidate_output, reference_output, config.tolerance_for))
            del candidate_output, reference_output
            state.check = check.summarise(outcomes)
        result_check = state.check
        if state.rejecting_flags():
            raise Stop(Status.REJECTED, "; ".join(state.flag_messages))
        if not result_check.passed:
            raise Stop(Status.INCORRECT, result_check.first_mismatch or "outputs differ")

        reference_timing = candidate_timing = None
        if config.time:
            state.write("timing")
            inputs = make_inputs(config.seed)
            reference_inputs, candidate_inputs = _clone(inputs), _clone(inputs)
            timer = timing.CudaEventTimer(device) if device.type == "cuda" else timing.HostTimer()
            rule = timing.StopRule(warmup=config.warmup, min_samples=config.min_samples,
                                   max_samples=config.max_samples, target_rse=config.target_rse,
                                   budget_s=config.time_budget_s)
            try:
                reference_ms, candidate_ms = timing.sample_interleaved(
                    lambda: reference_model(*reference_inputs), lambda: candidate_model(*candidate_inputs),
                    timer, rule)
            except Exception as error:
                raise Stop(Status.RUNTIME_ERROR, f"failed while timing: {one_line(error)}")
            reference_timing = Timing(tuple(reference_ms), timer.name)
            candidate_timing = Timing(tuple(candidate_ms), timer.name)
            _guard_settings(state, expected_settings, "timing ModelNew")
            if state.rejecting_flags():
                raise Stop(Status.REJECTED, "; ".join(state.flag_messages))

    return replace(base, status=Status.CORRECT, check=result_check, reference_timing=reference_timing,
                   candidate_timing=candidate_timing, build_s=_build_seconds(build),
                   build_reused=build.all_reused, flags=tuple(state.flags),
                   wall_s=time.monotonic() - state.started)


class _State:
    """The worker's progress, mirrored to a small JSON file the parent reads after a crash or hang."""

    def __init__(self, path: Path):
        self.path = path
        self.started = time.monotonic()
        self.phase = "starting"
        self.build = None
        self.check = None
        self.flags: list[str] = []
        self.flag_messages: list[str] = []

    def write(self, phase: str) -> None:
        self.phase = phase
        building = bool(self.build and self.build.building)
        write_json_atomic(self.path, {"phase": phase, "building": building,
                                      "build_s": _build_seconds(self.build) if self.build else None,
                                      "flags": self.flags})

    def flag(self, name: str, message: str | None = None) -> None:
        if name not in self.flags:
            self.flags.append(name)
            self.flag_messages.append(message or name.replace("_", " "))
            self.write(self.phase)

    def rejecting_flags(self) -> list[str]:
        from kbench import guards

        return [name for name in self.flags if name in guards.REJECTING]


def _guard_settings(state: _State, expected: dict, when: str) -> None:
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
