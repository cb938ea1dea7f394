"""Schedule many evaluations: builds in parallel on the CPUs, evaluations one per device, overlapped.

An evaluation is a pure function of a small job description (problem, solution, config, device):
the scheduler only decides where and when each runs, through an executor. LocalExecutor runs them in
child processes on this machine; RayExecutor (ray_executor.py) runs the same on a Ray cluster.
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

Pair = tuple[Path, Path]  # (problem file, solution file)


class Executor(Protocol):
    def cores(self) -> int:
        """CPUs the builds share."""

    def slots(self, devices: list[str]) -> list[str]:
        """Get ready to evaluate on `devices`; returns the device of each evaluation slot.

        Each slot runs one evaluation at a time: one per GPU here, one per GPU of the cluster on Ray.
        """

    def build(self, pair: Pair, config: RunConfig, device: str, run_id: str, build_threads: int) -> Result:
        """Import the solution so its extensions build into the cache: status `built` or its failure."""

    def evaluate(self, pair: Pair, config: RunConfig, device: str, run_id: str) -> Result:
        """Judge the solution on `device`."""


class LocalExecutor:
    """Every build and evaluation in a fresh child process on this machine."""

    def cores(self) -> int:
        return os.cpu_count() or 1

    def slots(self, devices: list[str]) -> list[str]:
        for device in devices:
            prestart_waiting_workers(device)  # they warm up while the builds run
        return devices

    def build(self, pair: Pair, config: RunConfig, device: str, run_id: str, build_threads: int) -> Result:
        return evaluate(pair[0], pair[1], config, device=device, run_id=run_id, build_only=True,
                        build_threads=build_threads)

    def evaluate(self, pair: Pair, config: RunConfig, device: str, run_id: str) -> Result:
        return evaluate(pair[0], pair[1], config, device=device, run_id=run_id)


def run_pairs(pairs: list[Pair], config: RunConfig, *, devices: list[str], run_id: str = "",
              jobs: int | None = None, executor: Executor | None = None,
              on_result: Callable[[Result], None] = lambda result: None,
              on_built: Callable[[Result], None] = lambda result: None) -> list[Result]:
    """Judge every pair; returns results in the order of `pairs`.

    Builds run `jobs` at a time (default one per core; each build's compiler gets its share of the
    cores). As soon as a build succeeds its evaluation is queued for the next free slot (see
    Executor.slots: one evaluation per device at a time), so GPUs start while later candidates still
    compile. A failed build is the candidate's verdict. `on_result` sees each result once, under a
    lock, as it exists.
    """
    executor = executor or LocalExecutor()
    cores = executor.cores()
    jobs = max(1, min(jobs or cores, len(pairs) or 1))
    build_threads = max(1, cores // jobs)
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
        built = executor.build(pairs[index], config, devices[0], run_id, build_threads)
        with lock:
            on_built(built)
        if built.status == Status.BUILT:
            ready.put((index, built))
        else:
            record(index, built)

    workers = [threading.Thread(target=device_worker, args=(device,), daemon=True)
               for device in executor.slots(devices)]
    for worker in workers:
        worker.start()
    try:
        if len(pairs) == 1:
            ready.put((0, None))  # one candidate: its evaluation builds it, no separate phase
        else:
            with ThreadPoolExecutor(max_workers=jobs) as pool:
                for future in [pool.submit(build, index) for index in range(len(pairs))]:
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
