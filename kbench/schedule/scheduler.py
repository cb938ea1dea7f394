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

from kbench.extensions import primer
from kbench.config import RunConfig
from kbench.schedule.job import ProgressRecord
from kbench.results import Result, Status
from kbench.schedule.pool import PoolClosed, worker_pool
from kbench.schedule.child import EvaluationOptions, evaluate, needs_build_phase
from kbench.extensions.slots import Compile, SlotServer
from kbench.solution import Solution

Pair = tuple[Path, Path]  # (problem file, solution file)
Watcher = Callable[[ProgressRecord], None]  # sees a running worker's progress


class Executor(Protocol):
    def cores(self) -> int:
        """CPUs the builds share."""

    def evaluation_devices(self, devices: list[str]) -> list[str]:
        """Get ready to evaluate on `devices`; returns the device of each evaluation thread.

        Each thread runs one evaluation at a time: one per GPU here, one per GPU of the cluster on Ray.
        """

    def prime_headers(self, pairs: list[Pair], config: RunConfig, devices: list[str]) -> list[threading.Thread]:
        """Have torch's headers precompiled for the builds of `pairs` on `devices`, where it can (primer.py);
        returns the threads that wait for the primers it started (nobody need wait for them)."""

    def start_builds(self, jobs: int) -> int:
        """Get ready for a run's builds with `jobs` compilers at once; returns how many builds to run at once."""

    def end_builds(self) -> None:
        """The run's builds are over."""

    def build(self, pair: Pair, config: RunConfig, device: str, run_id: str, build_threads: int,
              rank: int = 0, on_progress: Watcher | None = None) -> Result:
        """Import the solution so its extensions build into the cache: status `built` or its failure.

        build_threads caps its compiler processes; rank is its place in the run's build order (0 first),
        for executors that order compilers across builds (LocalExecutor: slots.py). `on_progress`, where
        the executor can, sees the worker's progress while it runs."""

    def evaluate(self, pair: Pair, config: RunConfig, device: str, run_id: str,
                 on_progress: Watcher | None = None) -> Result:
        """Judge the solution on `device`."""


class LocalExecutor:
    """Every build and evaluation in a fresh child process on this machine; builds' compilers share one
    compile slot per job (slots.py), and more builds than slots run at once so that waiting compilers
    are ready when a slot frees."""

    def __init__(self):
        self._slots: SlotServer | None = None
        self.compiles: list[Compile] = []  # the last build phase's compiles (slots.SlotServer.history)

    def prime_headers(self, pairs: list[Pair], config: RunConfig, devices: list[str]) -> list[threading.Thread]:
        """Precompile torch's headers for the default flags of the extensions `pairs` build, C++ and CUDA (on
        GPUs), in a process of kbench's own beside the builds (primer.py): never waited for; a compile that finds
        none compiles without. Once per build cache and flag set."""
        on_gpus = any(device.startswith("cuda") for device in devices)
        solutions = [_read(solution) for _, solution in pairs]
        building = [solution for solution in solutions if solution is not None and solution.builds_extension
                    and (on_gpus or not solution.needs_cuda)]
        started = []
        for cuda, cflags in flag_sets_to_prime(building):
            done = primer.marker(config.cache_dir, cuda, cflags)
            with _PRIMING_LOCK:
                if done.exists() or done in _PRIMING:
                    continue
                _PRIMING.add(done)
            log = config.cache_dir / "logs" / f"primer-{done.name}.log"
            log.parent.mkdir(parents=True, exist_ok=True)

            def run(cuda=cuda, cflags=cflags, done=done, log=log):
                try:
                    worker_pool().run_helper("kbench.extensions.primer",
                                             primer.arguments(config.cache_dir, cuda, cflags), log)
                except PoolClosed:
                    pass  # kbench is exiting
                finally:
                    with _PRIMING_LOCK:
                        _PRIMING.discard(done)
            started.append(threading.Thread(target=run, name="kbench-primer", daemon=True))
            started[-1].start()
        return started

    def start_builds(self, jobs: int) -> int:
        self.end_builds()
        self._slots = SlotServer(slots=jobs, lookahead=max(1, jobs // CUDA_BUILD_THREADS))
        return BUILDS_PER_SLOT * jobs

    def end_builds(self) -> None:
        if self._slots is not None:
            self.compiles = self._slots.history()
            self._slots.close()
            self._slots = None

    def cores(self) -> int:
        """Compilers this machine can run at once: the cores this process may use, fewer when memory would
        not hold that many compilers of torch's headers (COMPILER_MEMORY each)."""
        return compile_capacity(_usable_cores(), _available_memory())

    def evaluation_devices(self, devices: list[str]) -> list[str]:
        for device in devices:  # they warm up while the builds run; the builds need not wait for them
            threading.Thread(target=worker_pool().prestart, args=(device,), daemon=True).start()
        return devices

    def build(self, pair: Pair, config: RunConfig, device: str, run_id: str, build_threads: int,
              rank: int = 0, on_progress: Watcher | None = None) -> Result:
        slots = self._slots
        options = EvaluationOptions(device=device, run_id=run_id, build_only=True, build_threads=build_threads,
                                    build_nice=BUILD_NICE, on_progress=on_progress)
        if slots is None:
            return evaluate(pair[0], pair[1], config, options)
        workers = []

        def registered(pid: int) -> None:  # its compilers are its own in the slots' order, whatever they say
            workers.append(pid)
            slots.register(pid, rank, build_threads)
        # A build that waits for compile slots behind others' compilers is not slow itself: its timeout
        # counts the rest.
        try:
            return evaluate(pair[0], pair[1], config, replace(
                options, slot_environment=slots.environment(), excused_s=lambda: slots.waited_s(rank),
                on_worker_started=registered))
        finally:
            for pid in workers:
                slots.unregister(pid)

    def evaluate(self, pair: Pair, config: RunConfig, device: str, run_id: str,
                 on_progress: Watcher | None = None) -> Result:
        return evaluate(pair[0], pair[1], config, EvaluationOptions(device=device, run_id=run_id,
                                                                    on_progress=on_progress))


# The precompiled headers' primers running in this process (by marker): one per build cache and flag set.
_PRIMING: set[Path] = set()
_PRIMING_LOCK = threading.Lock()


def _read(solution_path: Path) -> Solution | None:
    try:
        return Solution.read(solution_path)
    except OSError:
        return None


# A CUDA extension compiles its host and device sources as two compiler processes.
CUDA_BUILD_THREADS = 2
# Memory one compiler of a candidate's source needs at its peak (torch's headers parsed or precompiled):
# about 1.2 GB for g++ on a bindings file, up to 1.5 GB for nvcc's steps; with room for the evaluations.
COMPILER_MEMORY = 2 << 30


def compile_capacity(cores: int, available_memory: int | None) -> int:
    """At most one compiler per core, and no more than available memory holds (at least one)."""
    if available_memory is None:
        return max(1, cores)
    return max(1, min(cores, available_memory // COMPILER_MEMORY))


def _usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))  # a container or `taskset` may allow fewer than the machine has
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _available_memory() -> int | None:
    """MemAvailable from /proc/meminfo, in bytes; None where there is none (not Linux)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None
# CPU priority of builds (and their compilers), as niceness (Linux: 0 default, 19 lowest): evaluations
# time CPU-side launch work and must not wait behind compilers.
BUILD_NICE = 10
# Flag sets of candidates' own primed per kind (C++, CUDA) in a sweep, besides torch's defaults: each is a
# precompiled header of half a gigabyte and a compile of torch's headers.
PRIMED_FLAG_SETS = 3
# A flag set of candidates' own is primed when at least this many of the run's builds write it: priming costs more
# CPU than one build saves with it (docs/benchmarks.md).
PRIMED_MIN_BUILDS = 2
# Builds in flight per compile slot: a build spends seconds starting (its fork, loading the problem and
# the solution) before its compilers ask for slots, and the slots' order can only favour compilers that
# are already waiting.
BUILDS_PER_SLOT = 2


def flag_sets_to_prime(solutions: list[Solution]) -> list[tuple[bool, list[str]]]:
    """(CUDA or not, extra_cflags) for the primer: torch's defaults for each kind the solutions build, then the
    primable flag sets at least PRIMED_MIN_BUILDS of them write, the most used first, at most PRIMED_FLAG_SETS of
    them per kind."""
    sets: dict[tuple[bool, tuple[str, ...]], int] = {}
    for solution in solutions:
        sets.setdefault((solution.needs_cuda, ()), 0)
        for cflags in solution.declared_cflags:
            flags = primer.primable(cflags)
            if flags:
                key = (solution.needs_cuda, tuple(flags))
                sets[key] = sets.get(key, 0) + 1
    chosen = []
    for cuda in sorted({cuda for cuda, _ in sets}):
        written = [flags for kind, flags in sets if kind == cuda and flags and sets[kind, flags] >= PRIMED_MIN_BUILDS]
        written.sort(key=lambda flags: -sets[cuda, flags])
        chosen += [(cuda, [])] + [(cuda, list(flags)) for flags in written[:PRIMED_FLAG_SETS]]
    return chosen


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
    solution = _read(solution_path)
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
