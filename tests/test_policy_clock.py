"""Precision policies and the GPU-clock record, with a fake clock reader (no GPU needed)."""

from __future__ import annotations

import json

import pytest
import torch

from kbench import flags, policy, stats
from kbench.judge import guards
from kbench.config import PYTORCH_DEFAULT, STRICT_FP32, RunConfig
from kbench.results import ClockRecord, Outcome, Result, Status
from kbench.judge.timing import ClockLog, ClockReading, HostTimer, Side, StopRule, sample_interleaved
from kbench.verdicts import final_outcome

from conftest import PROBLEMS, SOLUTIONS
from test_cli import FAST, kbench


def test_float32_tolerance_follows_the_policy_and_overrides_still_win():
    assert RunConfig().tolerance_for("float32") == (1e-4, 1e-4)
    assert RunConfig(policy=PYTORCH_DEFAULT).tolerance_for("float32") == (1e-2, 1e-2)
    assert RunConfig(policy=PYTORCH_DEFAULT).tolerance_for("float64") == (1e-7, 1e-7)
    assert RunConfig(policy=PYTORCH_DEFAULT, atol=1e-3, rtol=1e-5).tolerance_for("float32") == (1e-3, 1e-5)
    with pytest.raises(ValueError, match="unknown precision policy"):
        RunConfig(policy="tf32-everywhere")


def test_policies_set_the_settings_they_name():
    try:
        policy.apply_policy(PYTORCH_DEFAULT)
        assert torch.backends.cudnn.allow_tf32 is True
        assert torch.backends.cuda.matmul.allow_tf32 is False
        policy.apply_policy(STRICT_FP32)
        assert torch.backends.cudnn.allow_tf32 is False
        assert torch.get_float32_matmul_precision() == "highest"
    finally:
        policy.apply_policy(STRICT_FP32)


def test_policy_changes_the_settings_fingerprint():
    assert RunConfig().fingerprint("cuda:0") != RunConfig(policy=PYTORCH_DEFAULT).fingerprint("cuda:0")


def test_cli_policy_is_recorded_and_default_speedup_is_reported(tmp_path, cache_dir):
    out = tmp_path / "results.csv"
    completed = kbench("eval", "--problem", PROBLEMS / "axpy.py", SOLUTIONS / "axpy/correct_plain.py",
                       "--policy", "pytorch", "--json", "--out", out, *FAST, cache_dir=cache_dir)
    assert completed.returncode == 0, completed.stderr
    row = json.loads(completed.stdout)[0]
    assert row["policy"] == PYTORCH_DEFAULT
    # On the CPU PyTorch's defaults are the checking settings: the default baseline is the reference.
    assert row["speedup_default"] == row["speedup"] and row["default_median_ms"] == row["ref_median_ms"]
    # No GPU: no clock readings, empty cells rather than made-up numbers.
    assert row["sm_mhz_start"] is None and row["sm_drop"] is None


class SteppingClock:
    """A fake monotonic clock: every reading advances it by `step_s`."""

    def __init__(self, step_s: float):
        self.now, self.step_s = 0.0, step_s

    def __call__(self) -> float:
        self.now += self.step_s
        return self.now


def fake_reader(clocks_mhz: list[float], temperature_c: float = 60.0):
    readings = iter(clocks_mhz)
    return lambda: ClockReading(sm_mhz=next(readings), temperature_c=temperature_c)


def test_clock_log_reads_at_start_between_rounds_no_more_often_than_asked_and_at_end():
    calls = {"count": 0}

    def call():
        calls["count"] += 1

    def reader():  # each reading records how many calls had run when it was taken
        return ClockReading(sm_mhz=float(calls["count"]), temperature_c=60.0)
    log = ClockLog(reader, every_s=0.5, clock=SteppingClock(0.2))
    rule = StopRule(warmup=1, min_samples=10, max_samples=10, target_rse=0.0, budget_s=1e9)
    sample_interleaved([Side(call)], HostTimer(), rule, clock_log=log)
    assert calls["count"] == 11  # warm-up + 10 samples
    taken_after = [reading.sm_mhz for reading in log.readings]
    assert taken_after[0] == 1.0  # at the start: after the warm-up, before the first sample
    assert taken_after[-1] == 11.0  # at the end: after the last sample
    # In between at most one reading per 0.5 s of the fake clock (0.2 s per round).
    assert 2 < len(log.readings) <= 2 + 10 * 0.2 / 0.5 + 1


def test_largest_drop_is_a_fall_from_an_earlier_reading_not_a_rise():
    assert stats.largest_drop([1980, 1980, 1600, 1700]) == pytest.approx((1980 - 1600) / 1980)
    assert stats.largest_drop([1200, 1980]) == 0.0
    assert stats.coefficient_of_variation([1.0, 1.0, 1.0]) == 0.0
    assert stats.coefficient_of_variation([5.0]) is None
    assert stats.coefficient_of_variation([9.0, 11.0]) == pytest.approx(2 ** 0.5 / 10)


def test_throttle_warning_above_ten_percent_only():
    throttled = ClockRecord.from_readings([ClockReading(mhz, 70.0) for mhz in (1980, 1900, 1700, 1710)])
    assert throttled.sm_mhz_start == 1980 and throttled.sm_mhz_min == 1700 and throttled.sm_mhz_end == 1710
    message = guards.throttle_message(throttled)
    assert message and "14%" in message and "1700" in message
    steady = ClockRecord.from_readings([ClockReading(mhz, 70.0) for mhz in (1980, 1800, 1980)])  # 9.1%
    assert guards.throttle_message(steady) is None
    unreadable = ClockRecord.from_readings([ClockReading(None, None)] * 3)
    assert unreadable.sm_drop is None and guards.throttle_message(unreadable) is None


def test_throttle_is_a_warning_that_never_changes_a_verdict_even_under_strict():
    throttled = Outcome(status=Status.CORRECT, flags=(flags.THROTTLED,))
    assert final_outcome(throttled, None, strict=True).status == Status.CORRECT
    noted = Outcome(status=Status.CORRECT, flags=(flags.WEAK_CHECK,))
    assert final_outcome(noted, None, strict=True).status == Status.INCORRECT
    assert final_outcome(noted, None, strict=False).status == Status.CORRECT


def test_clock_record_survives_the_result_round_trip_and_lands_in_the_csv_row():
    clocks = ClockRecord.from_readings([ClockReading(1980.0, 55.0), ClockReading(1700.0, 71.0)])
    result = Result.from_fields(problem="p", solution="s", status=Status.CORRECT, clocks=clocks)
    assert Result.from_dict(json.loads(json.dumps(result.to_dict()))) == result
    row = result.to_row()
    assert row["sm_mhz_start"] == 1980.0 and row["sm_mhz_min"] == 1700.0 and row["temperature_c_end"] == 71.0
