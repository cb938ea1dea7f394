"""Input contents for the timing loop, fresh every round, and the check of the timed calls' outputs.

A candidate that remembers outputs keyed by its inputs' contents (a few sampled values are enough) is
fooled by nothing but contents it has never seen. So each round of the timing loop draws new contents from
the problem's own input distribution (its get_inputs() under a seed from os.urandom, made on the device), one
set for each call of a batch (timed_sides.py), and every side loads them into its ring of input arenas outside
its timed batch: reference and candidate are timed on the same contents, call for call. The candidate runs first
in every round, so while it runs no reference output for its contents exists; the judge's copies of its outputs
are checked against the reference's outputs for the same contents (every call's, or, for outputs too large, a
sample the runner cannot predict: drawn after both batches), which are poisoned as soon as they have been compared.
A round may hold two sets of contents, one per turn (sides timed in pairs of batches: timing.sample_interleaved):
the candidate runs on both before the reference runs on either, and its outputs on both wait for the reference's.
"""

from __future__ import annotations

import math
import os
import random
import time


from kbench import flags
from kbench.judge import check, guards
from kbench.loading import synchronize
from kbench.judge.progress import Context
from kbench.failures import Evidence, Kind, Party, Stop
from kbench.runner.arenas import refill
from kbench.runner.held import HoldUnusable
from kbench.judge.trials import ask_truth

# Timed outputs up to this size are checked in every call; larger ones in a random share of a batch's calls.
CHECK_EVERY_CALL_BYTES = 64 << 20
CHECK_PROBABILITY = 0.25


class FreshRounds:
    """The current round's input sets (one per call of a batch, for each of its turns), and what the candidate and the
    reference did with them."""

    def __init__(self, make_inputs, reference_model, output_bytes: int, context: Context):
        self.make_inputs = make_inputs
        self.reference_model = reference_model
        self.context = context
        self.fresh = context.config.guards  # without guards: one round of contents, nothing checked
        self.hold = False          # the batches' outputs are read where the calls left them (runner/held.py)
        # Unpredictable to the candidate: it cannot know the contents, nor which calls are checked.
        self.random = random.Random(int.from_bytes(os.urandom(8), "little"))
        self.generate_s = 0.0      # seconds spent making contents (untimed, but overhead)
        self.sets_made = 0         # input sets made in them
        self.set_s = math.inf      # the fastest pace of a round so far, seconds per set
        self.count = 1             # input sets per turn: the batch's calls (timed_sides.plan_batches sets it)
        self.turns = 1             # contents per round: the batches each side runs in a round (plan_batches sets it)
        self.turn = 0              # the turn whose contents the sides load and check now (timing.sample_interleaved)
        self.contents: list[list[list]] = [[]]
        self.batches = 0
        self.rounds = 0
        self.check_all = output_bytes <= CHECK_EVERY_CALL_BYTES
        self.new_round()

    @property
    def sets(self) -> list[list]:
        """The current turn's input sets."""
        return self.contents[self.turn]

    def new_round(self) -> None:
        self.turn = 0
        if self.rounds and not self.fresh and len(self.contents) == self.turns and len(self.sets) == self.count:
            return
        started = time.perf_counter()
        # The last round's contents go first: with inputs of gigabytes (a 16 GiB avgpool input, the sides' rings
        # beside them) one more set at the peak may not fit the card.
        self.contents = []
        self.contents = [[self.make_inputs(self.random.getrandbits(63)) for _ in range(self.count)]
                         for _ in range(self.turns)]
        synchronize(self.context.device)
        spent = time.perf_counter() - started
        made = self.count * self.turns
        self.generate_s += spent
        self.sets_made += made
        self.set_s = min(self.set_s, spent / max(made, 1))
        self.rounds += 1
        self.candidate_ran = [False] * self.turns
        self.candidate_outputs = [None] * self.turns  # the judge's copies, kept until the reference runs on them

    def begin_turn(self, turn: int) -> None:
        """The sides load and check turn `turn`'s contents until the next call (timing.sample_interleaved)."""
        self.turn = turn

    def load(self, ring: list[list]) -> None:
        """This turn's contents into a side's ring of input buffers (non-tensor arguments stay as they are)."""
        for buffers, inputs in zip(ring, self.sets):
            refill(buffers, inputs)

    def reference_done(self, outputs) -> None:
        """After the reference's batch on this turn's contents (the candidate's came first); `outputs`:
        copies.BatchOutputs."""
        if not self.candidate_ran[self.turn]:  # the sides' order is the guard: its outputs would go unchecked
            raise Stop(Evidence(Party.JUDGE, Kind.BROKE_RULE,
                                "kbench timed the reference before the candidate in a round"))
        if self.candidate_outputs[self.turn] is not None:
            self._compare(self.candidate_outputs[self.turn], outputs)
            self.candidate_outputs[self.turn] = None
        guards.poison(outputs.rings)

    def candidate_done(self, outputs) -> None:
        """After the candidate's batch on this turn's contents: the judge's copies of its outputs (in a buffer of
        this turn's: remote.RemoteModel.run_batch `into`) wait for the reference's."""
        self.candidate_ran[self.turn] = True
        if self.fresh:
            self.candidate_outputs[self.turn] = outputs

    def _checked_calls(self) -> list[int]:
        """Every call, or (large outputs) a random share and at least one, drawn now: after the batch ran."""
        self.batches += 1
        calls = range(len(self.sets))
        if self.check_all or self.batches <= 2:
            return list(calls)
        return [index for index in calls if self.random.random() < CHECK_PROBABILITY] or \
            [self.random.randrange(len(self.sets))]

    def _compare(self, candidate, reference) -> None:
        tolerance_for = self.context.config.tolerance_for
        calls = self._checked_calls()
        with self.context.progress.spent("guard: timed-output checks"):
            if check.within_tolerance([ring[index] for ring in candidate.rings for index in calls],
                                      [ring[index] for ring in reference.rings for index in calls], tolerance_for):
                return
            for index in calls:
                outcome = check.compare(candidate.call(index), reference.call(index), tolerance_for)
                if not outcome.passed:
                    break
        if outcome.passed:
            return
        verdict = ask_truth(self.reference_model, self.sets[index], candidate.call(index), reference.call(index),
                            self.context)
        if verdict is not None and verdict.candidate_passed:
            return  # more accurate than the float32 reference on these contents, not wrong
        if self.hold:  # memory a later call may have overwritten: the check is made again on copies
            raise HoldUnusable(f"call {index} of timed batch {self.batches}, read where the call left it, was wrong "
                               f"for its inputs: {outcome.mismatch}")
        findings = self.context.findings
        findings.flag(flags.STALE_OUTPUT, f"call {index} of timed batch {self.batches} returned a wrong output for "
                                          f"its inputs (memoised or skipped work): {outcome.mismatch}")
        raise Stop(Evidence(Party.CANDIDATE, Kind.REJECTING_FLAG, "; ".join(findings.flag_messages)))
