"""The timing loop's rounds (kbench.fresh): fresh contents every round, and comparisons of the watched
state at random times that keep to their share of the loop."""

from __future__ import annotations

import time

import torch

from kbench import fresh
from kbench.build import BuildRecord
from kbench.config import RunConfig
from kbench.progress import Context, Findings, Progress


class CountingWatch:
    """A watch whose comparison takes `cost_s`, as a large reference's parameter checksums would."""

    def __init__(self, cost_s: float):
        self.cost_s = cost_s
        self.times: list[float] = []

    def findings(self, when: str, other_globals=()) -> list:
        self.times.append(time.perf_counter())
        time.sleep(self.cost_s)
        return []


def _rounds(tmp_path, watch) -> fresh.FreshRounds:
    progress = Progress(tmp_path / "progress.json", BuildRecord())
    context = Context(RunConfig(device="cpu"), torch.device("cpu"), progress, Findings(progress), watch=watch)
    return fresh.FreshRounds(lambda seed: [torch.randn(8, generator=torch.Generator().manual_seed(seed))],
                             reference_model=None, output_bytes=32, context=context)


def _timed_calls(rounds: fresh.FreshRounds, events: list | None = None) -> None:
    """The candidate's and the reference's timed calls of a round, as the sides report them."""
    output = rounds.inputs[0] * 2
    time.sleep(0.001)
    if events is not None:
        events.append("candidate called")
    rounds.candidate_done(output)
    if events is not None:
        events.append("reference called")
    rounds.reference_done(output.clone())


def test_watch_rounds_happen_at_random_and_keep_to_their_share(tmp_path):
    watch = CountingWatch(cost_s=0.004)
    rounds = _rounds(tmp_path, watch)
    started = time.perf_counter()
    contents = {tuple(rounds.inputs[0].tolist())}  # the first round's, made on construction
    while time.perf_counter() - started < 1.5:
        rounds.new_round()
        contents.add(tuple(rounds.inputs[0].tolist()))
        _timed_calls(rounds)
    elapsed = time.perf_counter() - started
    share = len(watch.times) * watch.cost_s / elapsed
    # Expected about 1.5 * 0.03 / 0.004 = 11 comparisons; a share per round (10% of rounds) would be ~25%.
    assert 2 <= len(watch.times) and share < 2.5 * fresh.WATCH_SHARE, (len(watch.times), share)
    gaps = [later - earlier for earlier, later in zip(watch.times, watch.times[1:])]
    assert len(set(round(gap, 3) for gap in gaps)) > 1  # not a fixed period a candidate could learn
    assert len(contents) == rounds.rounds  # every round's contents are new


def test_the_watch_comes_between_the_candidates_call_and_the_references(tmp_path):
    """A change the candidate's call made to the reference can undo itself when the reference is called:
    only a comparison between the two calls sees it."""
    events: list = []

    class Watch(CountingWatch):
        def findings(self, when: str, other_globals=()) -> list:
            events.append("watch")
            return super().findings(when, other_globals)

    rounds = _rounds(tmp_path, Watch(cost_s=0.002))
    started = time.perf_counter()
    while time.perf_counter() - started < 1.0:
        rounds.new_round()
        _timed_calls(rounds, events)
    watches = [index for index, event in enumerate(events) if event == "watch"]
    assert watches, "no watch in a second of rounds"
    assert all(events[index - 1] == "candidate called" and events[index + 1] == "reference called"
               for index in watches)


def test_one_watch_falls_among_the_first_timed_rounds(tmp_path):
    """However short the loop, a watch comes in one of the first min_samples timed rounds (after the
    warm-up), and which one is not known ahead."""
    chosen = set()
    for _ in range(30):
        watch = CountingWatch(cost_s=0.0)
        rounds = _rounds(tmp_path, watch)
        rounds.next_watch = float("inf")  # no watch at random times
        config = rounds.context.config
        watched_rounds = []
        for _ in range(config.warmup + config.min_samples):
            rounds.new_round()
            before = len(watch.times)
            _timed_calls(rounds)
            if len(watch.times) > before:
                watched_rounds.append(rounds.rounds - 1 - config.warmup)  # 1: the first timed round
        # (after a watch the random times take over: others may follow)
        assert watched_rounds and 1 <= watched_rounds[0] <= config.min_samples, watched_rounds
        chosen.add(watched_rounds[0])
    assert len(chosen) > 1


def test_without_guards_one_set_of_contents_and_no_watch(tmp_path):
    watch = CountingWatch(cost_s=0.0)
    rounds = _rounds(tmp_path, watch)
    rounds.fresh = False
    first = rounds.inputs
    for _ in range(50):
        rounds.new_round()
        _timed_calls(rounds)
    assert rounds.inputs is first and watch.times == []



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

    progress = Progress(tmp_path / "progress.json", BuildRecord())
    context = Context(RunConfig(device="cpu"), torch.device("cpu"), progress, Findings(progress),
                      watch=CountingWatch(0.0))
    rounds = fresh.FreshRounds(make, reference_model=None, output_bytes=32, context=context)
    for _ in range(5):
        rounds.new_round()
    assert len(alive) == 6


class Scribbler(torch.nn.Module):
    """Computes the right answer, then zeroes its input in place."""

    def forward(self, x):
        output = x * 2
        x.zero_()
        return output


class Doubler(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.seen: list[torch.Tensor] = []

    def forward(self, x):
        self.seen.append(x.clone())
        return x * 2


def test_the_sides_share_one_set_of_buffers_and_each_call_starts_from_the_round_s_contents(tmp_path):
    """One set of input buffers for every side (a problem with a 16 GiB input needs room for two sets, not
    one per side), reloaded before each call: a candidate that scribbles on its inputs cannot change what
    the reference computes after it, and its timed outputs are still checked against the round's."""
    from kbench.timed_sides import build_sides

    made = []

    def make(seed):
        made.append(torch.randn(8, generator=torch.Generator().manual_seed(seed)))
        return [made[-1]]

    progress = Progress(tmp_path / "progress.json", BuildRecord())
    context = Context(RunConfig(device="cpu"), torch.device("cpu"), progress, Findings(progress),
                      watch=CountingWatch(0.0))
    reference = Doubler()
    rounds = fresh.FreshRounds(make, reference_model=reference, output_bytes=32, context=context)
    sides = build_sides(reference, Scribbler(), rounds, context)
    assert list(sides) == ["candidate", "reference"]
    assert sides["candidate"].buffers is sides["reference"].buffers
    for _ in range(3):
        rounds.new_round()
        for timed in sides.values():
            timed.side.prepare()
            timed.side.inspect(timed.side.call())
    assert len(reference.seen) == 3
    assert all(torch.equal(seen, contents) for seen, contents in zip(reference.seen, made[1:]))
    assert progress.record.flags == ()


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
