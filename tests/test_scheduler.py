"""How the scheduler shares the cores among builds (no child processes: pure bookkeeping)."""

from __future__ import annotations

import threading
import time

from kbench.scheduler import CoreBudget, build_order

from conftest import PROBLEMS, REPO, SOLUTIONS


def test_a_build_waits_until_its_cores_are_free():
    budget = CoreBudget(3)
    budget.acquire(2)
    started = threading.Event()

    def second_build():
        budget.acquire(2)  # only one core is free: must wait
        started.set()
    thread = threading.Thread(target=second_build, daemon=True)
    thread.start()
    time.sleep(0.2)
    assert not started.is_set()
    budget.release(2)
    assert started.wait(timeout=5)
    assert budget.free == 1


def test_cuda_builds_are_started_first():
    cpp = (PROBLEMS / "axpy.py", SOLUTIONS / "axpy" / "correct.py")
    cuda = (REPO / "problems" / "convt1d.py", REPO / "solutions" / "convt1d.py")
    assert build_order([cpp, cuda, cpp]) == [1, 0, 2]
