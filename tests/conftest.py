"""Shared test setup: fixture paths, one build cache per test session, the gpu marker."""

from __future__ import annotations

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


@pytest.fixture(scope="session")
def cpu_config(cache_dir) -> RunConfig:
    """CPU evaluation with a short timing budget: tests check verdicts, not speed."""
    return RunConfig(device="cpu", cache_dir=cache_dir, timeout_s=300, time_budget_s=0.5, min_samples=3)
