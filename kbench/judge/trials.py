"""Correctness trials: the candidate (in its runner) against the reference on fresh seeded inputs, with the
notes that need the trials' outputs: input mutation, weak check, low precision over every trial, the
reference's ops and the kernel attribution (each taken on a trial call whose output is checked like the rest)."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

from kbench import flags
from kbench.judge import check, guards
from kbench.loading import call_reference, clone, release_cached_memory, tensor_bytes
from kbench.judge.progress import Context, Stop
from kbench.results import CheckResult, Status
from kbench.runner.arenas import aliasing
from kbench.judge.truth import NoTruth, Verdict, float64_truth, judge_by_truth, largest_error


@dataclass(frozen=True)
class TrialsResult:
    check: CheckResult
    output_bytes: int          # largest reference output (how many timed outputs can be checked)


def trial_mode(trial: int, trials: int, context: Context) -> str:
    """How the runner makes trial `trial`'s call: the last one records its aten ops, the one before profiles
    its kernels on a GPU (both after warm-up calls, so a compiled graph is already built); others are plain."""
    if not context.config.guards:
        return "plain"
    if trial == trials - 1:
        return "ops"
    if trial == trials - 2 and context.device.type == "cuda":
        return "kernels"
    return "plain"


def run_trials(reference_model, candidate, make_inputs, reference_ops: set[str], context: Context,
               reference_mutates: bool = True) -> TrialsResult:
    """Every trial, or a Stop: incorrect at the first set of trials that does not pass, rejected on a flag.
    `reference_mutates`: the reference changed its inputs when first called; if not, it runs on the trial's own
    inputs, not a copy (one copy fewer of inputs of gigabytes)."""
    config = context.config
    outcomes, truth_verdicts, output_bytes = [], [], 0
    precise_up_to = None  # the largest error against the float32 reference the float64 truth found precise
    for trial in range(config.trials):
        inputs = make_inputs(config.seed + trial)
        # The candidate first: while it runs, no reference output for its inputs exists. It runs on the
        # arenas' copy of them, so one set of inputs of gigabytes costs three copies at most, not four.
        candidate_output = candidate.call(inputs, mode=trial_mode(trial, config.trials, context))
        candidate_inputs = _changed_inputs(inputs, candidate.staged)
        reference_inputs = clone(inputs) if reference_mutates else inputs
        reference_output = call_reference(reference_model, reference_inputs, context.device, cloned=True)
        _note_call(candidate, reference_ops, context)
        output_bytes = max(output_bytes, tensor_bytes(reference_output))
        _check_inputs(candidate_inputs, reference_inputs, context)
        _check_aliasing(candidate.last.aliases_input, reference_output, reference_inputs)
        outcome = check.compare(candidate_output, reference_output, config.tolerance_for)
        if not outcome.passed and all(earlier.passed for earlier in outcomes):
            verdict = ask_truth(reference_model, inputs, candidate_output, reference_output, context)
            if verdict is not None and verdict.candidate_passed:
                truth_verdicts.append(verdict)
                outcome = replace(outcome, passed=True, mismatch=None)
        outcomes.append(outcome)
        context.check = _summary(outcomes, truth_verdicts)
        if outcome.passed and config.guards:
            if trial == 0:
                _note_weak_check(reference_output, context)
            if _precision_unknown(outcome.norm_err, precise_up_to, context):
                _note_low_precision(reference_model, inputs, reference_output, candidate_output, context)
                precise_up_to = max(precise_up_to or 0.0, outcome.norm_err or 0.0)
        guards.poison(reference_output)
        del candidate_output, reference_output, inputs, candidate_inputs, reference_inputs  # before the next set
        release_cached_memory(context.device)  # room for the candidate's own allocations
    if not context.check.passed:  # with the notes: that no float64 truth could decide, say
        raise Stop(Status.INCORRECT, "; ".join([context.check.first_mismatch or "outputs differ",
                                                *context.findings.notes]))
    if truth_verdicts:
        context.findings.note(f"float64 truth decided {len(truth_verdicts)} trial(s) the float32 reference failed: "
                              f"the candidate is off it by {context.check.truth_candidate_err:.2g}, the float32 "
                              f"reference by {context.check.truth_reference_err:.2g}")
    return TrialsResult(context.check, output_bytes)


def _precision_unknown(norm_err: float | None, precise_up_to: float | None, context: Context) -> bool:
    """Whether this trial's precision needs the float64 truth: its error against the float32 reference could
    reach the flag (guards.low_precision_possible), and is more than twice the largest error the truth has
    already found precise in an earlier trial (a candidate precise only while first watched shows a larger
    error against the float32 reference once it is not: bf16 or TF32 errors are orders of magnitude larger)."""
    if flags.LOW_PRECISION in context.findings.flags or not guards.low_precision_possible(norm_err):
        return False
    return precise_up_to is None or norm_err is None or norm_err != norm_err or norm_err > 2 * precise_up_to


def _note_call(candidate, reference_ops: set[str], context: Context) -> None:
    """The notes the runner took on this call: the reference's own ops, a decoy kernel."""
    reply = candidate.last
    shared = guards.shared_work_ops(reference_ops, set(reply.ops))
    if shared:
        context.findings.flag(flags.CALLS_REFERENCE_OP,
                              f"calls the reference's own op(s): {', '.join('aten.' + op for op in shared)}")
    if reply.library_only:
        context.findings.flag(flags.LIBRARY_ONLY, reply.library_only)


def _changed_inputs(pristine: list, staged: list) -> list | None:
    """The judge's copy of the inputs as the candidate left them, taken at once; None if it left them as they were
    (the usual case: no copy is made)."""
    after = [view if view is not None else value for view, value in zip(staged, pristine)]
    return clone(after) if guards.inputs_mutated(pristine, after) else None


def _check_inputs(candidate_inputs: list | None, reference_inputs: list, context: Context) -> None:
    """Rejecting flag when the candidate changed its inputs (`candidate_inputs`: None if it did not) other than
    as the reference changes its own."""
    if candidate_inputs is not None and guards.inputs_mutated(reference_inputs, candidate_inputs):
        context.findings.flag(flags.MUTATED_INPUTS, "forward changed its input tensors in place, unlike the reference")
        context.findings.raise_if_rejected()


def _check_aliasing(aliased: tuple[int, ...], reference_output, reference_inputs: list) -> None:
    """An output that shares memory with an input is wrong unless the reference's does too."""
    if not aliased:
        return
    items = list(reference_output) if isinstance(reference_output, (tuple, list)) else [reference_output]
    reference_aliasing = set(aliasing(items, reference_inputs))
    for index in aliased:
        if index not in reference_aliasing:
            raise Stop(Status.INCORRECT, f"output {index} shares memory with an input (the reference's does not)")


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
