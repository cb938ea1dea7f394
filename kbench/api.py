"""kbench from Python: judge pairs given as paths or as source text, with a judge that stays warm between
batches (its waiting workers, fork servers and build cache outlive each call), results streamed as they finish,
and results CSVs read back as typed DataFrames. KernelBench's entry point is kernelbench_entry.py.

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
from pathlib import Path
from typing import Iterable, Iterator

from kbench.config import RunConfig
from kbench.results import Result

PairLike = tuple["str | os.PathLike", "str | os.PathLike"]  # (problem, solution): a path, or a file's source


class Judge:
    """Judges batches of (problem, solution) pairs and stays warm between them. Use it as a context manager;
    one at a time in a process (the waiting workers and fork servers are the process's, and closing ends them).

    `config`: the same settings the CLI takes (RunConfig); `devices`: where evaluations run (default: as the
    CLI's: every visible GPU under device "auto", else the config's device); `jobs`: compilers at once
    (default: one per usable core, fewer if memory is short); `executor`: an Executor (schedule/executor.py;
    default: child processes here; ray_executor.RayExecutor for a cluster); `out`: a results CSV every result is
    appended to as it exists (default: none)."""

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
