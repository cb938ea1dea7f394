"""Shared test setup: fixture paths, one build cache per test session, the gpu marker."""

from __future__ import annotations

import os
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
    """One build cache for the whole session: each C++ fixture builds once (about 30 s each here)."""
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
    (REPO / "examples" / "problems" / "swish.py", REPO / "examples" / "solutions" / "swish" / "cpp.py"),  # README
]


@pytest.fixture(scope="session")
def cpu_config(cache_dir) -> RunConfig:
    """CPU evaluation with a short timing budget: tests check verdicts, not speed.

    The C++ fixtures are built first, all cores at once (the same build phase `kbench eval` runs).
    """
    from concurrent.futures import ThreadPoolExecutor

    from kbench.scheduler import LocalExecutor

    config = RunConfig(device="cpu", cache_dir=cache_dir, timeout_s=300, time_budget_s=0.5, min_samples=3)
    executor = LocalExecutor()
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        list(pool.map(lambda pair: executor.build(pair, config, "cpu", "", 1), CPP_FIXTURES))
    return config


_judged: dict = {}


def judged(config: RunConfig, solution: Path, problem: Path):
    """Evaluate a fixture once per session and configuration (builds are slow here) and reuse the result."""
    from kbench.runner import evaluate

    key = (solution, problem, config)
    if key not in _judged:
        _judged[key] = evaluate(problem, solution, config)
    return _judged[key]
