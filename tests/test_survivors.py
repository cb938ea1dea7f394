"""Behaviours that were once changed on purpose while every test still passed (issue 53): each test here fails
when the behaviour it names is broken. Each one was checked by breaking the code it guards. (The negative `timed_ms` of the wire is gone with the field: the runner claims no time.)"""

from __future__ import annotations

import os
import socket
import uuid
from pathlib import Path

import pytest

from kbench.config import RunConfig
from kbench.results import Status
from kbench.schedule.child import evaluate
from kbench.schedule.sweep import select_pairs

from conftest import PROBLEMS, SOLUTIONS

AXPY = PROBLEMS / "axpy.py"


@pytest.fixture(scope="module")
def config(cache_dir) -> RunConfig:
    """Pure-Python candidates only: no C++ fixture build to wait for (conftest's cpu_config does)."""
    return RunConfig(device="cpu", cache_dir=cache_dir, timeout_s=120, time_budget_s=0.2, min_samples=3, sweep=0)


# (1) kbench/runner/limits.py: confine() puts a runner run as root in a network namespace of its own.

NETWORK_PROBE = '''"""Says what network it sees, then fails to load (it never defines ModelNew)."""
import socket
found = []
with open("/proc/net/dev") as table:
    found.append("interfaces:" + ",".join(sorted(line.split(":")[0].strip() for line in table.readlines()[2:])))
probe = socket.socket()
probe.settimeout(5)
try:
    probe.connect(("127.0.0.1", {port}))
    found.append("judge-port:reached")
except OSError as error:
    found.append(f"judge-port:unreachable({{error.errno}})")
raise RuntimeError(" ".join(found))
'''


@pytest.mark.skipif(os.geteuid() != 0, reason="a network namespace of its own needs root (limits.confine)")
def test_a_root_runner_reaches_no_port_the_judge_s_host_listens_on(config, tmp_path):
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        socket.create_connection(("127.0.0.1", port), timeout=5).close()  # the port answers outside the runner
        candidate = tmp_path / "axpy.py"
        candidate.write_text(NETWORK_PROBE.format(port=port))
        result = evaluate(AXPY, candidate, config)
    assert result.status == Status.LOAD_ERROR, (result.status, result.message)
    assert "judge-port:unreachable" in result.message, result.message
    assert "interfaces:lo " in result.message + " ", result.message  # a fresh namespace: its own loopback alone


# (2) kbench/runner/wire.py: a runner's own clock cannot claim a negative (or not-a-number) time.

# (3) kbench/schedule/sweep.py: --only-failed reruns the pairs whose latest row is not correct, and only those.

def test_only_failed_skips_pairs_without_a_row(tmp_path):
    problems, solutions = tmp_path / "problems", tmp_path / "solutions"
    problems.mkdir()
    (problems / "axpy.py").write_text(AXPY.read_text())
    (solutions / "axpy").mkdir(parents=True)
    for name in ("failed.py", "fixed.py", "passed.py", "never_run.py"):
        (solutions / "axpy" / name).write_text((SOLUTIONS / "axpy" / "correct_plain.py").read_text())
    rows = [("failed.py", "incorrect"), ("fixed.py", "crashed"), ("fixed.py", "correct"), ("passed.py", "correct")]
    out = tmp_path / "results.csv"
    out.write_text("problem,solution,status\n" + "".join(f"axpy,{solutions / 'axpy' / name},{status}\n"
                                                         for name, status in rows))
    pairs, unpaired, skipped = select_pairs(problems, solutions, (), out, None, RunConfig(device="cpu"), "cpu")
    assert [solution.name for _, solution in pairs] == ["failed.py"]
    assert not unpaired and skipped == 0


# (4) kbench/judge/evaluation.py: the reference's runner dying after the candidate ran is no crash of the candidate.

DYING_REFERENCE = '''"""axpy whose reference's runner kills itself at its first call once the candidate's module has run."""
import os
import signal
import torch
import torch.nn as nn

MARKER = {marker!r}
RUNNER_SCRATCH = "kbench-scratch-"  # a runner's TMPDIR (judge/remote_process.py)


class Model(nn.Module):
    def __init__(self, alpha: float):
        super().__init__()
        self.alpha = alpha

    def forward(self, x, y):
        if os.path.exists(MARKER) and RUNNER_SCRATCH in os.environ.get("TMPDIR", ""):  # not the judge's own call
            os.kill(os.getpid(), signal.SIGKILL)
        return self.alpha * x + y


def get_inputs():
    return [torch.rand(4096), torch.rand(4096)]


def get_init_inputs():
    return [0.5]
'''

MARKING_CANDIDATE = '''"""An honest axpy that leaves a marker (in /dev/shm, which its runner may write) when its module runs."""
import torch
import torch.nn as nn

open({marker!r}, "w").close()


class ModelNew(nn.Module):
    def __init__(self, alpha: float):
        super().__init__()
        self.alpha = alpha

    def forward(self, x, y):
        return torch.add(y, x, alpha=self.alpha)
'''


def test_the_reference_s_runner_dying_after_the_candidate_ran_is_an_infrastructure_error(config, tmp_path):
    """The reference's runner is killed in the timing phase, after the candidate's module ran."""
    marker = f"/dev/shm/kbench-survivor-{uuid.uuid4().hex}"
    problem, candidate = tmp_path / "problems" / "axpy_dying.py", tmp_path / "axpy_dying.py"
    problem.parent.mkdir()
    problem.write_text(DYING_REFERENCE.format(marker=marker))
    candidate.write_text(MARKING_CANDIDATE.format(marker=marker))
    try:
        result = evaluate(problem, candidate, config)
    finally:
        Path(marker).unlink(missing_ok=True)
    assert result.status == Status.INFRA_ERROR, (result.status, result.message)
    assert "SIGKILL" in result.message, result.message
