"""kbench from Python: judge pairs given as paths or as source text, with a judge that stays warm between
batches (its waiting workers, fork servers and build cache outlive each call), results streamed as they finish,
a KernelBench-compatible entry point, and results CSVs read back as typed DataFrames.

    with kbench.Judge(RunConfig(sweep=0)) as judge:
        for result in judge.stream([(problem_source, candidate_source), ...]):
            reward = result.speedup if result.status == "correct" else 0.0

Everything runs as `kbench sweep` runs it (scheduler.run_pairs): builds in parallel, one evaluation per device,
each candidate in its own runner process; leaving the `with` block, or an exception in it, ends every process.
"""

from __future__ import annotations

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

    def judge(self, problem: "str | os.PathLike", solution: "str | os.PathLike") -> Result:
        """One pair's Result."""
        return self.judge_many([(problem, solution)])[0]

    def judge_many(self, pairs: Iterable[PairLike]) -> list[Result]:
        """Each pair's Result, in the order of `pairs`."""
        files = [self._files(pair) for pair in pairs]
        results: dict[tuple[Path, Path], Result] = {}
        for pair, result in self._run(files):
            results[pair] = result
        return [results[pair] for pair in files]

    def stream(self, pairs: Iterable[PairLike]) -> Iterator[Result]:
        """Results in the order they finish (builds first: a failed build's result comes early)."""
        for _, result in self._run([self._files(pair) for pair in pairs]):
            yield result

    def _run(self, files: list[tuple[Path, Path]]) -> Iterator[tuple[tuple[Path, Path], Result]]:
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
                run_pairs(files, self.config, devices=self.devices, run_id=new_run_id(), jobs=self.jobs,
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
    """One pair, judged by a Judge that lives for this call only."""
    with Judge(config) as one_off:
        return one_off.judge(problem, solution)


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

@dataclass
class KernelExecResult:
    """The fields of KernelBench's KernelExecResult (times in microseconds, -1.0 where not measured), with
    kbench's own Result beside them."""

    compiled: bool = False
    correctness: bool = False
    metadata: dict = field(default_factory=dict)
    runtime: float = -1.0
    runtime_stats: dict = field(default_factory=dict)
    ref_runtime: float = -1.0
    ref_runtime_stats: dict = field(default_factory=dict)
    result: Result | None = None


_NOT_COMPILED = (Status.COMPILE_ERROR, Status.LOAD_ERROR)


def eval_kernel_against_ref(original_model_src: str, custom_model_src: str, seed_num: int = 42,
                            num_correct_trials: int = 1, num_perf_trials: int = 10,
                            measure_performance: bool = False, timing_method: str = "cuda_event",
                            verbose: bool = False, build_dir: "os.PathLike | None" = None, device=None,
                            backend: str = "cuda", precision=None, **_ignored) -> KernelExecResult:
    """KernelBench's `eval_kernel_against_ref`, judged by kbench: the same arguments (the two sources first) and
    result fields. kbench's checks are stricter: true float32 (TF32 off), a float64 truth where the candidate and
    the reference disagree, a parameter sweep, fresh inputs while timing, the candidate in a process of its own.
    A `correct` result with a noting flag is correct here too; its flags are in `metadata["kbench_flags"]`.
    `device`: an index, "cuda:N" or a torch.device (default: the first GPU, else the CPU). `timing_method`,
    `verbose`, `backend` and `precision` are accepted and not used (kbench times with CUDA events, float32)."""
    config = RunConfig(device=_device_name(device), seed=seed_num, trials=max(1, num_correct_trials),
                       time=measure_performance, min_samples=min(num_perf_trials, 10),
                       **({"cache_dir": Path(build_dir)} if build_dir else {}))
    result = judge(original_model_src, custom_model_src, config)
    return kernel_exec_result(result)


def kernel_exec_result(result: Result) -> KernelExecResult:
    """KernelBench's fields for a kbench Result."""
    metadata = {"kbench_status": result.status, "kbench_flags": list(result.flags), "device": result.device}
    if result.message:
        metadata["kbench_message"] = result.message
    if result.check is not None and result.check.max_abs_err is not None:
        metadata["max_difference"] = [f"{result.check.max_abs_err:.6g}"]
    if result.check is not None:
        metadata["correctness_trials"] = f"({result.check.trials_passed} / {result.check.trials_total})"
    outcome = KernelExecResult(compiled=result.status not in _NOT_COMPILED,
                               correctness=result.status == Status.CORRECT, metadata=metadata, result=result)
    if result.status == Status.CORRECT and result.candidate_timing and result.reference_timing:
        outcome = replace(outcome, runtime=_us(result.candidate_timing.median_ms),
                          runtime_stats=_stats(result.candidate_timing),
                          ref_runtime=_us(result.reference_timing.median_ms),
                          ref_runtime_stats=_stats(result.reference_timing))
    return outcome


def _device_name(device) -> str:
    if device is None:
        return "auto"
    if isinstance(device, int):
        return f"cuda:{device}"
    return str(device)


def _us(milliseconds: float) -> float:
    return round(milliseconds * 1e3, 3)


def _stats(timing) -> dict:
    import statistics

    samples = [value * 1e3 for value in timing.samples_ms]
    return {"mean": statistics.fmean(samples), "std": statistics.pstdev(samples), "min": min(samples),
            "max": max(samples), "num_trials": len(samples), "median": statistics.median(samples)}
