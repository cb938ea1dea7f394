"""Schedule many evaluations: builds in parallel on the CPUs, evaluations one per device, overlapped.

An evaluation is a pure function of a small job description (problem, solution, config, device):
the scheduler only decides where and when each runs, through an executor (executor.py). LocalExecutor runs them in
child processes on this machine; RayExecutor (ray_executor.py) runs the same on a Ray cluster.
"""

from __future__ import annotations

import queue
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

from kbench.config import RunConfig
from kbench.results import Result, Status
from kbench.schedule.child import needs_build_phase
from kbench.schedule.executor import CUDA_BUILD_THREADS, Executor, LocalExecutor, Pair, Watcher, read_solution
from kbench.schedule.job import ProgressRecord
from kbench.schedule.pool import PoolClosed, worker_pool


def build_order(pairs: list[Pair]) -> list[int]:
    """CUDA solutions first: their builds are the long ones, and the GPUs wait on them."""
    return sorted(range(len(pairs)), key=lambda index: not _needs_cuda(pairs[index][1]))


def plan_builds(pairs: list[Pair], config: RunConfig) -> tuple[list[int], list[int]]:
    """(the pairs that need a build phase, the pairs that do not), each in build order; a build's rank is
    its place in the first list."""
    ordered = build_order(pairs)
    needed = {index for index in ordered if needs_build_phase(pairs[index][1], config)}
    return [index for index in ordered if index in needed], [index for index in ordered if index not in needed]


def _needs_cuda(solution_path: Path) -> bool:
    solution = read_solution(solution_path)
    return solution is not None and solution.needs_cuda


def run_pairs(pairs: list[Pair], config: RunConfig, *, devices: list[str], run_id: str = "",
              jobs: int | None = None, executor: Executor | None = None,
              on_result: Callable[[Result], None] = lambda result: None,
              on_built: Callable[[Result], None] = lambda result: None,
              on_progress: Callable[[Pair, ProgressRecord | None], None] = lambda pair, record: None) -> list[Result]:
    """Judge every pair; returns results in the order of `pairs`.

    Builds run with `jobs` compilers at once (default: the executor's cores(); it decides how many builds
    that is: LocalExecutor queues every compiler for one of `jobs` slots, slots.py), CUDA builds first,
    each with its share of the cores but at least CUDA_BUILD_THREADS compilers for a CUDA build (its host
    and device sources compile at once: a build's wall time is what delays its evaluation), at a lower
    CPU priority than evaluations. As soon as a build succeeds its evaluation is queued for the next free
    device (see Executor.evaluation_devices: one evaluation per device at a time), so GPUs start while later
    candidates still compile. A failed build is the candidate's verdict. `on_result` sees each result once,
    under a lock, as it exists.

    `on_progress(pair, record)` sees each running worker's progress record, and None when it has ended.
    Ctrl-C (KeyboardInterrupt) kills every worker at once and re-raises; what the killed workers would have
    said is not a verdict, so no result reaches `on_result` after it.
    """
    return _PairRun(pairs, config, devices, run_id, jobs, executor or LocalExecutor(), on_result, on_built,
                    on_progress).run()


class _PairRun:
    """One run_pairs call: a build phase feeding a queue that one thread per evaluation device drains."""

    def __init__(self, pairs, config, devices, run_id, jobs, executor, on_result, on_built, on_progress):
        self.pairs, self.config, self.devices, self.run_id = pairs, config, devices, run_id
        self.executor, self.on_result, self.on_built, self.on_progress = executor, on_result, on_built, on_progress
        self.cores = executor.cores()
        self.jobs = max(1, jobs or self.cores)
        self.needs_cuda = [_needs_cuda(solution) for _, solution in pairs]
        self.results: list[Result | None] = [None] * len(pairs)
        self.lock = threading.Lock()
        self.ready: queue.Queue = queue.Queue()
        self.interrupted = False

    def run(self) -> list[Result]:
        self.executor.prime_headers(self.pairs, self.config, self.devices)
        threads = [threading.Thread(target=self.evaluate_on, args=(device,), daemon=True)
                   for device in self.executor.evaluation_devices(self.devices)]
        for thread in threads:
            thread.start()
        try:
            if len(self.pairs) == 1:
                self.ready.put((0, None))  # one candidate: its evaluation builds it, no separate phase
            else:
                self.build_phase()
            for _ in threads:
                self.ready.put(None)
            for thread in threads:
                while thread.is_alive():
                    thread.join(timeout=0.2)  # short joins keep Ctrl-C responsive
        except KeyboardInterrupt:
            self.interrupt()
            raise
        return [result for result in self.results if result is not None]

    def interrupt(self) -> None:
        with self.lock:
            self.interrupted = True  # before the kills: a killed worker's row is not a verdict
        worker_pool().kill_all()

    def record(self, index: int, result: Result) -> None:
        with self.lock:
            if not self.interrupted:
                self.results[index] = result
                self.on_result(result)

    def build_phase(self) -> None:
        to_build, ready_to_evaluate = plan_builds(self.pairs, self.config)
        for index in ready_to_evaluate:
            with self.lock:
                self.on_built(Result.from_fields(problem=self.pairs[index][0].stem,
                                                 solution=str(self.pairs[index][1]), status=Status.BUILT))
            self.ready.put((index, None))
        builders = ThreadPoolExecutor(max_workers=self.executor.start_builds(self.jobs))
        try:
            for future in [builders.submit(self.build, index, rank) for rank, index in enumerate(to_build)]:
                future.result()
        except KeyboardInterrupt:
            self.interrupt()  # the builds' workers die now; their threads then end at once
            raise
        finally:
            builders.shutdown(wait=not self.interrupted, cancel_futures=True)
            self.executor.end_builds()

    def build(self, index: int, rank: int) -> None:
        try:
            built = self.executor.build(self.pairs[index], self.config, self.devices[0], self.run_id,
                                        self.threads_for(index), rank, on_progress=self.watcher(index))
        except PoolClosed:
            return  # interrupted
        self.on_progress(self.pairs[index], None)
        with self.lock:
            if self.interrupted:
                return
            self.on_built(built)
        if built.status == Status.BUILT:
            self.ready.put((index, built))
        else:
            self.record(index, built)

    def watcher(self, index: int) -> Watcher:
        def watch(record: ProgressRecord) -> None:
            if not self.interrupted:  # after Ctrl-C the lines go with the progress display
                self.on_progress(self.pairs[index], record)
        return watch

    def threads_for(self, index: int) -> int:
        share = max(1, self.cores // self.jobs)
        return max(share, CUDA_BUILD_THREADS) if self.needs_cuda[index] else share

    def evaluate_on(self, device: str) -> None:
        while (item := self.ready.get()) is not None:
            index, built = item
            if self.interrupted:
                continue
            try:
                result = self.executor.evaluate(self.pairs[index], self.config, device, self.run_id,
                                                on_progress=self.watcher(index))
            except PoolClosed:
                return  # interrupted
            self.on_progress(self.pairs[index], None)
            if built is not None and built.build_s is not None:
                # Report the build as the build phase saw it, not the cache hit that followed.
                result = result.with_outcome(build_s=built.build_s, build_reused=built.build_reused)
            self.record(index, result)
