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

from kbench import check, flags, guards
from kbench.loading import clone_output, synchronize
from kbench.progress import Context, Stop
from kbench.results import Status
from kbench.trials import ask_truth, guard_output

# Timed outputs up to this size are all checked; larger ones on a random share of calls.
CHECK_EVERY_CALL_BYTES = 64 << 20
CHECK_PROBABILITY = 0.25
# Between the candidate's call and the reference's, the watched settings, harness functions and reference
# are compared at random times, as often as keeps these comparisons to about this share of the timing
# loop's time (a comparison reads every parameter of the reference: on a large model it takes tens of ms).
WATCH_SHARE = 0.03
# Mean seconds before the first comparison, before its cost is known.
FIRST_WATCH_MEAN_S = 0.1


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
        self.next_watch = time.perf_counter() + self.random.expovariate(1 / FIRST_WATCH_MEAN_S)
        # And one in a round drawn among the first timed ones, which every timing loop runs (the random
        # times alone may fall after a short loop has ended). This construction makes round 1; the
        # warm-up rounds follow.
        config = context.config
        self.sure_watch_round = 1 + config.warmup + self.random.randint(1, max(1, config.min_samples))
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

    def _watch(self) -> None:
        """A checkpoint between the candidate's call and the reference's, at random times. It sees a change
        the candidate's call made to the reference even if the change undoes itself when the reference runs
        (a forward that returns the candidate's answer as the reference's, then puts the real one back), and
        one made and put back between the stages' own checkpoints. The gaps are exponential (memoryless: the
        time since the last one says nothing of the next) with a mean that keeps the comparisons to
        WATCH_SHARE of the loop."""
        started = time.perf_counter()
        self.context.checkpoint("timing ModelNew")
        now = time.perf_counter()
        self.next_watch = now + self.random.expovariate(WATCH_SHARE / max(now - started, 1e-4))

    def reference_done(self, output) -> None:
        """After the reference's timed call on this round's contents (the candidate's came first)."""
        if not self.candidate_ran:  # the sides' order is the guard: its output would go unchecked
            raise Stop(Status.INFRA_ERROR, "kbench timed the reference before the candidate in a round")
        if self.candidate_output is not None:
            self._compare(self.candidate_output, output)
            self.candidate_output = None
        guards.poison(output)

    def candidate_done(self, output) -> None:
        """After the candidate's timed call on this round's contents: a copy of a checked output waits for the
        reference's (the candidate could change the one it returned)."""
        self.candidate_ran = True
        if not self.fresh:
            return
        if self.rounds == self.sure_watch_round or time.perf_counter() >= self.next_watch:
            self._watch()
        self.calls += 1
        if not (self.check_all or self.calls <= 2 or self.random.random() < CHECK_PROBABILITY):
            return
        guard_output(self.context, output)
        self.context.findings.raise_if_rejected()
        with self.context.progress.spent("guard: timed-output checks"):
            self.candidate_output = clone_output(output)

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
