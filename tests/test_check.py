"""The output comparison: tolerances, NaN, shapes, dtypes, tuples, and the recorded error numbers."""

import pytest
import torch

from kbench.judge import check
from kbench.judge.check import compare, summarise, within_tolerance
from kbench.config import RunConfig

TOLERANCE = RunConfig().tolerance_for


def test_identical_outputs_pass_with_zero_error():
    reference = torch.rand(4, 5)
    outcome = compare(reference.clone(), reference, TOLERANCE)
    assert outcome.passed and outcome.max_abs_err == 0.0 and outcome.norm_err == 0.0


def test_small_relative_error_outside_float32_tolerance_fails_with_location():
    reference = torch.ones(3, 4)
    candidate = reference.clone()
    candidate[1, 2] += 1e-3
    outcome = compare(candidate, reference, TOLERANCE)
    assert not outcome.passed
    assert "output[1, 2]" in outcome.mismatch and "1 of 12 elements" in outcome.mismatch
    assert abs(outcome.max_abs_err - 1e-3) < 1e-6
    assert abs(outcome.max_rel_err - 1e-3) < 1e-6


def test_error_within_tolerance_passes():
    reference = torch.ones(100)
    outcome = compare(reference + 5e-5, reference, TOLERANCE)
    assert outcome.passed and outcome.max_abs_err > 0


def test_nan_where_reference_is_finite_fails():
    reference = torch.rand(10)
    candidate = reference.clone()
    candidate[7] = float("nan")
    outcome = compare(candidate, reference, TOLERANCE)
    assert not outcome.passed and "non-finite" in outcome.mismatch and "output[7]" in outcome.mismatch


def test_nan_where_reference_is_nan_passes():
    reference = torch.tensor([1.0, float("nan"), float("inf")])
    assert compare(reference.clone(), reference, TOLERANCE).passed


def test_shape_dtype_and_type_mismatches_fail():
    reference = torch.rand(4)
    assert "shape" in compare(torch.rand(5), reference, TOLERANCE).mismatch
    assert "dtype" in compare(reference.double(), reference, TOLERANCE).mismatch
    assert "expected a torch.Tensor" in compare(reference.numpy(), reference, TOLERANCE).mismatch


def test_tuple_outputs_compared_elementwise():
    first, second = torch.rand(3), torch.rand(2)
    assert compare((first.clone(), second.clone()), (first, second), TOLERANCE).passed
    outcome = compare((second, first), (first, second), TOLERANCE)
    assert not outcome.passed and "output 0" in outcome.mismatch
    assert "returned 1 outputs, expected 2" in compare((first,), (first, second), TOLERANCE).mismatch


def test_half_precision_uses_looser_default_and_overrides_win():
    reference = torch.ones(8, dtype=torch.float16)
    assert compare(reference + 0.005, reference, TOLERANCE).passed
    strict = RunConfig(atol=1e-4, rtol=1e-4).tolerance_for
    assert not compare(reference + 0.005, reference, strict).passed


def test_integer_outputs_must_match_exactly():
    reference = torch.arange(6)
    assert compare(reference.clone(), reference, TOLERANCE).passed
    assert not compare(reference + 1, reference, TOLERANCE).passed


def test_summary_counts_trials_and_keeps_first_failure():
    reference = torch.ones(4)
    outcomes = [compare(reference.clone(), reference, TOLERANCE), compare(reference * 2, reference, TOLERANCE),
                compare(reference * 3, reference, TOLERANCE)]
    summary = summarise(outcomes)
    assert (summary.trials_passed, summary.trials_total) == (1, 3)
    assert summary.first_mismatch.startswith("trial 1:")
    assert summary.max_abs_err == 2.0 and not summary.passed


def test_outputs_compared_in_chunks_give_the_same_outcome_as_at_once(monkeypatch):
    """Large outputs are compared a chunk at a time (bounded memory): counts, first position and errors
    must not depend on where the chunks split."""
    import kbench.judge.check

    reference = torch.rand(6, 9) + 0.5
    candidate = reference.clone()
    candidate[2, 3] += 1e-2
    candidate[4, 8] += 3e-2
    candidate[5, 0] = float("inf")
    passing = reference + 5e-5
    at_once = [compare(candidate, reference, TOLERANCE), compare(candidate[:5], reference[:5], TOLERANCE),
               compare(passing, reference, TOLERANCE), kbench.judge.check.error_against(passing, reference.double())]
    monkeypatch.setattr(kbench.judge.check, "COMPARE_CHUNK_ELEMENTS", 7)
    chunked = [compare(candidate, reference, TOLERANCE), compare(candidate[:5], reference[:5], TOLERANCE),
               compare(passing, reference, TOLERANCE), kbench.judge.check.error_against(passing, reference.double())]
    assert "output[5, 0]" in chunked[0].mismatch and "non-finite" in chunked[0].mismatch
    assert "output[2, 3]" in chunked[1].mismatch and "2 of 45 elements" in chunked[1].mismatch
    for whole, parts in zip(at_once[:3], chunked[:3]):
        assert (whole.passed, whole.mismatch, whole.max_abs_err) == (parts.passed, parts.mismatch, parts.max_abs_err)
        assert (whole.max_rel_err, whole.norm_err) == pytest.approx((parts.max_rel_err, parts.norm_err), rel=1e-12)
    assert at_once[3] == pytest.approx(chunked[3], rel=1e-12)


def _near_the_edge(reference: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """A candidate whose errors sit around the tolerance: some inside, some just outside, some at it."""
    atol, rtol = TOLERANCE(str(reference.dtype).removeprefix("torch."))
    bound = atol + rtol * reference.double().abs()
    scale = torch.rand(reference.shape, generator=generator, dtype=torch.float64) * 2.2 - 1.1
    return (reference.double() + scale * bound).to(reference.dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
def test_the_fast_pass_never_passes_what_compare_fails(dtype, monkeypatch):
    """within_tolerance (the timing loop's check) is conservative: whatever it passes, compare passes."""
    monkeypatch.setattr(check, "COMPARE_CHUNK_ELEMENTS", 64)  # several chunks per output
    generator = torch.Generator().manual_seed(0)
    passed = failed = 0
    for trial in range(300):
        reference = (torch.randn(200, generator=generator) * 10 ** (trial % 5 - 2)).to(dtype)
        candidate = _near_the_edge(reference, generator)
        if trial % 7 == 0:
            candidate[trial % 200] = float("nan")
        if trial % 11 == 0:
            reference[3], candidate[3] = float("inf"), float("inf")
        fast = within_tolerance(candidate, reference, TOLERANCE)
        exact = compare(candidate, reference, TOLERANCE).passed
        assert not fast or exact, (trial, dtype)
        passed += fast
        failed += not exact
    close = (torch.randn(1000, generator=generator)).to(dtype)
    assert within_tolerance(close.clone(), close, TOLERANCE)  # an exact match passes fast
    assert failed > 50  # the draws did reach outside the tolerance


def test_the_fast_pass_asks_compare_about_structure():
    reference = torch.rand(4, 5)
    assert not within_tolerance(reference.clone().double(), reference, TOLERANCE)
    assert not within_tolerance(reference.clone().reshape(5, 4), reference, TOLERANCE)
    assert not within_tolerance((reference, reference), reference, TOLERANCE)
    assert not within_tolerance(torch.nn.Parameter(reference.clone()), reference, TOLERANCE)
    assert within_tolerance((reference.clone(), torch.arange(3)), (reference, torch.arange(3)), TOLERANCE)
    assert not within_tolerance((reference.clone(), torch.arange(3)), (reference, torch.arange(3) + 1), TOLERANCE)


def test_a_mismatch_in_a_later_chunk_is_found_and_placed(monkeypatch):
    """The tally stays on the device across chunks: the first mismatch of the whole output is reported."""
    monkeypatch.setattr(check, "COMPARE_CHUNK_ELEMENTS", 100)
    reference = torch.rand(1000)
    candidate = reference.clone()
    candidate[950] += 1
    candidate[420] += 1
    outcome = compare(candidate, reference, TOLERANCE)
    assert not outcome.passed and "output[420]" in outcome.mismatch and "2 of 1000" in outcome.mismatch
    assert abs(outcome.max_abs_err - 1) < 1e-6


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
def test_the_finite_pass_gives_the_full_comparison_s_outcome(dtype, monkeypatch):
    """compare() takes a shorter path where everything is finite and within tolerance: the same outcome, with the
    same error numbers to the bit, as the full comparison; anything else goes the full way."""
    monkeypatch.setattr(check, "COMPARE_CHUNK_ELEMENTS", 64)
    generator = torch.Generator().manual_seed(1)
    outcomes = {True: 0, False: 0}
    for trial in range(300):
        reference = (torch.randn(200, generator=generator) * 10 ** (trial % 5 - 2)).to(dtype)
        # errors well inside the tolerance, and one element's at 0.98 to 1.02 of it
        scale = torch.rand(200, generator=generator, dtype=torch.float64) - 0.5
        scale[trial % 200] = 0.98 + 0.04 * torch.rand((), generator=generator, dtype=torch.float64)
        candidate = (reference.double() + scale * check_bound(reference)).to(dtype)
        if trial % 7 == 0:
            candidate[trial % 200] = float("nan")
        if trial % 11 == 0:
            reference[3], candidate[3] = float("inf"), float("inf")
        short = compare(candidate, reference, TOLERANCE)
        with monkeypatch.context() as full_only:
            full_only.setattr(check, "_finite_and_within", lambda *arguments: None)
            full = compare(candidate, reference, TOLERANCE)
        assert short == full, (trial, dtype, short, full)
        finite = bool(torch.isfinite(candidate).all() and torch.isfinite(reference).all())
        taken = check._finite_and_within(candidate, reference, *TOLERANCE(str(dtype).removeprefix("torch.")))
        assert (taken is not None) == (full.passed and finite), (trial, dtype)
        outcomes[taken is not None] += 1
    assert outcomes[True] > 50 and outcomes[False] > 50  # both ways were taken


def check_bound(reference: torch.Tensor) -> torch.Tensor:
    atol, rtol = TOLERANCE(str(reference.dtype).removeprefix("torch."))
    return atol + rtol * reference.double().abs()


def test_error_against_is_the_largest_relative_norm_error_over_the_floating_outputs():
    truth = torch.tensor([3.0, 4.0], dtype=torch.float64)
    assert check.error_against(torch.tensor([3.0, 4.0]), truth) == 0.0
    assert check.error_against(torch.tensor([3.0, 4.0 + 5.0]), truth) == pytest.approx(1.0)  # ||(0, 5)|| / ||(3, 4)||
    assert check.error_against(torch.tensor([1.0, 0.0]), torch.zeros(2, dtype=torch.float64)) == pytest.approx(1.0)
    # Several outputs: the worst; integer outputs say nothing of precision and are left out.
    outputs = (torch.tensor([3.0, 6.5]), torch.tensor([7, 7]), torch.tensor([3.0, 4.5]))
    truths = (truth, torch.tensor([0, 0]), truth)
    assert check.error_against(outputs, truths) == pytest.approx(2.5 / 5.0)  # the first, not the last
    assert check.error_against(torch.tensor([0.3]), torch.tensor([0.6], dtype=torch.float64)) == pytest.approx(0.5)
    assert check.error_against((torch.tensor([7, 7]),), (torch.tensor([0, 0]),)) is None
    assert check.error_against((torch.tensor([7, 7]), torch.tensor([3.0, 6.5])), (torch.tensor([0, 0]), truth)) == \
        pytest.approx(0.5)  # an integer output first: the floating one after it still counts
    # Not comparable: another shape, or not a tensor.
    assert check.error_against(torch.zeros(3), truth) is None
    assert check.error_against((torch.zeros(2), 1.0), (truth, truth)) is None
    assert check.error_against(torch.zeros(2), truth.unsqueeze(0)) is None
