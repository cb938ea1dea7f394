"""On a CUDA device: Triton candidates compile and run in their confined runner (its Triton cache stores a kernel
by a rename across folders, which Landlock allows only where a rule grants REFER: kbench/runner/limits.py), and
are judged on what they compute. Fixtures: tests/fixtures/gpu/README.md.

Run on the GPU machine: python3 -m pytest -m gpu tests/test_gpu_triton.py
"""

from __future__ import annotations

import pytest

from kbench import flags
from kbench.config import RunConfig
from kbench.results import Status
from kbench.schedule.child import evaluate

from conftest import FIXTURES

pytestmark = pytest.mark.gpu

GPU = FIXTURES / "gpu"
SCALED_ADD = GPU / "problems" / "scaled_add.py"


@pytest.fixture(scope="module")
def config(tmp_path_factory) -> RunConfig:
    pytest.importorskip("triton")
    return RunConfig(device="cuda", cache_dir=tmp_path_factory.mktemp("triton-cache"), time_budget_s=2.0, sweep=0)


@pytest.mark.parametrize("solution, status", [
    ("triton_plain.py", Status.CORRECT),
    ("triton_autotuned.py", Status.CORRECT),
    ("triton_wrong.py", Status.INCORRECT),
])
def test_triton_candidates_run_in_the_confined_runner_and_are_judged_on_their_outputs(config, solution, status):
    result = evaluate(SCALED_ADD, GPU / solution, config)
    assert result.status == status, (result.status, result.message)
    assert not set(result.flags) & set(flags.REJECTING), (result.flags, result.message)


def test_a_gpu_evaluation_leaves_nothing_in_the_machine_s_dev_shm(config):
    """CUDA's driver makes cuda.shm.* files in /dev/shm (the judge's and its runners', for CUDA IPC), and a killed
    runner never removes its own: as root they are made in the judge's own /dev/shm, which goes with it."""
    from pathlib import Path

    from kbench.runner import limits
    if not limits.private_shm_possible():
        pytest.skip("a judge here keeps the machine's /dev/shm (not root, CUDA MPS, or KBENCH_RUNNER_SHM=shared)")
    before = set(Path("/dev/shm").iterdir())
    result = evaluate(SCALED_ADD, GPU / "triton_plain.py", config)
    assert result.status == Status.CORRECT, (result.status, result.message)
    left = [path.name for path in set(Path("/dev/shm").iterdir()) - before]
    assert not left, left
