"""Correctness trials: the candidate against the reference on fresh seeded inputs, with the checks that
need the trials' outputs (input mutation, output types, weak check, low precision, the reference's ops)."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

from kbench import check, flags, guards
from kbench.kernels import library_only_message
from kbench.loading import call, call_reference, clone, tensor_bytes
from kbench.progress import Context, Stop
from kbench.results import CheckResult, Status
from kbench.truth import NoTruth, Verdict, float64_truth, judge_by_truth, largest_error


@dataclass(frozen=True)
class TrialsResult:
    check: CheckResult
    output_bytes: int          # largest reference output (how many timed outputs can be checked)


def run_trials(reference_model, candidate_model, make_inputs, context: Context) -> TrialsResult:
    """Every trial, or a Stop: incorrect at the first set of trials that does not pass, rejected on a flag."""
    config, device = context.config, context.device
    outcomes, truth_verdicts, output_bytes = [], [], 0
    for trial in range(config.trials):
        inputs = make_inputs(config.seed + trial)
        candidate_inputs = clone(inputs)
        # The candidate first: while it runs, no reference output for its inputs exists (the reference
        # already ran at these sizes before the candidate was imported: evaluation.py).
        candidate_output = call(candidate_model, candidate_inputs, device, Status.RUNTIME_ERROR)
        # Before the reference runs: a change the candidate's call made to it that undoes itself when the
        # reference is called (returning the candidate's answer, say) is still there.
        context.checkpoint("calling ModelNew")
        reference_output = call_reference(reference_model, inputs, device)
        guard_output(context, candidate_output)
        output_bytes = max(output_bytes, tensor_bytes(reference_output))
        if guards.inputs_mutated(inputs, candidate_inputs):
            context.findings.flag(flags.MUTATED_INPUTS, "forward changed its input tensors in place")
        context.findings.raise_if_rejected()
        outcome = check.compare(candidate_output, reference_output, config.tolerance_for)
        if not outcome.passed and all(earlier.passed for earlier in outcomes):
            verdict = ask_truth(reference_model, inputs, candidate_output, reference_output, context)
            if verdict is not None and verdict.candidate_passed:
                truth_verdicts.append(verdict)
                outcome = replace(outcome, passed=True, mismatch=None)
        outcomes.append(outcome)
        context.check = _summary(outcomes, truth_verdicts)
        if trial == 0 and outcome.passed and config.guards:
            _note_weak_check(reference_output, context)
            if guards.low_precision_possible(outcome.norm_err):
                _note_low_precision(reference_model, inputs, reference_output, candidate_output, context)
        guards.poison(reference_output)  # freed reference memory must not hold the answer for the next call
        del candidate_output, reference_output
    if not context.check.passed:  # with the notes: that no float64 truth could decide, say
        raise Stop(Status.INCORRECT, "; ".join([context.check.first_mismatch or "outputs differ",
                                                *context.findings.notes]))
    if truth_verdicts:
        context.findings.note(f"float64 truth decided {len(truth_verdicts)} trial(s) the float32 reference failed: "
                              f"the candidate is off it by {context.check.truth_candidate_err:.2g}, the float32 "
                              f"reference by {context.check.truth_reference_err:.2g}")
    return TrialsResult(context.check, output_bytes)


def ask_truth(reference_model, inputs, candidate_output, reference_output, context: Context) -> Verdict | None:
    """A comparison the candidate failed against the float32 reference, asked again of the float64 truth;
    None (with a note: the float32 reference decides) where the truth cannot be computed."""
    started = time.perf_counter()
    try:
        truth = float64_truth(reference_model, inputs, context.device)
    except NoTruth as reason:
        context.findings.note(f"no float64 truth ({reason}): the float32 reference decided")
        return None
    finally:
        context.progress.add_seconds("float64 truth", time.perf_counter() - started)
    return judge_by_truth(candidate_output, reference_output, truth, context.config.tolerance_for)


def _summary(outcomes: list, truth_verdicts: list[Verdict]) -> CheckResult:
    summary = check.summarise(outcomes)
    if not truth_verdicts:
        return summary
    return replace(summary, truth_trials=len(truth_verdicts),
                   truth_candidate_err=_largest(verdict.candidate_error for verdict in truth_verdicts),
                   truth_reference_err=_largest(verdict.reference_error for verdict in truth_verdicts))


def _largest(values) -> float | None:
    present = [value for value in values if value is not None]
    return max(present) if present else None


def guard_output(context: Context, output) -> None:
    odd_types = guards.non_plain_outputs(output)
    if odd_types:
        context.findings.flag(flags.NON_PLAIN_OUTPUT,
                              f"returned {', '.join(odd_types)} instead of a plain torch.Tensor")


def note_reference_ops(reference_ops: set[str], candidate_model, inputs, context: Context) -> None:
    """Noting flag when the candidate runs the aten ops that carry the reference's work (`reference_ops`, as
    guards.record_ops found them)."""
    candidate_ops = guards.record_ops(
        lambda: call(candidate_model, clone(inputs), context.device, Status.RUNTIME_ERROR))
    shared = guards.shared_work_ops(reference_ops, candidate_ops)
    if shared:
        context.findings.flag(flags.CALLS_REFERENCE_OP,
                              f"calls the reference's own op(s): {', '.join('aten.' + op for op in shared)}")


def note_library_only(candidate_model, inputs, context: Context) -> None:
    """Noting flag when no kernel of the candidate's own does a meaningful share of its GPU work (a custom
    kernel compiled but never launched is a decoy: the library did the work)."""
    message = library_only_message(lambda: candidate_model(*clone(inputs)))
    if message:
        context.findings.flag(flags.LIBRARY_ONLY, message)


def _note_weak_check(reference_output, context: Context) -> None:
    weak = guards.weak_check_reason(reference_output, context.config.tolerance_for)
    if weak:
        context.findings.flag(flags.WEAK_CHECK, weak)


def _note_low_precision(reference_model, inputs, reference_output, candidate_output, context: Context) -> None:
    """Noting flag when the candidate's error against a float64 truth is 10x the float32 reference's."""
    try:
        truth = float64_truth(reference_model, inputs, context.device)
    except NoTruth as reason:  # then there is no truth to compare with
        print(f"kbench: no float64 truth for the precision check ({reason})", flush=True)
        return
    reference_error = check.error_against(reference_output, truth)
    candidate_error = check.error_against(candidate_output, truth)
    if candidate_error is None or reference_error is None:
        return
    if candidate_error >= guards.LOW_PRECISION_MIN_ERROR and \
            candidate_error >= guards.LOW_PRECISION_RATIO * reference_error:
        # In absolute terms: errors relative to a truth near zero would be huge and mean nothing.
        context.findings.flag(flags.LOW_PRECISION,
                              f"error against float64 truth {candidate_error / max(reference_error, 1e-300):.0f}x "
                              f"the float32 reference's (largest: {largest_error(candidate_output, truth):.2g} "
                              f"against {largest_error(reference_output, truth):.2g})")