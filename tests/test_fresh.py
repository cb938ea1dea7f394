"""The timing loop's rounds (kbench.judge.fresh): fresh contents every round."""

from __future__ import annotations

import time

import pytest
import torch

from kbench.judge import fresh
from kbench.config import RunConfig
from kbench.judge.progress import Context, Findings, Progress


def _rounds(tmp_path) -> fresh.FreshRounds:
    progress = Progress(tmp_path / "progress.json")
    context = Context(RunConfig(device="cpu"), torch.device("cpu"), progress, Findings(progress))
    return fresh.FreshRounds(lambda seed: [torch.randn(8, generator=torch.Generator().manual_seed(seed))],
                             reference_model=None, output_bytes=32, context=context)


def _timed_calls(rounds: fresh.FreshRounds, events: list | None = None) -> None:
    """The candidate's and the reference's timed batches of a round, as the sides report them."""
    from kbench.judge.copies import BatchOutputs

    output = torch.stack([inputs[0] * 2 for inputs in rounds.sets])  # each call's output, one per input set
    time.sleep(0.001)
    if events is not None:
        events.append("candidate called")
    rounds.candidate_done(BatchOutputs([output], sequence=False))
    if events is not None:
        events.append("reference called")
    rounds.reference_done(BatchOutputs([output.clone()], sequence=False))


def test_without_guards_one_set_of_contents(tmp_path):
    rounds = _rounds(tmp_path)
    rounds.fresh = False
    first = rounds.sets
    for _ in range(50):
        rounds.new_round()
        _timed_calls(rounds)
    assert rounds.sets is first



def test_a_round_s_contents_are_made_after_the_last_round_s_are_let_go(tmp_path):
    """At most one set of round contents exists at a time (with a 16 GiB input, two may not fit beside the
    sides' buffers on the card)."""
    import weakref

    alive = []

    def make(seed):
        assert all(reference() is None for reference in alive), "the last round's contents are still held"
        tensor = torch.randn(8, generator=torch.Generator().manual_seed(seed))
        alive.append(weakref.ref(tensor))
        return [tensor]

    progress = Progress(tmp_path / "progress.json")
    context = Context(RunConfig(device="cpu"), torch.device("cpu"), progress, Findings(progress))
    rounds = fresh.FreshRounds(make, reference_model=None, output_bytes=32, context=context)
    for _ in range(5):
        rounds.new_round()
    assert len(alive) == 6


def test_a_rounds_contents_are_get_inputs_under_its_seed():
    """make_inputs seeds the generators itself (not through torch.manual_seed, which costs half a millisecond
    a round): the contents for a seed are still exactly get_inputs() after torch.manual_seed(seed)."""
    from pathlib import Path

    from kbench.loading import input_maker, load_problem

    problem = load_problem(str(Path(__file__).parent / "fixtures" / "problems" / "axpy.py"))
    make_inputs = input_maker(problem, torch.device("cpu"))
    torch.manual_seed(7)
    expected = problem.get_inputs()
    torch.manual_seed(123)  # whatever the generators' state before, the seed decides
    made = make_inputs(7)
    assert all(torch.equal(a, b) for a, b in zip(made, expected))
    assert not all(torch.equal(a, b) for a, b in zip(make_inputs(8), expected))


def test_every_tensor_argument_is_on_the_evaluation_s_device():
    """As KernelBench moves every argument to the GPU: a tensor a problem makes outside torch's factories (from
    numpy, say), which the device's default does not reach, is moved there, inputs and init arguments alike (the
    meta device stands in for a GPU here)."""
    from types import SimpleNamespace

    import numpy

    from kbench.loading import input_maker, reference_init_inputs

    problem = SimpleNamespace(get_inputs=lambda: [torch.from_numpy(numpy.ones(3)), torch.rand(2), 4],
                              get_init_inputs=lambda: [torch.from_numpy(numpy.zeros(2)), 5])
    device = torch.device("meta")
    made = input_maker(problem, device)(0)
    init = reference_init_inputs(problem, 0, device)
    assert [value.device.type for value in made[:2]] == ["meta", "meta"] and made[2] == 4
    assert init[0].device.type == "meta" and init[1] == 5


def test_the_batch_is_sized_at_the_pace_of_the_fastest_round_of_inputs(tmp_path):
    """timed_sides._affordable: a first round of inputs that is slow by itself (here 50 ms, then 1 ms a set) does not
    hold every batch to a few calls."""
    from kbench.judge.timed_sides import MAX_ROUND_INPUTS_MS, _affordable

    progress = Progress(tmp_path / "progress.json")
    context = Context(RunConfig(device="cpu"), torch.device("cpu"), progress, Findings(progress))
    pauses = iter([0.05] + [0.001] * 20)

    def make(seed):
        time.sleep(next(pauses))
        return [torch.randn(8)]
    rounds = fresh.FreshRounds(make, reference_model=None, output_bytes=32, context=context)
    rounds.new_round()
    rounds.count = 4
    rounds.new_round()
    assert rounds.set_s < 0.01
    assert _affordable(rounds) >= MAX_ROUND_INPUTS_MS / 2  # a set takes about 1 ms; the average was 9 ms


class _Double(torch.nn.Module):
    def forward(self, value):
        return value * 2


def _two_turn_rounds(tmp_path) -> fresh.FreshRounds:
    progress = Progress(tmp_path / "progress.json")
    context = Context(RunConfig(device="cpu"), torch.device("cpu"), progress, Findings(progress))
    rounds = fresh.FreshRounds(lambda seed: [torch.randn(8, generator=torch.Generator().manual_seed(seed))],
                               reference_model=_Double(), output_bytes=32, context=context)
    rounds.count, rounds.turns = 3, 2
    rounds.new_round()
    return rounds


def _batch(rounds: fresh.FreshRounds, sets: list):
    from kbench.judge.copies import BatchOutputs

    return BatchOutputs([torch.stack([inputs[0] * 2 for inputs in sets])], sequence=False)


def test_with_two_turns_each_turn_has_contents_of_its_own_and_the_candidate_s_outputs_wait_for_both(tmp_path):
    """The candidate runs on both turns' contents before the reference runs on either: its outputs on the first turn
    are checked against the reference's on the first turn's contents, not overwritten by its second batch."""
    rounds = _two_turn_rounds(tmp_path)
    turns = []
    for turn in range(2):
        rounds.begin_turn(turn)
        turns.append(rounds.sets)
        rounds.candidate_done(_batch(rounds, rounds.sets))
    assert len(turns[0]) == len(turns[1]) == 3
    assert not any(torch.equal(a[0], b[0]) for a in turns[0] for b in turns[1])
    for turn in range(2):
        rounds.begin_turn(turn)
        rounds.reference_done(_batch(rounds, rounds.sets))
    assert not rounds.context.findings.flags


def test_with_two_turns_a_candidate_answering_one_turn_s_contents_with_the_other_s_outputs_is_stale(tmp_path):
    from kbench.failures import Stop

    rounds = _two_turn_rounds(tmp_path)
    first = rounds.contents[0]
    for turn in range(2):
        rounds.begin_turn(turn)
        rounds.candidate_done(_batch(rounds, first))  # the first turn's answers, on both turns
    rounds.begin_turn(0)
    rounds.reference_done(_batch(rounds, rounds.sets))
    rounds.begin_turn(1)
    with pytest.raises(Stop):
        rounds.reference_done(_batch(rounds, rounds.sets))
    assert rounds.context.findings.flags == ["stale_output"]


def test_with_two_turns_the_reference_may_not_run_on_a_turn_the_candidate_has_not(tmp_path):
    from kbench.failures import Stop

    rounds = _two_turn_rounds(tmp_path)
    rounds.begin_turn(0)
    rounds.candidate_done(_batch(rounds, rounds.sets))
    rounds.begin_turn(1)
    with pytest.raises(Stop, match="reference before the candidate"):
        rounds.reference_done(_batch(rounds, rounds.sets))
