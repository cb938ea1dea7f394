"""Shared test setup: fixture paths, one build cache per test session, the gpu marker."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

import pytest
import torch

from kbench.config import RunConfig
from kbench.processes import alive, kill_session

FIXTURES = Path(__file__).parent / "fixtures"
PROBLEMS = FIXTURES / "problems"
SOLUTIONS = FIXTURES / "solutions"
REPO = Path(__file__).parent.parent


def pytest_collection_modifyitems(config, items):
    if not torch.cuda.is_available():
        skip = pytest.mark.skip(reason="needs a CUDA device")
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(skip)
    # Modules that judge no C++ fixture first: they run while the fixtures build (cpp_fixture_builds); those
    # marked quiet_cpu (they measure CPU time) after the builds, with the rest.
    later = {item.nodeid.split("::")[0] for item in items
             if "cpu_config" in getattr(item, "fixturenames", ()) or item.get_closest_marker("quiet_cpu")}
    order = {id(item): index for index, item in enumerate(items)}
    items.sort(key=lambda item: (item.nodeid.split("::")[0] in later, order[id(item)]))


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory) -> Path:
    """One build cache for the whole session, shared by pytest-xdist's workers: each C++ fixture builds once."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = tmp_path_factory.getbasetemp().parent / "kbench-cache"  # the run's folder, above each worker's
        shared.mkdir(exist_ok=True)
        return shared
    return tmp_path_factory.mktemp("kbench-cache")


# Every C++ fixture, built once per session, in parallel, before the tests that judge them.
CPP_FIXTURES = [
    (PROBLEMS / "axpy.py", SOLUTIONS / "axpy" / name) for name in (
        "correct.py", "slightly_wrong.py", "nan_output.py", "build_error.py", "runtime_error.py", "segfault.py",
        "infinite_loop.py", "mutates_input.py", "hardcoded_size.py")
] + [
    (PROBLEMS / "linear.py", SOLUTIONS / "linear" / "correct.py"),
    (FIXTURES / "cheats" / "problems" / "convt1d_small.py", FIXTURES / "cheats" / "honest_cpp.py"),
    (FIXTURES / "cheats" / "problems" / "convt1d_small.py", FIXTURES / "cheats" / "fallback_op.py"),
    (FIXTURES / "cheats" / "problems" / "convt1d_small.py", FIXTURES / "cheats" / "memo_contents_cpp.py"),
    (REPO / "examples" / "problems" / "swish.py", REPO / "examples" / "solutions" / "swish" / "cpp.py"),  # README
]
# Their builds' niceness: the tests that run beside them (timed evaluations among them) come first.
FIXTURE_BUILD_NICE = 10


def _cpu_config(cache_dir: Path) -> RunConfig:
    return RunConfig(device="cpu", cache_dir=cache_dir, timeout_s=300, time_budget_s=0.5, min_samples=3)


def build_cpp_fixtures(cache_dir: str) -> None:
    """Build every C++ fixture into `cache_dir`, all cores at once (the same build phase `kbench eval` runs),
    those whose flags a primer precompiles torch's headers for (kbench/extensions/primer.py, as a sweep primes its
    candidates' flags) once it has, the others while it does. Run in a process of its own (cpp_fixture_builds)."""
    from concurrent.futures import ThreadPoolExecutor

    from kbench.extensions.primer import primable
    from kbench.schedule.executor import LocalExecutor, flag_sets_to_prime
    from kbench.solution import Solution

    config = _cpu_config(Path(cache_dir))
    executor = LocalExecutor()
    primers = executor.prime_headers(CPP_FIXTURES, config, ["cpu"])  # as every sweep does
    primed = [flags for _, flags in flag_sets_to_prime([Solution.read(path) for _, path in CPP_FIXTURES])]
    unprimed = [pair for pair in CPP_FIXTURES
                if not any(primable(flags) in primed for flags in Solution.read(pair[1]).declared_cflags or [[]])]
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        build = lambda pair: executor.build(pair, config, "cpu", "", 1)  # noqa: E731
        early = [pool.submit(build, pair) for pair in unprimed]  # no primer to wait for: beside it
        for thread in primers:
            thread.join()
        list(pool.map(build, [pair for pair in CPP_FIXTURES if pair not in unprimed]))
        for future in early:
            future.result()


class FixtureBuilds:
    """The process building the C++ fixtures (build_cpp_fixtures), at a lower priority than the tests, and not
    a descendant of pytest's (tests count the processes a judge leaves behind among pytest's descendants)."""

    def __init__(self, cache_dir: Path):
        self.cache_dir = cache_dir
        self.log = cache_dir / "fixture-builds.log"
        self.status = cache_dir / "fixture-builds.status"   # its exit code, written as it ends
        self.pid_file = cache_dir / "fixture-builds.pid"
        self.started_marker = cache_dir / "fixture-builds.started"  # one build per cache, whoever starts it
        self.started = False

    def start(self) -> None:
        import subprocess
        import sys

        if self.started or (self.cache_dir / "fixtures.built").exists():
            return
        try:
            os.close(os.open(self.started_marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return  # another process of this run started it (pytest-xdist's controller): wait() waits for it
        code = (f"import os, sys, traceback\n"
                f"if os.fork(): os._exit(0)\n"  # detached: init (or a subreaper) is its parent
                f"os.setsid(); os.nice({FIXTURE_BUILD_NICE})\n"
                f"open({str(self.pid_file)!r}, 'w').write(str(os.getpid()))\n"
                f"status = 1\n"
                f"try:\n"
                f"    import conftest; conftest.build_cpp_fixtures({str(self.cache_dir)!r}); status = 0\n"
                f"except BaseException:\n"
                f"    traceback.print_exc()\n"
                f"sys.stdout.flush(); sys.stderr.flush()\n"
                f"open({str(self.status) + '.new'!r}, 'w').write(str(status))\n"
                f"os.replace({str(self.status) + '.new'!r}, {str(self.status)!r})\n"  # whole, once seen
                f"os._exit(status)\n")
        path = os.pathsep.join([str(REPO), str(Path(__file__).parent)])
        with self.log.open("ab") as log:
            subprocess.run([sys.executable, "-c", code], stdout=log, stderr=subprocess.STDOUT, check=True,
                           env=dict(os.environ, PYTHONPATH=path))
        self.started = True

    def stop(self) -> None:
        """A session that ends first (Ctrl-C, -x) leaves no build running."""
        if self.started and not self.status.exists() and self.pid_file.exists():
            kill_session(int(self.pid_file.read_text()))

    def wait(self) -> None:
        """Until the fixtures are built; pytest-xdist's workers share one cache, and one of them builds."""
        import time

        with (self.cache_dir / "fixtures.lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if (self.cache_dir / "fixtures.built").exists():
                return
            self.start()
            while not self.status.exists():
                if self.pid_file.exists() and not alive(int(self.pid_file.read_text())) \
                        and not self.status.exists():
                    raise RuntimeError(f"the C++ fixtures' build process died: {self.log}")
                time.sleep(0.2)
            if self.status.read_text() != "0":
                raise RuntimeError(f"building the C++ fixtures failed: {self.log}\n{self.log.read_text()[-3000:]}")
            (self.cache_dir / "fixtures.built").touch()


def pytest_sessionstart(session):
    """Under pytest-xdist its controller, which runs no test, starts the C++ fixtures' builds in the cache its
    workers share (cache_dir) with the session: else they start when a worker first needs them, and every
    worker that needs them waits for the whole build. Not for a run of the GPU tests alone."""
    config = session.config
    markers = config.option.markexpr or ""
    if os.environ.get("PYTEST_XDIST_WORKER") or not getattr(config.option, "numprocesses", None) or (
            "gpu" in markers and "not gpu" not in markers):
        return
    shared = config._tmp_path_factory.getbasetemp() / "kbench-cache"  # the workers' basetemp is below it
    shared.mkdir(exist_ok=True)
    config.stash[_CONTROLLER_BUILDS] = builds = FixtureBuilds(shared)
    builds.start()


def pytest_sessionfinish(session):
    """A run that ends first (Ctrl-C, -x) leaves no build of the controller's running."""
    builds = session.config.stash.get(_CONTROLLER_BUILDS, None)
    if builds is not None:
        builds.stop()


_CONTROLLER_BUILDS = pytest.StashKey[FixtureBuilds]()


@pytest.fixture(scope="session", autouse=True)
def cpp_fixture_builds(cache_dir, request) -> FixtureBuilds:
    """Starts building the C++ fixtures with the session when any test selected needs them: the modules that
    need none run first, beside the builds (pytest_collection_modifyitems); cpu_config waits for them."""
    builds = FixtureBuilds(cache_dir)
    if not os.environ.get("PYTEST_XDIST_WORKER") and any(
            "cpu_config" in getattr(item, "fixturenames", ()) for item in request.session.items):
        builds.start()
    request.addfinalizer(builds.stop)
    return builds


@pytest.fixture(scope="session")
def cpu_config(cache_dir, cpp_fixture_builds) -> RunConfig:
    """CPU evaluation with a short timing budget: tests check verdicts, not speed. The C++ fixtures are built
    by then (build_cpp_fixtures)."""
    cpp_fixture_builds.wait()
    return _cpu_config(cache_dir)


def sharing_precompiled_headers(cache: Path, session_cache: Path) -> Path:
    """`cache` (a new, empty build cache) with the session's precompiled torch headers: what kbench prepares
    once per torch version and flag set, not what a test about builds is about."""
    from kbench.extensions.cache import versions_tag

    (cache / "pch").mkdir(parents=True, exist_ok=True)
    (cache / "pch" / versions_tag()).symlink_to(session_cache / "pch" / versions_tag(), target_is_directory=True)
    return cache


def cuda_fixtures() -> list[Path]:
    """Every test fixture that builds a CUDA extension."""
    from kbench.solution import Solution

    solutions = (Solution.read(path) for path in sorted(FIXTURES.rglob("*.py")))
    return [solution.path for solution in solutions
            if solution.builds_extension and solution.needs_cuda and "class ModelNew" in solution.source]


@pytest.fixture(scope="session")
def gpu_cache_dir(tmp_path_factory) -> Path:
    """The GPU tests' build cache, with every CUDA fixture built first, all cores at once (a CUDA build
    takes about a minute: one after another, inside the tests, they would take most of the suite's time).
    KBENCH_CACHE_DIR, when set, is used instead, so a later `kbench eval` reuses the builds."""
    from concurrent.futures import ThreadPoolExecutor

    from kbench.schedule.executor import CUDA_BUILD_THREADS, LocalExecutor

    cache_dir = Path(os.environ.get("KBENCH_CACHE_DIR") or tmp_path_factory.mktemp("gpu-cache"))
    config = RunConfig(device="cuda", cache_dir=cache_dir, timeout_s=900)
    executor = LocalExecutor()
    workers = max(1, (os.cpu_count() or 1) // CUDA_BUILD_THREADS)
    # Building imports the solution only: any problem will do.
    pairs = [(PROBLEMS / "axpy.py", solution) for solution in cuda_fixtures()]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(lambda pair: executor.build(pair, config, "cuda:0", "", CUDA_BUILD_THREADS), pairs))
    return cache_dir


_judged: dict = {}


def judged(config: RunConfig, solution: Path, problem: Path):
    """Evaluate a fixture once per session and configuration (builds are slow here) and reuse the result."""
    from kbench.schedule.child import evaluate

    key = (solution, problem, config)
    if key not in _judged:
        _judged[key] = evaluate(problem, solution, config)
    return _judged[key]
