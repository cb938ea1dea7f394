"""The parameter sweep: the candidate checked at random configurations of the problem's globals."""

from __future__ import annotations

import traceback
from itertools import islice

import torch

from kbench import params
from kbench.judge import check, guards
from kbench.schedule.job import SweepCounts
from kbench.failures import Stop, one_line
from kbench.loading import (build_reference, call_reference, clone, input_maker, lost_context,
                            reference_init_inputs, synchronize)
from kbench.problem import describe_overrides, overridden
from kbench.judge.progress import Context
from kbench.judge.instances import new_candidate
from kbench.judge.output_room import OutputRoom
from kbench.results import SweepResult
from kbench.judge.trials import ask_truth

# A sweep gives up drawing after this many configurations per requested one (invalid ones are skipped).
ATTEMPTS_PER_CONFIGURATION = 4
PASSED, SKIPPED = "passed", "skipped"


def run_sweep(problem_module, context: Context) -> SweepResult:
    """Configurations the reference rejects (invalid combinations) are skipped and counted; draws continue
    until `config.sweep` configurations ran or too many were drawn."""
    config, device = context.config, context.device
    cap = params.SMALL_INPUT_BYTES if device.type == "cpu" else params.SWEEP_INPUT_BYTES
    configurations = params.iter_configurations(problem_module, config.seed, cap)
    counts = SweepCounts(total=config.sweep)
    first_failure = None
    for index, configuration in enumerate(islice(configurations, config.sweep * ATTEMPTS_PER_CONFIGURATION)):
        if counts.run == config.sweep:
            break
        described = describe_overrides(configuration) or "official sizes"
        context.progress.sweep_step(counts, described)
        try:
            outcome = _sweep_one(problem_module, configuration, context, config.seed + 1000 + index)
        except Exception as error:  # a lost CUDA context of the judge's: nothing after it can run
            traceback.print_exc()
            counts = SweepCounts(counts.passed, counts.run + 1, counts.skipped, counts.total)
            first_failure = first_failure or f"{described}: {one_line(error)}"
            break
        if outcome == SKIPPED:
            counts = SweepCounts(counts.passed, counts.run, counts.skipped + 1, counts.total)
            continue
        counts = SweepCounts(counts.passed + (outcome == PASSED), counts.run + 1, counts.skipped, counts.total)
        if outcome != PASSED and first_failure is None:
            first_failure = f"{described}: {outcome}"
    return SweepResult(passed=counts.passed, run=counts.run, skipped=counts.skipped, first_failure=first_failure)


def _sweep_one(problem_module, configuration, context: Context, input_seed) -> str:
    """PASSED, SKIPPED (the reference rejects the configuration or returns nothing), or why it failed.

    The reference runs first, to see that it accepts the configuration; its output is poisoned before the
    candidate runs and computed again after it. Each configuration builds a new ModelNew in the runner."""
    config, device = context.config, context.device
    with overridden(problem_module, configuration):
        try:
            init_inputs = reference_init_inputs(problem_module, config.seed, device, config.precision)
            reference_model = build_reference(problem_module, init_inputs, config.seed, device, config.precision)
            inputs = input_maker(problem_module, device, config.precision)(input_seed)
            accepted = reference_model(*clone(inputs))
            synchronize(device)
        except Exception as error:
            if lost_context(error):
                raise
            return SKIPPED
        if all(isinstance(value, torch.Tensor) and value.numel() == 0 for value in check.as_tensor_list(accepted)):
            return SKIPPED  # a degenerate configuration: nothing to compare
        room = OutputRoom.of(accepted)
        guards.poison(accepted)
        del accepted
        try:
            candidate = new_candidate(context.runner, init_inputs, config.seed, configuration, room,
                                      config.precision)
            candidate_output = candidate.call(inputs)
        except Stop as stop:
            return stop.message
        reference_output = call_reference(reference_model, inputs, device)
        outcome = check.compare(candidate_output, reference_output, config.tolerance_for)
        if not outcome.passed:
            verdict = ask_truth(reference_model, inputs, candidate_output, reference_output, context)
            if verdict is not None and verdict.candidate_passed:
                return PASSED  # more accurate than the float32 reference, not wrong
        return PASSED if outcome.passed else outcome.mismatch
