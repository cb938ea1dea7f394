"""Correctness trials: the candidate (in its runner) against the reference on fresh seeded inputs, spread over
several instances of ModelNew built alike, with the notes that need the trials' outputs: input mutation, weak check,
low precision over every trial, the reference's ops and the kernel attribution (each taken on a trial call whose
output is checked like the rest)."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, replace

from kbench import flags
from kbench.judge import check, guards
from kbench.loading import call_reference, clone, release_cached_memory, tensor_bytes
from kbench.judge.progress import Context
from kbench.failures import Evidence, Kind, Party, Stop
from kbench.results import CheckResult
from kbench.runner.arenas import aliasing
from kbench.judge.truth import NoTruth, Verdict, float64_truth, judge_by_truth, largest_error


@dataclass(frozen=True)
class TrialsResult:
    check: CheckResult
    output_bytes: int          # largest reference output (how many timed outputs can be checked)


# The official verdict's instances of ModelNew: every one of them is checked, so a candidate that behaves
# in one instance (the first, the Nth, the one timed) as it does not in the others is seen at these sizes.
OFFICIAL_INSTANCES = 3


@dataclass(frozen=True)
class InstancePlan:
    """The ModelNew instances the official verdict is made of, in the order they are built. They are built
    alike (the same arguments, right after the same seed), so nothing tells the candidate which it is in."""

    calls: tuple[tuple[tuple[int, str], ...], ...]  # per instance: (trial, mode) of each of its calls
    timed: int  # the instance timed after its trials: the one that runs all but one trial per other instance


def guard_modes(context: Context) -> tuple[str, ...]:
    """How the runner makes the timed instance's last trial calls: the last records its aten ops, the one before
    profiles its kernels on a GPU; with guards off, none (every call plain)."""
    if not context.config.guards:
        return ()
    return ("kernels", "ops") if context.device.type == "cuda" else ("ops",)


def plan_instances(trials: int, modes: tuple[str, ...], secret: random.Random) -> InstancePlan:
    """Trials 0..trials-1 in order over up to OFFICIAL_INSTANCES instances: one trial each, but for the timed
    one, drawn from `secret` (the judge's own randomness, not the evaluation's seed, which the candidate reads)
    among all but the last built, so that an instance built after the timing is checked too. It runs the rest,
    `modes` on its last calls, after a plain one where there are trials enough (a compiled graph is built by
    then): with fewer trials than that takes, fewer instances."""
    count = max(1, min(OFFICIAL_INSTANCES, trials - len(modes)))
    timed = secret.randrange(count - 1) if count > 1 else 0
    calls, trial = [], 0
    for index in range(count):
        size, own_modes = (trials - count + 1, modes) if index == timed else (1, ())
        first_mode = size - len(own_modes)  # the call that takes own_modes[0]; those before it are plain
        calls.append(tuple((trial + call, own_modes[call - first_mode] if call >= first_mode else "plain")
                           for call in range(size)))
        trial += size
    return InstancePlan(tuple(calls), timed)


class OfficialTrials:
    """The official trials, run on the plan's instances in turn: an instance's call is checked like any other,
    and what the trials found (outcomes, notes, the float64 truth's verdicts) holds across instances.
    `reference_mutates`: the reference changed its inputs when first called; if not, it runs on the trial's own
    inputs, not a copy (one copy fewer of inputs of gigabytes)."""

    def __init__(self, reference_model, make_inputs, reference_ops: set[str], context: Context,
                 reference_mutates: bool = True):
        self.reference_model, self.make_inputs, self.reference_ops = reference_model, make_inputs, reference_ops
        self.context, self.reference_mutates = context, reference_mutates
        self.outcomes: list = []
        self.truth_verdicts: list[Verdict] = []
        self.output_bytes = 0  # largest reference output (how many timed outputs can be checked)
        self.precise_up_to = None  # the largest error against the float32 reference the float64 truth found precise

    @property
    def passing(self) -> bool:
        return all(outcome.passed for outcome in self.outcomes)

    def run(self, candidate, calls: tuple[tuple[int, str], ...]) -> None:
        """`candidate`'s calls, each (trial, mode); a Stop on a rejecting flag or a call that fails."""
        for trial, mode in calls:
            self._trial(candidate, trial, mode)

    def so_far(self) -> TrialsResult:
        return TrialsResult(self.context.check, self.output_bytes)

    def finish(self) -> TrialsResult:
        """The trials' result, or a Stop: incorrect where a trial did not pass."""
        context = self.context
        if not context.check.passed:  # with the notes: that no float64 truth could decide, say
            raise Stop(Evidence(Party.CANDIDATE, Kind.WRONG_OUTPUT, "; ".join(
                [context.check.first_mismatch or "outputs differ", *context.findings.notes])))
        if self.truth_verdicts:
            context.findings.note(f"float64 truth decided {len(self.truth_verdicts)} trial(s) the float32 reference "
                                  f"failed: the candidate is off it by {context.check.truth_candidate_err:.2g}, the "
                                  f"float32 reference by {context.check.truth_reference_err:.2g}")
        return self.so_far()

    def _trial(self, candidate, trial: int, mode: str) -> None:
        context, config = self.context, self.context.config
        reference_model = self.reference_model
        inputs = self.make_inputs(config.seed + trial)
        # The candidate first: while it runs, no reference output for its inputs exists. It runs on the
        # arenas' copy of them, so one set of inputs of gigabytes costs three copies at most, not four.
        candidate_output = candidate.call(inputs, mode=mode)
        candidate_inputs = _changed_inputs(inputs, candidate.staged)
        reference_inputs = clone(inputs) if self.reference_mutates else inputs
        reference_output = call_reference(reference_model, reference_inputs, context.device, cloned=True)
        _note_call(candidate, self.reference_ops, context)
        self.output_bytes = max(self.output_bytes, tensor_bytes(reference_output))
        _check_inputs(candidate_inputs, reference_inputs, context)
        _check_aliasing(candidate.last.aliases_input, reference_output, reference_inputs)
        outcome = check.compare(candidate_output, reference_output, config.tolerance_for)
        if not outcome.passed and self.passing:
            verdict = ask_truth(reference_model, inputs, candidate_output, reference_output, context)
            if verdict is not None and verdict.candidate_passed:
                self.truth_verdicts.append(verdict)
                outcome = replace(outcome, passed=True, mismatch=None)
        self.outcomes.append(outcome)
        context.check = _summary(self.outcomes, self.truth_verdicts)
        if outcome.passed and config.guards:
            if trial == 0:
                _note_weak_check(reference_output, context)
            if _precision_unknown(outcome.norm_err, self.precise_up_to, context):
                _note_low_precision(reference_model, inputs, reference_output, candidate_output, context)
                self.precise_up_to = max(self.precise_up_to or 0.0, outcome.norm_err or 0.0)
        guards.poison(reference_output)
        del candidate_output, reference_output, inputs, candidate_inputs, reference_inputs  # before the next set
        release_cached_memory(context.device)  # room for the candidate's own allocations


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
            raise Stop(Evidence(Party.CANDIDATE, Kind.WRONG_OUTPUT,
                                f"output {index} shares memory with an input (the reference's does not)"))


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
