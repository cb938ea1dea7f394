"""Input contents for the timing loop, fresh every round, and the check of the candidate's timed outputs.

A candidate that remembers outputs keyed by its inputs' contents (a few sampled values are enough) is
fooled by nothing but contents it has never seen. So each round of the timing loop draws new contents from
the problem's own input distribution (its get_inputs() under a seed from os.urandom, made on the device)
and every side loads them into the input buffers before its call, outside the timed region: reference and
candidate are timed on the same contents. The candidate runs first in every round, so while it runs no
reference output for its contents exists; a copy of its output is checked against the reference's timed
output for the same contents, which is poisoned as soon as it has been compared.
"""

from __future__ import annotations

import os
import random
import time

from kbench import flags
from kbench.judge import check, guards
from kbench.loading import synchronize
from kbench.judge.progress import Context, Stop
from kbench.results import Status
from kbench.judge.trials import ask_truth

# Timed outputs up to this size are all checked; larger ones on a random share of calls.
CHECK_EVERY_CALL_BYTES = 64 << 20
CHECK_PROBABILITY = 0.25


class FreshRounds:
    """The current round's input contents, and what the candidate and the reference did with them."""

    def __init__(self, make_inputs, reference_model, output_bytes: int, context: Context):
        self.make_inputs = make_inputs
        self.reference_model = reference_model
        self.context = context
        self.fresh = context.config.guards  # without guards: one set of contents, nothing checked
        # Unpredictable to the candidate: it cannot know the contents, nor which calls are checked.
        self.random = random.Random(int.from_bytes(os.urandom(8), "little"))
        self.generate_s = 0.0      # seconds spent making contents (untimed, but overhead)
        self.inputs: list = []
        self.check_all = output_bytes <= CHECK_EVERY_CALL_BYTES
        self.calls = 0
        self.rounds = 0
        self.new_round()

    def new_round(self) -> None:
        if self.rounds and not self.fresh:
            return
        started = time.perf_counter()
        # The last round's contents go first: with inputs of gigabytes (a 16 GiB avgpool input, the sides'
        # buffers beside them) one more set at the peak may not fit the card.
        self.inputs = []
        self.inputs = self.make_inputs(self.random.getrandbits(63))
        synchronize(self.context.device)
        self.generate_s += time.perf_counter() - started
        self.rounds += 1
        self.candidate_ran = False
        self.candidate_output = None  # a copy, kept until the reference runs on these contents

    def reference_done(self, output) -> None:
        """After the reference's timed call on this round's contents (the candidate's came first)."""
        if not self.candidate_ran:  # the sides' order is the guard: its output would go unchecked
            raise Stop(Status.INFRA_ERROR, "kbench timed the reference before the candidate in a round")
        if self.candidate_output is not None:
            self._compare(self.candidate_output, output)
            self.candidate_output = None
        guards.poison(output)

    def candidate_done(self, output) -> None:
        """After the candidate's timed call on this round's contents: its output (the judge's own copy) waits
        for the reference's."""
        self.candidate_ran = True
        if not self.fresh:
            return
        self.calls += 1
        if self.check_all or self.calls <= 2 or self.random.random() < CHECK_PROBABILITY:
            self.candidate_output = output

    def _compare(self, output, expected) -> None:
        tolerance_for = self.context.config.tolerance_for
        with self.context.progress.spent("guard: timed-output checks"):
            if check.within_tolerance(output, expected, tolerance_for):
                return
            outcome = check.compare(output, expected, tolerance_for)
        if outcome.passed:
            return
        verdict = ask_truth(self.reference_model, self.inputs, output, expected, self.context)
        if verdict is not None and verdict.candidate_passed:
            return  # more accurate than the float32 reference on these contents, not wrong
        findings = self.context.findings
        findings.flag(flags.STALE_OUTPUT, f"timed call {self.calls} returned a wrong output for its "
                                          f"inputs (memoised or skipped work): {outcome.mismatch}")
        raise Stop(Status.REJECTED, "; ".join(findings.flag_messages))
