"""Shared test setup: fixture paths, one build cache per test session, the gpu marker."""

from __future__ import annotations

import fcntl
import os
import re
from pathlib import Path

import pytest
import torch

from kbench.config import RunConfig

FIXTURES = Path(__file__).parent / "fixtures"
PROBLEMS = FIXTURES / "problems"
SOLUTIONS = FIXTURES / "solutions"
REPO = Path(__file__).parent.parent


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


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


@pytest.fixture(scope="session")
def cpu_config(cache_dir) -> RunConfig:
    """CPU evaluation with a short timing budget: tests check verdicts, not speed.

    The C++ fixtures are built first, all cores at once (the same build phase `kbench eval` runs), after
    torch's headers were precompiled for each set of compiler flags they pass (kbench/extensions/primer.py: what
    kbench prepares once per build cache for the default flags; the fixtures are ours, so their flags too).
    """
    import json
    import subprocess
    import sys
    from concurrent.futures import ThreadPoolExecutor

    from kbench.extensions import primer
    from kbench.schedule.scheduler import LocalExecutor

    config = RunConfig(device="cpu", cache_dir=cache_dir, timeout_s=300, time_budget_s=0.5, min_samples=3)
    executor = LocalExecutor()
    flag_sets = sorted({_cflags(solution) for _, solution in CPP_FIXTURES} - {"[]"})  # kbench primes the default

    def prime(flags: str) -> None:
        subprocess.run([sys.executable, "-m", "kbench.extensions.primer",
                        *primer.arguments(cache_dir, False, json.loads(flags))],
                       env=dict(os.environ, PYTHONPATH=str(REPO)), check=True, capture_output=True)
    with (cache_dir / "fixtures.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one xdist worker builds; the others wait, then find the builds there
        if not (cache_dir / "fixtures.built").exists():
            with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
                primers = executor.prime_headers(CPP_FIXTURES, config, ["cpu"])  # as every sweep does
                list(pool.map(prime, flag_sets))
                for thread in primers:
                    thread.join()
                list(pool.map(lambda pair: executor.build(pair, config, "cpu", "", 1), CPP_FIXTURES))
            (cache_dir / "fixtures.built").touch()
    return config


def _cflags(solution: Path) -> str:
    """The extra_cflags a fixture passes, as written (fixtures pass one literal list or none)."""
    found = re.search(r"extra_cflags\s*=\s*(\[[^\]]*\])", solution.read_text())
    return found.group(1).replace("'", '"') if found else "[]"


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

    from kbench.schedule.scheduler import CUDA_BUILD_THREADS, LocalExecutor

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
