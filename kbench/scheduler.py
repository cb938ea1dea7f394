"""Schedule many evaluations: builds in parallel on the CPUs, evaluations one per device, overlapped.

An evaluation is a pure function of a small job description (problem, solution, config, device):
the scheduler only decides where and when each runs, through an executor. LocalExecutor runs them in
child processes on this machine; another executor (a cluster) can take its place.
"""

from __future__ import annotations

import os
import queue
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Callable, Protocol

from kbench.config import RunConfig
from kbench.results import Result, Status
from kbench.runner import evaluate, kill_all_workers, prestart_waiting_workers
from kbench.solution import Solution

Pair = tuple[Path, Path]  # (problem file, solution file)


class Executor(Protocol):
    def build(self, pair: Pair, config: RunConfig, device: str, run_id: str, build_threads: int) -> Result:
        """Import the solution so its extensions build into the cache: status `built` or its failure."""

    def evaluate(self, pair: Pair, config: RunConfig, device: str, run_id: str) -> Result:
        """Judge the solution on `device`."""


class LocalExecutor:
    """Every build and evaluation in a fresh child process on this machine."""

    def build(self, pair: Pair, config: RunConfig, device: str, run_id: str, build_threads: int) -> Result:
        return evaluate(pair[0], pair[1], config, device=device, run_id=run_id, build_only=True,
                        build_threads=build_threads)

    def evaluate(self, pair: Pair, config: RunConfig, device: str, run_id: str) -> Result:
        return evaluate(pair[0], pair[1], config, device=device, run_id=run_id)


# A CUDA extension compiles its host and device sources as two compiler processes.
CUDA_BUILD_THREADS = 2


class CoreBudget:
    """Cores handed out to builds: a build waits until the cores it runs compilers on are free."""

    def __init__(self, cores: int):
        self.free = cores
        self.changed = threading.Condition()

    def acquire(self, count: int) -> None:
        with self.changed:
            self.changed.wait_for(lambda: self.free >= count)
            self.free -= count

    def release(self, count: int) -> None:
        with self.changed:
            self.free += count
            self.changed.notify_all()


def build_order(pairs: list[Pair]) -> list[int]:
    """CUDA solutions first: their builds are the long ones, and the GPUs wait on them."""
    return sorted(range(len(pairs)), key=lambda index: not _needs_cuda(pairs[index][1]))


def _needs_cuda(solution_path: Path) -> bool:
    try:
        return Solution.read(solution_path).needs_cuda
    except OSError:
        return False


def run_pairs(pairs: list[Pair], config: RunConfig, *, devices: list[str], run_id: str = "",
              jobs: int | None = None, executor: Executor | None = None,
              on_result: Callable[[Result], None] = lambda result: None,
              on_built: Callable[[Result], None] = lambda result: None) -> list[Result]:
    """Judge every pair; returns results in the order of `pairs`.

    Builds share the cores: by default a CUDA build takes CUDA_BUILD_THREADS of them (host and device
    sources compile at once) and any other build one, CUDA builds first, so the first kernels are
    ready early and the GPUs start while later candidates still compile; with `jobs`, that many builds
    run at once with an equal share each. As soon as a build succeeds its evaluation is queued for the
    next free device, one evaluation per device at a time. A failed build is the candidate's verdict.
    `on_result` sees each result once, under a lock, as it exists.
    """
    executor = executor or LocalExecutor()
    cores = os.cpu_count() or 1
    budget = CoreBudget(cores)
    equal_share = jobs is not None
    jobs = max(1, min(jobs or cores, len(pairs) or 1))

    def threads_for(index: int) -> int:
        if equal_share:
            return max(1, cores // jobs)
        return min(cores, CUDA_BUILD_THREADS if _needs_cuda(pairs[index][1]) else 1)

    results: list[Result | None] = [None] * len(pairs)
    lock = threading.Lock()
    ready: queue.Queue = queue.Queue()

    def record(index: int, result: Result) -> None:
        with lock:
            results[index] = result
            on_result(result)

    def device_worker(device: str) -> None:
        while (item := ready.get()) is not None:
            index, built = item
            result = executor.evaluate(pairs[index], config, device, run_id)
            if built is not None and built.build_s is not None:
                # Report the build as the build phase saw it, not the cache hit that followed.
                result = replace(result, build_s=built.build_s, build_reused=built.build_reused)
            record(index, result)

    def build(index: int) -> None:
        threads = threads_for(index)
        budget.acquire(threads)
        try:
            built = executor.build(pairs[index], config, devices[0], run_id, threads)
        finally:
            budget.release(threads)
        with lock:
            on_built(built)
        if built.status == Status.BUILT:
            ready.put((index, built))
        else:
            record(index, built)

    if isinstance(executor, LocalExecutor):
        for device in devices:
            prestart_waiting_workers(device)  # they warm up while the builds run
    workers = [threading.Thread(target=device_worker, args=(device,), daemon=True) for device in devices]
    for worker in workers:
        worker.start()
    try:
        if len(pairs) == 1:
            ready.put((0, None))  # one candidate: its evaluation builds it, no separate phase
        else:
            with ThreadPoolExecutor(max_workers=jobs) as pool:
                for future in [pool.submit(build, index) for index in build_order(pairs)]:
                    future.result()
        for _ in workers:
            ready.put(None)
        for worker in workers:
            while worker.is_alive():
                worker.join(timeout=0.2)  # short joins keep Ctrl-C responsive
    except KeyboardInterrupt:
        kill_all_workers()
        raise
    return [result for result in results if result is not None]
