"""Persisting L2 before each timed call (timing.PersistingL2): the carve-out is released and
persisting lines are reset, so nothing a candidate marked persisting survives the flush."""

from __future__ import annotations

import ctypes
import statistics
import time
from types import SimpleNamespace

import pytest
import torch

from kbench.judge import timing

from conftest import FIXTURES

CHEATS = FIXTURES / "cheats"


class FakeRuntime:
    """Stands in for the CUDA calls: a persisting limit, a reset counter, an error to return."""

    def __init__(self, limit: int = 0, error: int = 0):
        self.limit, self.error, self.resets, self.cleared = limit, error, 0, 0

    def bind(self, target: timing.PersistingL2) -> timing.PersistingL2:
        target._reset, target._get_limit = self.reset, self.get_limit
        target._set_limit, target._clear_error = self.set_limit, self.clear
        target.note = None
        return target

    def get_limit(self, pointer, which):
        assert which == 0x06
        ctypes.cast(pointer, ctypes.POINTER(ctypes.c_size_t)).contents.value = self.limit
        return 0

    def set_limit(self, which, value):
        self.limit = value
        return 0

    def reset(self):
        self.resets += 1
        return self.error

    def clear(self):
        self.cleared += 1


def test_release_zeroes_a_carve_out_then_resets_lines():
    runtime = FakeRuntime(limit=30 << 20)
    persisting = runtime.bind(timing.PersistingL2())
    persisting.release()
    assert runtime.limit == 0 and runtime.resets == 1
    persisting.release()  # nothing set aside: only the reset
    assert runtime.resets == 2


def test_a_failing_call_disables_it_with_a_note_and_clears_the_error():
    runtime = FakeRuntime(error=801)
    persisting = runtime.bind(timing.PersistingL2())
    persisting.release()
    assert runtime.cleared == 1 and "801" in persisting.note
    persisting.release()
    assert runtime.resets == 1  # not called again


def test_without_cuda_it_is_a_note_not_an_error():
    if torch.cuda.is_available():
        pytest.skip("has a CUDA device")
    persisting = timing.PersistingL2()
    assert persisting.note and "not reset" in persisting.note
    persisting.release()


def test_loaded_library_finds_what_this_process_loaded():
    assert timing.loaded_library("libc") is not None
    assert timing.loaded_library("libnothing_of_the_kind") is None


def test_flush_releases_persisting_l2_except_inside_a_graph_capture():
    calls = []
    timer = timing.CudaEventTimer.__new__(timing.CudaEventTimer)
    timer.persisting_l2 = SimpleNamespace(release=lambda: calls.append("release"))
    timer.flush_buffer = SimpleNamespace(zero_=lambda: calls.append("flush"))
    timer._capturing = lambda: False
    timer.flush()
    assert calls == ["release", "flush"]
    calls.clear()
    timer._capturing = lambda: True
    timer.flush()
    assert calls == ["flush"]


# --- on a GPU ----------------------------------------------------------------------------------


def _limit(persisting: timing.PersistingL2) -> int:
    value = ctypes.c_size_t(0)
    assert persisting._get_limit(ctypes.byref(value), 0x06) == 0
    return value.value


@pytest.mark.gpu
def test_release_on_the_device_and_what_it_costs():
    torch.zeros(1, device="cuda")
    persisting = timing.PersistingL2()
    assert persisting.note is None, persisting.note
    properties = torch.cuda.get_device_properties(0)
    # Not every torch exposes the largest carve-out; half the L2 is within it on every GPU that has one.
    carve_out = getattr(properties, "persistingL2CacheMaxSize", properties.L2_cache_size // 2)
    costs = {}
    for label, limit in (("limit already 0", 0), ("limit set", carve_out)):
        samples = []
        for _ in range(200):
            if limit:
                assert persisting._set_limit(0x06, limit) == 0
            start = time.perf_counter()
            persisting.release()
            samples.append((time.perf_counter() - start) * 1e6)
            assert _limit(persisting) == 0 and persisting.note is None
        costs[label] = statistics.median(samples)
    print(f"release() host cost, median us: {costs} (carve-out max {carve_out >> 20} MiB)")
    assert costs["limit already 0"] < 1000


@pytest.mark.gpu
def test_persisting_lines_do_not_survive_the_flush():
    """l2_persist_cuda marks its input persisting; with the release its kernel is as slow as the
    same kernel without the trick, from a cold L2. Without it, the trick may pay (printed)."""
    from kbench.problem import load_module

    solution = load_module(CHEATS / "l2_persist_cuda.py", "kbench_solution")
    problem = load_module(CHEATS / "problems" / "row_sum.py", "kbench_problem")
    model, device = solution.ModelNew(), torch.device("cuda")
    with torch.device(device):
        sources = [problem.get_inputs()[0] for _ in range(3)]
    buffer = sources[0].clone()

    def median_ms(timer, trick: bool) -> float:
        solution.persist = trick
        samples = []
        for index in range(80):
            buffer.copy_(sources[index % 3])  # the harness's load: same buffer, same stream
            elapsed, _, _ = timer.measure(lambda: model(buffer))
            samples.append(elapsed)
        return statistics.median(samples[10:])

    released, kept = timing.CudaEventTimer(device), timing.CudaEventTimer(device, release_persisting_l2=False)
    try:
        honest = median_ms(released, False)
        trick_kept = median_ms(kept, True)
        trick_released = median_ms(released, True)
    finally:
        released.persisting_l2.release()
    print(f"row_sum: honest {honest:.4f} ms, trick without release {trick_kept:.4f} ms, "
          f"trick with release {trick_released:.4f} ms, bytes marked {model.covered}")
    assert trick_released >= 0.9 * honest
