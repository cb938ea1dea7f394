"""kbench from Python: judge pairs given as paths or as source text, with a judge that stays warm between
batches (its waiting workers, fork servers and build cache outlive each call), results streamed as they finish,
a KernelBench-compatible entry point, and results CSVs read back as typed DataFrames.

    with kbench.Judge(RunConfig(sweep=0)) as judge:
        for result in judge.stream([(problem_source, candidate_source), ...]):
            reward = result.reward  # the judge's speedup when correct, else 0 (kbench.reward)

Everything runs as `kbench sweep` runs it (scheduler.run_pairs): builds in parallel, one evaluation per device,
each candidate in its own runner process; leaving the `with` block, or an exception in it, ends every process.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import queue
import tempfile
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Iterable, Iterator

from kbench.config import RunConfig
from kbench.results import Result, Status

PairLike = tuple["str | os.PathLike", "str | os.PathLike"]  # (problem, solution): a path, or a file's source


class Judge:
    """Judges batches of (problem, solution) pairs and stays warm between them. Use it as a context manager;
    one at a time in a process (the waiting workers and fork servers are the process's, and closing ends them).

    `config`: the same settings the CLI takes (RunConfig); `devices`: where evaluations run (default: as the
    CLI's: every visible GPU under device "auto", else the config's device); `jobs`: compilers at once
    (default: one per usable core, fewer if memory is short); `executor`: a scheduler Executor (default: child
    processes here; ray_executor.RayExecutor for a cluster); `out`: a results CSV every result is appended to as
    it exists (default: none)."""

    def __init__(self, config: RunConfig | None = None, *, devices: list[str] | None = None,
                 jobs: int | None = None, executor=None, out: str | os.PathLike | None = None):
        from kbench.schedule.devices import devices_for

        self.config = config or RunConfig()
        self.devices = devices or devices_for(self.config.device, None)
        self.jobs = jobs
        self.executor = executor
        self.out = Path(out) if out is not None else None
        self._sources = tempfile.TemporaryDirectory(prefix="kbench-sources-")
        self._closed = False

    def __enter__(self) -> "Judge":
        from kbench.schedule.pool import worker_pool

        if self.executor is None:
            for device in self.devices:
                worker_pool().prestart(device)  # warm while the caller prepares its first batch
        return self

    def __exit__(self, *exception) -> None:
        self.close()

    def close(self) -> None:
        """End every process this judge started (waiting workers, fork servers, anything still running)."""
        from kbench.schedule.pool import worker_pool

        if self._closed:
            return
        self._closed = True
        pool = worker_pool()
        pool.kill_all()
        pool.close()
        self._sources.cleanup()

    def judge(self, problem: "str | os.PathLike", solution: "str | os.PathLike",
              config: RunConfig | None = None) -> Result:
        """One pair's Result (`config`: settings for this pair only, default the judge's)."""
        return self.judge_many([(problem, solution)], config)[0]

    def judge_many(self, pairs: Iterable[PairLike], config: RunConfig | None = None) -> list[Result]:
        """Each pair's Result, in the order of `pairs` (`config`: settings for this batch, default the judge's)."""
        files = [self._files(pair) for pair in pairs]
        results: dict[tuple[Path, Path], Result] = {}
        for pair, result in self._run(files, config or self.config):
            results[pair] = result
        return [results[pair] for pair in files]

    def stream(self, pairs: Iterable[PairLike]) -> Iterator[Result]:
        """Results in the order they finish (builds first: a failed build's result comes early)."""
        for _, result in self._run([self._files(pair) for pair in pairs], self.config):
            yield result

    def _run(self, files: list[tuple[Path, Path]],
             config: RunConfig) -> Iterator[tuple[tuple[Path, Path], Result]]:
        """(pair, result) as each finishes; the run goes on in a thread of its own."""
        from kbench.results_csv import append_row
        from kbench.schedule.child import new_run_id
        from kbench.schedule.scheduler import run_pairs

        if self._closed:
            raise RuntimeError("this Judge is closed")
        finished: queue.Queue = queue.Queue()
        by_row = {(problem.stem, str(solution)): (problem, solution) for problem, solution in files}
        failure: list[BaseException] = []

        def record(result: Result) -> None:
            if self.out is not None:
                append_row(self.out, result.to_row())
            finished.put(result)

        def run() -> None:
            try:
                run_pairs(files, config, devices=self.devices, run_id=new_run_id(), jobs=self.jobs,
                          executor=self.executor, on_result=record)
            except BaseException as error:  # handed to the caller's thread
                failure.append(error)
            finally:
                finished.put(None)
        thread = threading.Thread(target=run, name="kbench-judge", daemon=True)
        thread.start()
        while (result := finished.get()) is not None:
            yield by_row[result.problem, result.solution], result
        thread.join()
        if failure:
            raise failure[0]

    def _files(self, pair: PairLike) -> tuple[Path, Path]:
        problem, solution = pair
        return self._file(problem, "problem"), self._file(solution, "solution")

    def _file(self, value: "str | os.PathLike", kind: str) -> Path:
        """A path as it is; source text written once under this judge's folder, named by its hash (a problem
        and its candidates from text get stable names: the build cache finds them again)."""
        if isinstance(value, os.PathLike) or (isinstance(value, str) and "\n" not in value and value.endswith(".py")):
            path = Path(value)
            if not path.is_file():
                raise FileNotFoundError(f"no {kind} file at {path}")
            return path.resolve()
        digest = hashlib.sha256(value.encode()).hexdigest()[:16]
        path = Path(self._sources.name) / kind / f"{kind}_{digest}.py"
        path.parent.mkdir(exist_ok=True)
        if not path.exists():
            path.write_text(value)
        return path


def judge(problem: "str | os.PathLike", solution: "str | os.PathLike", config: RunConfig | None = None) -> Result:
    """One pair, judged by this process's warm judge for the config's devices (warm_judge)."""
    from kbench.schedule.devices import devices_for

    config = config or RunConfig()
    with _warm_calls:
        return warm_judge(devices_for(config.device, None)[:1]).judge(problem, solution, config)


_warm_judges: dict[tuple[str, ...], Judge] = {}
_warm_calls = threading.Lock()  # one pair at a time on the warm judges: one evaluation per device, as a Judge runs


def warm_judge(devices: list[str]) -> Judge:
    """This process's Judge for `devices`, started by its first call and kept for the next (its waiting workers, fork
    servers and build cache stay warm): `judge` and `eval_kernel_against_ref` use it. Closed at exit; a Judge of
    the caller's own, closed, ends its processes too (the next call starts them again)."""
    key = tuple(devices)
    warm = _warm_judges.get(key)
    if warm is None or warm._closed:
        if not _warm_judges:
            atexit.register(close_warm_judges)
        warm = _warm_judges[key] = Judge(RunConfig(device=devices[0]), devices=list(devices)).__enter__()
    return warm


def close_warm_judges() -> None:
    """End the warm judges' processes (at exit, or before a fork of the caller's)."""
    for warm in list(_warm_judges.values()):
        warm.close()


def results_frame(results: Iterable[Result]):
    """A pandas DataFrame of Results, one row each, with the columns and types read_results gives."""
    import pandas as pd

    return _typed(pd.DataFrame([result.to_row() for result in results]))


def read_results(csv_path: str | os.PathLike, latest: bool = False):
    """A results CSV as a pandas DataFrame: numbers as floats, `flags` as lists of names, the timing samples
    as numpy arrays, `time` as timestamps. `latest`: only each (problem, solution)'s latest row."""
    from kbench.report import summary

    frame = summary.read(csv_path)
    return _typed(summary.latest(frame) if latest else frame)


def _typed(frame):
    import numpy as np
    import pandas as pd

    if "flags" in frame:
        frame["flags"] = [[name for name in str(value).split(";") if name] if isinstance(value, str) else []
                          for value in frame["flags"]]
    for column in ("ref_samples_ms", "cand_samples_ms"):
        if column in frame:
            frame[column] = [_samples(value, np) for value in frame[column]]
    if "time" in frame:
        frame["time"] = pd.to_datetime(frame["time"], utc=True, errors="coerce")
    return frame


def _samples(value, np):
    if isinstance(value, (list, tuple)):
        return np.asarray(value, dtype=float)
    if isinstance(value, str) and value.startswith("["):
        return np.asarray(json.loads(value), dtype=float)
    return np.asarray([], dtype=float)


# --- KernelBench's entry point ---------------------------------------------------------------------------

# KernelBench's keyword values (its eval.py and timing.py): a value outside them is refused, as KernelBench refuses it.
BACKENDS = ("cuda", "triton", "tilelang", "cute", "hip", "thunderkittens")
TIMING_METHODS = ("cuda_event", "do_bench", "do_bench_impl", "host_time", "nsight_python_time")
# KernelBench's precision names (get_torch_dtype_from_string), and torch's, to kbench's.
_PRECISION_NAMES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16", "float32": "float32",
                    "float16": "float16", "bfloat16": "bfloat16"}


@dataclass
class KernelExecResult:
    """The fields of KernelBench's KernelExecResult, filled as KernelBench fills them: times in milliseconds (its
    recorded results hold ms, whatever its field comment says), `runtime` and `ref_runtime` the mean of the timed
    calls to three significant figures, -1.0 where not measured; `runtime_stats` and `ref_runtime_stats` its keys
    (mean, std, min, max, num_trials, hardware, device) and kbench's (median_ms, iqr_ms, timer, samples_ms);
    `metadata` its keys (hardware, device, correctness_trials, compilation_error, runtime_error,
    correctness_issue, max_difference, excessive_speedup, ...) and kbench's (kbench_status, kbench_flags,
    kbench_message). `result`: kbench's own Result; `reward` its reward (Result.reward)."""

    compiled: bool = False
    correctness: bool = False
    metadata: dict = field(default_factory=dict)
    runtime: float = -1.0
    runtime_stats: dict = field(default_factory=dict)
    ref_runtime: float = -1.0
    ref_runtime_stats: dict = field(default_factory=dict)
    result: Result | None = None

    @property
    def reward(self) -> float:
        return reward(self)


_NOT_COMPILED = (Status.COMPILE_ERROR, Status.LOAD_ERROR)
_FAILED_RUNNING = (Status.RUNTIME_ERROR, Status.CRASHED, Status.TIMEOUT)


def eval_kernel_against_ref(original_model_src: str, custom_model_src: str, seed_num: int = 42,
                            num_correct_trials: int = 1, num_perf_trials: int = 10,
                            measure_performance: bool = False, timing_method: str = "cuda_event",
                            verbose: bool = False, build_dir: "os.PathLike | None" = None, device=None,
                            backend: str = "cuda", precision=None, check_for_excessive_speedup: bool = True,
                            excessive_speedup_threshold: float = 10) -> KernelExecResult:
    """KernelBench's `eval_kernel_against_ref`, judged by kbench: its keywords (an unknown one is a TypeError, an
    unknown backend, timing method or precision a ValueError), its result fields and units.

    `precision`: torch.float32 (default), torch.float16 or torch.bfloat16 (or KernelBench's "fp32", "fp16",
    "bf16"): floating inputs, init inputs and both models' parameters are cast to it, and float16/bfloat16 runs
    compare every output at KernelBench's tolerance for them (1e-2). `device`: an index, "cuda:N" or a
    torch.device (default: the first GPU, else the CPU). `build_dir`: kbench's build cache for this call.
    `num_perf_trials`: the fewest timed calls of each side (kbench samples on until its medians are precise or
    its time budget is spent). `timing_method`: checked, not used (kbench times with CUDA events, the host clock
    on a CPU). `backend`: checked; kbench judges any backend's Python file alike (tilelang needs float16 or
    bfloat16, as in KernelBench; hip needs an AMD GPU, which kbench does not drive).

    kbench's checks are stricter than KernelBench's: true float32 (TF32 off), a float64 truth where the candidate
    and the reference disagree, a parameter sweep, fresh inputs while timing, the candidate in a process of its
    own. A `correct` result with a noting flag is correct here too (flags in `metadata["kbench_flags"]`). Calls
    share one warm judge (warm_judge): the first pays its start-up, later ones do not."""
    from kbench.schedule.devices import devices_for

    precision_name = _precision_name(precision)
    _check_backend(backend, precision_name)
    if timing_method not in TIMING_METHODS:
        raise ValueError(f"Unsupported timing method: {timing_method}")
    defaults = RunConfig()
    name = _device_name(device)
    config = RunConfig(device=name, seed=seed_num, trials=max(1, num_correct_trials), time=measure_performance,
                       min_samples=max(1, num_perf_trials), max_samples=max(num_perf_trials, defaults.max_samples),
                       precision=precision_name, **({"cache_dir": Path(build_dir)} if build_dir else {}))
    with _warm_calls:
        result = warm_judge(devices_for(name, None)[:1]).judge(original_model_src, custom_model_src, config)
    outcome = kernel_exec_result(result, check_for_excessive_speedup, excessive_speedup_threshold)
    if verbose:
        print(f"[Eval] kbench: {result.status}{': ' + result.message if result.message else ''} "
              f"(compiled {outcome.compiled}, correctness {outcome.correctness}, runtime {outcome.runtime} ms, "
              f"ref_runtime {outcome.ref_runtime} ms)", flush=True)
    return outcome


def kernel_exec_result(result: Result, check_for_excessive_speedup: bool = True,
                       excessive_speedup_threshold: float = 10) -> KernelExecResult:
    """KernelBench's fields for a kbench Result."""
    outcome = KernelExecResult(compiled=result.status not in _NOT_COMPILED,
                               correctness=result.status == Status.CORRECT, metadata=_metadata(result),
                               result=result)
    if result.status != Status.CORRECT or not (result.candidate_timing and result.reference_timing):
        return outcome
    environment = {"hardware": result.device_name, "device": result.device}
    outcome = replace(outcome, runtime=_mean_ms(result.candidate_timing),
                      runtime_stats=_stats(result.candidate_timing, environment),
                      ref_runtime=_mean_ms(result.reference_timing),
                      ref_runtime_stats=_stats(result.reference_timing, environment))
    # KernelBench's guard, on its own numbers: the reference's mean over the candidate's.
    if check_for_excessive_speedup and outcome.runtime > 0 and \
            outcome.ref_runtime / outcome.runtime > excessive_speedup_threshold:
        outcome.metadata["excessive_speedup"] = True
    return outcome


def reward(result: "Result | KernelExecResult") -> float:
    """One number per result for a training loop: Result.reward (the judge's speedup when the verdict is
    `correct`, 1.0 if it was not timed, else 0.0), of a Result or of eval_kernel_against_ref's result."""
    if isinstance(result, KernelExecResult):
        return result.result.reward if result.result is not None else 0.0
    return result.reward


def _metadata(result: Result) -> dict:
    """KernelBench's metadata keys for what kbench found, and kbench's own beside them."""
    metadata = {"hardware": result.device_name, "device": result.device}
    status, message = result.status, result.message or result.status
    if result.check is not None:
        metadata["correctness_trials"] = f"({result.check.trials_passed} / {result.check.trials_total})"
    if status in _NOT_COMPILED:
        metadata["compilation_error_name"] = f"kbench.{status}"
        metadata["compilation_error"] = message
    elif status in _FAILED_RUNNING:
        metadata["runtime_error_name"] = f"kbench.{status}"
        metadata["runtime_error"] = message
    elif status in (Status.INCORRECT, Status.REJECTED):
        mismatch = result.check.first_mismatch if result.check is not None else None
        metadata["correctness_issue"] = mismatch or message
        metadata["correctness_issue_name"] = f"kbench.{status}"
        if result.check is not None and result.check.max_abs_err is not None:
            metadata["max_difference"] = [f"{result.check.max_abs_err:.6f}"]
    metadata.update(kbench_status=status, kbench_flags=list(result.flags))
    if result.message:
        metadata["kbench_message"] = result.message
    return metadata


def _precision_name(precision) -> str:
    """kbench's name for KernelBench's `precision` (a torch.dtype or its string); ValueError for another."""
    if precision is None:
        return "float32"
    name = _PRECISION_NAMES.get(str(precision).removeprefix("torch."))
    if name is None:
        raise ValueError(f"Invalid precision not supported: {precision}")
    return name


def _check_backend(backend: str, precision: str) -> None:
    lower = str(backend).lower()
    if lower not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; KernelBench's are {', '.join(BACKENDS)}")
    if lower == "hip":
        raise ValueError("HIP backend requires AMD GPU, which kbench does not judge on")
    if lower == "tilelang" and precision not in ("float16", "bfloat16"):
        raise ValueError("TileLang only supports fp16 or bfloat16")


def _device_name(device) -> str:
    if device is None:
        return "auto"
    if isinstance(device, int):
        return f"cuda:{device}"
    name = str(device)
    return "cuda:0" if name == "cuda" else name


def _three_figures(value: float) -> float:
    """As KernelBench's get_timing_stats rounds every figure."""
    return float(f"{value:.3g}")


def _mean_ms(timing) -> float:
    import statistics

    return _three_figures(statistics.fmean(timing.samples_ms))


def _stats(timing, environment: dict) -> dict:
    """KernelBench's runtime_stats keys, in ms to three figures, then kbench's median and spread (full precision)."""
    import statistics

    samples = timing.samples_ms
    return {"mean": _mean_ms(timing), "std": _three_figures(statistics.pstdev(samples)),
            "min": _three_figures(min(samples)), "max": _three_figures(max(samples)), "num_trials": len(samples),
            **environment, "median_ms": timing.median_ms, "iqr_ms": timing.iqr_ms, "timer": timing.timer,
            "samples_ms": list(samples)}
