"""kbench from Python (kbench/api.py): source strings and paths, a warm judge that streams a batch's results as
they finish and leaves no process behind, KernelBench's entry point, results read back as typed DataFrames."""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pytest

import kbench
from kbench.config import RunConfig
from kbench.results import Status

from conftest import PROBLEMS, SOLUTIONS

AXPY = PROBLEMS / "axpy.py"
KERNELBENCH = Path(__file__).resolve().parents[2] / "shared" / "kernelbench"

PLAIN = '''
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, alpha):
        super().__init__()
        self.alpha = alpha

    def forward(self, x, y):
        return x.mul(self.alpha).add_(y)
'''
CRASH = PLAIN.replace("return x.mul", "import os, signal\n        os.kill(os.getpid(), signal.SIGSEGV)\n"
                                      "        return x.mul")
HANG = PLAIN.replace("return x.mul", "while True:\n            pass\n        return x.mul")


def quick(tmp_path, **overrides) -> RunConfig:
    settings = dict(device="cpu", cache_dir=tmp_path / "cache", timeout_s=60, time_budget_s=0.2, min_samples=3,
                    sweep=1, trials=2)
    return RunConfig(**{**settings, **overrides})


def descendants(pid: int) -> set[int]:
    """Every living process below `pid`, from /proc."""
    parents = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[0] != "Z":
                parents[int(entry.name)] = int(fields[1])
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def alive(pids: set[int]) -> set[int]:
    living = set()
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            living.add(pid)
    return living


def alive_after_a_moment(pids: set[int]) -> set[int]:
    """A process SIGKILLed in uninterruptible sleep (disk I/O on a busy machine) dies when the I/O ends."""
    deadline = time.monotonic() + 5
    while alive(pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    return alive(pids)


def test_source_strings_and_paths_judge_alike(tmp_path):
    with kbench.Judge(quick(tmp_path)) as judge:
        from_text = judge.judge(AXPY.read_text(), PLAIN)
        from_paths = judge.judge(AXPY, SOLUTIONS / "axpy" / "correct_plain.py")
    assert from_text.status == from_paths.status == Status.CORRECT, (from_text.message, from_paths.message)
    assert from_text.speedup and from_paths.speedup


def test_a_batch_streams_in_completion_order_and_no_process_outlives_the_judge(tmp_path):
    config = quick(tmp_path, timeout_s=10)
    seen: set[int] = set()
    order, recorded = [], []
    # Two evaluations at a time: the hang takes one slot until its time limit, the others pass it in the second.
    with kbench.Judge(config, devices=["cpu", "cpu"], out=tmp_path / "results.csv") as judge:
        for result in judge.stream([(AXPY, HANG), (AXPY, CRASH), (AXPY, PLAIN)]):
            seen |= descendants(os.getpid())
            order.append(result.status)
            recorded.append(result.time)
    assert sorted(order) == sorted([Status.TIMEOUT, Status.CRASHED, Status.CORRECT]), order
    assert order[-1] == Status.TIMEOUT and recorded == sorted(recorded)  # as they finished, not as given
    assert seen and not alive_after_a_moment(seen), alive(seen)
    frame = kbench.read_results(tmp_path / "results.csv")
    assert sorted(frame["status"]) == sorted(order)
    correct = frame[frame["status"] == Status.CORRECT].iloc[0]
    assert isinstance(correct["flags"], list)
    assert isinstance(correct["cand_samples_ms"], np.ndarray) and len(correct["cand_samples_ms"]) >= 3
    assert frame["speedup"].dtype.kind == "f"


def test_leaving_mid_batch_on_an_exception_ends_every_process(tmp_path):
    seen: set[int] = set()

    def raise_while_hanging(judge):
        for result in judge.stream([(AXPY, PLAIN), (AXPY, HANG)]):
            seen.update(descendants(os.getpid()))
            raise KeyError(result.status)  # the caller fails while the hang still runs

    with pytest.raises(KeyError):
        with kbench.Judge(quick(tmp_path, timeout_s=120)) as judge:
            raise_while_hanging(judge)
    assert seen and not alive_after_a_moment(seen), alive(seen)


@pytest.mark.skipif(not KERNELBENCH.is_dir(), reason="needs ../shared/kernelbench")
def test_kernelbench_entry_point_on_a_kernelbench_problem(tmp_path):
    reference = (KERNELBENCH / "level1" / "19_ReLU.py").read_text()
    candidate = "import torch\n\nclass ModelNew(Model):\n    def forward(self, x):\n        return x.clamp_min(0)\n"
    result = kbench.eval_kernel_against_ref(reference, candidate, num_correct_trials=2, measure_performance=True,
                                            build_dir=tmp_path / "cache")
    assert result.compiled and result.correctness, result.metadata
    assert result.runtime > 0 and result.ref_runtime > 0 and result.runtime_stats["num_trials"] >= 3
    wrong = kbench.eval_kernel_against_ref(reference, candidate.replace("clamp_min(0)", "clamp_min(0.25)"),
                                           build_dir=tmp_path / "cache")
    assert wrong.compiled and not wrong.correctness and wrong.runtime == -1.0
    broken = kbench.eval_kernel_against_ref(reference, "class ModelNew(:\n", build_dir=tmp_path / "cache")
    assert not broken.compiled and broken.metadata["kbench_status"] == Status.LOAD_ERROR
