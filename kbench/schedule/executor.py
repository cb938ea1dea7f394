"""Where builds and evaluations run: the Executor interface the scheduler drives, and LocalExecutor, which runs each
in a child process on this machine (its builds' compilers queued for compile slots: slots.py), with what it sizes
a run's builds by (cores, memory) and the precompiled headers it primes for them."""

from __future__ import annotations

import os
import threading
from dataclasses import replace
from pathlib import Path
from typing import Callable, Protocol

from kbench.config import RunConfig
from kbench.extensions import primer
from kbench.extensions.slots import Compile, SlotServer
from kbench.results import Result
from kbench.schedule.child import EvaluationOptions, evaluate
from kbench.schedule.job import ProgressRecord
from kbench.schedule.pool import PoolClosed, worker_pool
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
        solutions = [read_solution(solution) for _, solution in pairs]
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


def read_solution(solution_path: Path) -> Solution | None:
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
