"""The boundary between the judge and the judged (kbench/runner, kbench/judge/remote.py): candidates that go for the
judge from their own process end not `correct`, or `correct` with no gain; honest look-alikes stay clean.
Each fixture is described in tests/fixtures/boundary/README.md."""

from __future__ import annotations

import base64
import os
import re
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from kbench import flags
from kbench.config import RunConfig
from kbench.judge.instances import begin_stand_in
from kbench.judge.remote_process import RunnerProcess
from kbench.judge.runner_lost import RunnerDied
from kbench.results import Status
from kbench.schedule.child import evaluate
from kbench.runner import landlock, wire
from kbench.runner import held
from kbench.runner.held import HoldUnusable

from conftest import FIXTURES, PROBLEMS

BOUNDARY = FIXTURES / "boundary"
CHEATS = FIXTURES / "cheats"
AXPY = PROBLEMS / "axpy.py"
PREFIX_SUM = CHEATS / "problems" / "prefix_sum.py"
CONVT = CHEATS / "problems" / "convt1d_small.py"


@pytest.fixture(scope="module")
def config(cpu_config) -> RunConfig:
    return RunConfig(device="cpu", cache_dir=cpu_config.cache_dir, timeout_s=300, time_budget_s=0.5, min_samples=10,
                     sweep=0)


def rejecting(result) -> set:
    return set(result.flags) & set(flags.REJECTING)


def test_a_forged_result_file_never_becomes_the_verdict(config):
    result = evaluate(AXPY, BOUNDARY / "forge_result.py", config)
    assert result.status == Status.CRASHED, (result.status, result.message)
    assert "loading solution" in result.message


def test_patching_what_a_checker_calls_changes_nothing_in_the_judge(config):
    result = evaluate(AXPY, BOUNDARY / "patch_checker.py", config)
    assert result.status == Status.INCORRECT, result.message


# Fixture, and the speedup its true time stays below: 201 running sums a call are 2-4x the reference's time (its lie
# reads as a 2.5-10x speedup); work_in_copy does the reference's own work in the output's copy; shaved_clock is the
# reference's own work (its lie reads 5x).
OWN_CLOCKS = [("fake_clock.py", PREFIX_SUM, 1.0), ("fake_clock_most_calls.py", PREFIX_SUM, 1.0),
              ("fake_clock_first_pass.py", PREFIX_SUM, 1.0), ("work_in_copy.py", PREFIX_SUM, 1.6),
              ("shaved_clock.py", AXPY, 2.0)]


@pytest.mark.parametrize("solution, problem, below", OWN_CLOCKS)
def test_a_runner_s_own_clock_and_work_outside_its_calls_gain_nothing(config, solution, problem, below):
    """The recorded time is the judge's clock around batches of calls (kbench/judge/sides.py): a clock in the
    runner's process that runs slow, in every call, most calls or the first fifty, is never read, and work done when
    the runner copies an output out is inside the batch."""
    result = evaluate(problem, BOUNDARY / solution, config)
    assert result.status == Status.CORRECT and not rejecting(result), (result.status, result.message)
    assert result.speedup < below, (result.speedup, result.message)


def test_patching_kbench_s_own_timing_in_the_candidate_s_process_gains_nothing(config):
    """patch_kbench.py wraps kbench.judge.timing.measure_side at import to read every other batch at a tenth (about
    10x, were it the judge's): that is the runner's copy of kbench, which times nothing; the judge's own loop reads
    the axpy it computes at its true time (the reference's own, so about 1x; a busy CI machine spread axpy's tiny
    calls to 2.6x once, flagged noisy_timing)."""
    result = evaluate(AXPY, CHEATS / "patch_kbench.py", config)
    assert result.status == Status.CORRECT and not rejecting(result), (result.status, result.message)
    assert result.speedup < 5.0, (result.speedup, result.message)


def test_work_skipped_in_some_calls_of_a_batch_is_a_stale_output(config):
    """Every call of a timed batch runs on inputs of its own, and the judge checks each call's output."""
    result = evaluate(AXPY, BOUNDARY / "stale_in_batch.py", config)
    assert result.status == Status.REJECTED and flags.STALE_OUTPUT in result.flags, (result.status, result.message)


def test_a_runner_never_sees_its_timed_batch_s_inputs_before_the_judge_s_clock_starts(config):
    """Each side's ring is refilled after the runner not timed is stopped, the GPU found free and the timed runner
    woken (sides.runner_side): the inputs a batch computes on are not there while the runner answers the request
    that wakes it, so a thread of its own cannot start on them then, off the clock."""
    result = evaluate(AXPY, BOUNDARY / "peek_before_clock.py", config)
    assert result.status == Status.CORRECT and not rejecting(result), (result.status, result.message)


def test_a_batch_calls_the_model_once_per_input_set_and_the_judge_keeps_its_own_copies(runner):
    model = stand_in(runner, PROBLEMS / "minmax.py")  # two outputs: each row's least and greatest value
    sets = [[torch.rand(4, 9)] for _ in range(3)]
    model.load_ring(sets, [4 * 4, 4 * 4])
    outputs = model.run_batch(3)
    expected = [(inputs[0].amin(-1), inputs[0].amax(-1)) for inputs in sets]
    assert all(torch.equal(got, want) for index in range(3) for got, want in zip(outputs.call(index), expected[index]))
    runner.arenas.buffers[model.ring_slots[1][0]].fill_(0)  # what the runner writes afterwards changes no copy
    assert torch.equal(outputs.call(2)[1], expected[2][1])
    assert model.run_batch(0).rings == []  # a batch of no calls: the judge's fixed cost


def test_a_batch_into_the_judge_s_second_buffer_leaves_the_first_batch_s_copies_as_they_were(runner):
    """With two turns a round, the candidate's outputs on the first turn's contents wait for the reference's while
    its second batch runs: each batch's copies go into a buffer of the turn's own (run_batch `into`)."""
    model = stand_in(runner, PROBLEMS / "minmax.py")
    first, second = ([[torch.rand(4, 9)] for _ in range(2)] for _ in range(2))
    ring = model.load_ring(first, [4 * 4, 4 * 4])
    kept = model.run_batch(2, into=0)
    for buffers, inputs in zip(ring, second):
        buffers[0].copy_(inputs[0])
    model.reserve_copies(2, into=1)  # made before the batch: none is allocated inside the judge's clock
    reserved = [model.copies.buffers[1, index] for index in range(2)]
    later = model.run_batch(2, into=1)
    for outputs, sets in ((kept, first), (later, second)):
        assert all(torch.equal(outputs.call(index)[0], inputs[0].amin(-1)) for index, inputs in enumerate(sets))
    assert all(model.copies.buffers[1, index] is buffer for index, buffer in enumerate(reserved))


ALONE_LINE = re.compile(r"kbench: the reference alone: (\d+) rounds of batches of 1 and (\d+) calls, walls "
                        r"([\d.e-]+) \(the fastest\) and ([\d.e-]+) ms \(the median\), the judge's copy of a slot "
                        r"[\d.e-]+ ms; a call ([\d.e-]+) ms, outputs copied")


def test_the_reference_alone_reads_a_call_s_time_not_what_its_batch_costs_once_and_the_log_says_how(runner, capfd):
    """measure.time_alone, as on a GPU before the candidate is imported (there only; it runs the same here): each round
    a batch of one call and a longer one in the reference's runner, the candidate's runner stopped while they run; a
    call's time is each longer batch less the fastest batch of one, over the calls it adds. wake_cost.py's first
    call of a batch costs 20 ms more than its 5 ms (as a GPU's first work after the judge's does): that cost
    cancels, as it does spread over the timing loop's batches, and no calibration batch of calls that cost nothing
    stands in for it. The longer batch holds two such calls (a batch of one took 25 ms), more of a short call
    (axpy's), and more than two of a short call whose first batch on the ring is cold (cold_first_batch.py: the
    fastest batch of one sizes it); the evaluation's log names the batches' walls and the call's time. The test of a
    suspected slowdown times batches of one call whole (less the judge's fixed cost), as another process's work
    delays each batch once."""
    from types import SimpleNamespace
    from statistics import median

    from kbench.judge.measure import ALONE_CALLS, time_alone
    from kbench.loading import input_maker, load_problem, reference_init_inputs

    timed = {}
    for path in (PROBLEMS / "wake_cost.py", AXPY, PROBLEMS / "cold_first_batch.py"):  # a runner serves one problem
        reference = RunnerProcess("cpu", protected=True)
        try:
            problem, device = load_problem(str(path)), torch.device("cpu")
            model = begin_stand_in(reference, str(reference.lend(path, "problem")), "strict-fp32",
                                   reference_init_inputs(problem, 0, device), 0, {})()
            context = SimpleNamespace(config=RunConfig(device="cpu"), device=device, runner=runner,
                                      reference_runner=reference, quiet_gpu=None, findings=None)
            timed[path.stem] = time_alone(model, input_maker(problem, device), context)
            if path.stem == "wake_cost":
                whole, _ = time_alone(model, input_maker(problem, device), context, whole_batches=True)
        finally:
            reference.stop()
    assert median(whole.samples_ms) > 20.0  # what delays a batch once is in a batch of one, timed whole
    (woken, short, cold), (alone, held_outputs) = ALONE_LINE.findall(capfd.readouterr().out), timed["wake_cost"]
    rounds, calls, one_ms = int(woken[0]), int(woken[1]), float(woken[2])
    assert not held_outputs and len(alone.samples_ms) == rounds >= 3 and calls == 2 < int(short[1]) <= ALONE_CALLS
    assert int(cold[1]) > 2  # sized by its cold first batch (40 ms), it would hold two
    assert one_ms > 20.0  # the wake-up cost is in a batch of one
    assert median(alone.samples_ms) == pytest.approx(float(woken[4]), rel=1e-3)
    assert 3.0 <= median(alone.samples_ms) <= 10.0, alone.samples_ms  # 5 ms a call, 25 with the wake-up


@pytest.fixture()
def busy_cpu():
    """Another process keeping a CPU busy while the test runs."""
    process = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    yield process
    process.kill()
    process.wait()


@pytest.mark.parametrize("attempt", [1, 2])
def test_the_reference_s_own_code_reads_even_beside_a_busy_process_or_is_flagged(config, busy_cpu, attempt):
    """Both sides are batched alike, interleaved, each runner just woken when its clock starts: load from another
    process hits both, or (one side's runner on a CPU much less of its batches' time than the other's) the result
    says so. A generous bound: a 2-core machine shared with other work."""
    result = evaluate(PREFIX_SUM, BOUNDARY / "subclass_reference.py", config)
    assert result.status == Status.CORRECT and not rejecting(result), (result.status, result.message)
    assert 1 / 1.5 < result.speedup < 1.5 or flags.NOISY_TIMING in result.flags, (result.speedup, result.message)


@pytest.mark.skipif(not landlock.signals_scoped_here(), reason="needs Landlock ABI 6 (signal scopes)")
def test_the_runner_cannot_signal_the_judge_nor_the_reference_s_runner(config):
    result = evaluate(AXPY, BOUNDARY / "signal_out.py", config)
    assert result.status == Status.CORRECT, result.message  # it answers wrong when a signal got out


def test_process_state_of_the_candidate_s_does_not_reach_the_reference(config):
    """Grad mode, anomaly detection and a saved-tensors hook slowed every call of a reference with parameters that
    shared the process (an nn.Linear, 16x); here the reference's time is what it is beside an honest candidate.
    Their fastest calls are compared: the host's load moves a median between two evaluations (4x, beside two busy
    loops on 2 cores)."""
    cheat = evaluate(PROBLEMS / "linear.py", BOUNDARY / "slow_reference_state.py", config)
    honest = evaluate(PROBLEMS / "linear.py", BOUNDARY / "linear_plain.py", config)
    assert cheat.status == honest.status == Status.CORRECT, (cheat.message, honest.message)
    assert not rejecting(cheat)
    fastest, fastest_honest = min(cheat.reference_timing.samples_ms), min(honest.reference_timing.samples_ms)
    assert fastest < 3 * fastest_honest, (cheat.reference_timing.samples_ms, honest.reference_timing.samples_ms)


@pytest.mark.parametrize("solution", ["first_call_only.py", "watched_only.py"])
def test_every_trial_output_is_checked_whatever_the_call(config, solution):
    result = evaluate(AXPY, BOUNDARY / solution, config)
    assert result.status == Status.INCORRECT, result.message


def test_precision_is_judged_on_every_trial_not_the_first(config):
    result = evaluate(CONVT, BOUNDARY / "precise_while_first_watched.py", config)
    assert result.status == Status.CORRECT and flags.LOW_PRECISION in result.flags, (result.status, result.message)


def test_the_runner_can_neither_write_outside_its_folders_nor_read_the_judge_s_memory_from_any_thread(config):
    from kbench.runner.landlock import landlock_available
    result = evaluate(AXPY, BOUNDARY / "escape.py", config)
    assert result.status == Status.LOAD_ERROR
    assert "judge-memory:denied" in result.message, result.message
    assert "threads:all-confined" in result.message, result.message  # none started before it confined itself
    if landlock_available():  # else the runner runs unconfined, and its log says so
        assert "write:denied" in result.message, result.message
        assert "compiler-wrapper:denied" in result.message, result.message  # what every later build runs
        assert "other-extensions:denied" in result.message, result.message  # what other candidates load
        assert "own-extensions:denied" in result.message, result.message  # an evaluation writes no build cache
        assert "precompiled-headers:denied" in result.message, result.message  # what every later compile loads
        # The judge's and the reference's runner's descriptors, the only way to their arenas: none opened (none
        # even listed where reads are confined).
        assert re.search(r"other-descriptors:0-of-\d+-opened", result.message), result.message
        assert "kernel-settings:denied" in result.message, result.message
        assert "thread-name:writable" in result.message, result.message  # what CUDA's driver needs at cuInit


def test_the_judge_copies_a_runner_s_triton_cache_back_through_no_link(config, tmp_path):
    """The judge copies the new files of the candidate's Triton cache (in its runner's scratch folder) into the
    solution's Triton folder once the runner is killed. A link in that folder, planted by an earlier run, must not
    lead the judge's writes out of the cache."""
    from kbench.extensions.cache import solution_folder
    solution = tmp_path / "triton_cache_link.py"
    solution.write_text((BOUNDARY / "triton_cache_link.py").read_text() + f"# {tmp_path.name}\n")  # a folder of its own
    outside = tmp_path / "outside"
    outside.mkdir()
    folder = solution_folder(config.cache_dir, "triton", solution)
    folder.mkdir(parents=True)
    (folder / "planted").symlink_to(outside)
    result = evaluate(AXPY, solution, config)
    assert result.status == Status.CORRECT, result.message
    assert not list(outside.iterdir())


@pytest.mark.parametrize("solution, problem", [
    (BOUNDARY / "subclass_reference.py", AXPY),
    (CHEATS / "honest_weight_cache.py", CONVT),
    (CHEATS / "honest_helper_thread.py", CONVT),
    (CHEATS / "honest_fast.py", PREFIX_SUM),
])
def test_honest_look_alikes_are_correct_without_a_rejecting_flag(config, solution, problem):
    result = evaluate(problem, solution, config)
    assert result.status == Status.CORRECT and not rejecting(result), (result.status, result.message)


HONEST = FIXTURES / "honest"


@pytest.mark.parametrize("solution, problem", [
    ("compiled.py", AXPY), ("custom_op.py", AXPY), ("numpy_helper.py", AXPY), ("in_place.py", AXPY),
    ("subclass_in_place.py", HONEST / "axpy_inplace.py"),
])
def test_honest_but_unusual_candidates_are_correct_with_no_flag(tmp_path, solution, problem):
    """Compiled graphs, custom ops, numpy helpers, in-place work, a subclass that mutates its input as the
    reference does (tests/fixtures/honest/README.md): recording their ops does not change what they run."""
    config = RunConfig(device="cpu", cache_dir=tmp_path, timeout_s=300, time_budget_s=0.3, min_samples=5, sweep=2)
    result = evaluate(problem, HONEST / solution, config)
    # A flag about the measurement (the judge's resolution on a CPU) is not about the candidate.
    blaming = set(result.flags) - set(flags.MEASUREMENT)
    assert result.status == Status.CORRECT and not blaming, (result.status, result.flags, result.message)


def test_every_model_is_built_right_after_the_seed(tmp_path):
    """get_init_inputs() may draw from torch's generator: the judge's reference, the timed one in its runner and
    ModelNew are each built right after the seed (as KernelBench builds them), so the reference itself is correct
    (noted for running the reference's ops, which it does), in its trials, timed rounds and sweep alike."""
    config = RunConfig(device="cpu", cache_dir=tmp_path, timeout_s=300, time_budget_s=0.3, min_samples=5, sweep=2)
    result = evaluate(HONEST / "linear_drawn_scale.py", HONEST / "subclass.py", config)
    assert result.status == Status.CORRECT and not rejecting(result), (result.status, result.flags, result.message)
    assert result.sweep.passed == result.sweep.run == 2, result.message


KERNELBENCH = Path(__file__).resolve().parents[2] / "shared" / "kernelbench"


@pytest.mark.skipif(not KERNELBENCH.is_dir(), reason="needs ../shared/kernelbench")
def test_a_kernelbench_subclass_of_the_reference_with_list_globals_is_correct(config, tmp_path):
    """KernelBench runs the candidate in the reference's namespace; level 3 #1 has a list global (which an
    earlier snapshot of the reference took for the candidate's change)."""
    candidate = tmp_path / "subclass.py"
    candidate.write_text("class ModelNew(Model):  # noqa: F821\n    pass\n")
    result = evaluate(KERNELBENCH / "level3" / "1_MLP.py", candidate, replace(config, trials=2, time=False))
    assert result.status == Status.CORRECT and not rejecting(result), (result.status, result.message)


# --- the protocol, with a real runner -------------------------------------------------------------------

@pytest.fixture()
def runner():
    process = RunnerProcess("cpu")
    yield process
    process.stop()


def stand_in(runner, problem):
    """The problem's Model in `runner`, which reads the problem where the judge lends it (a confined runner reads
    no other folder of the judge's)."""
    return begin_stand_in(runner, str(runner.lend(problem, "problem")), "strict-fp32", [], 0, {})()


def test_outputs_come_back_as_the_judge_s_own_tensors(runner):
    x = torch.rand(4, 9)
    low, high = stand_in(runner, PROBLEMS / "minmax.py")(x)  # the problem's Model, in the runner
    assert torch.equal(low, x.amin(-1)) and torch.equal(high, x.amax(-1))
    # The judge's copy: what the runner writes to the arena afterwards does not change it.
    runner.arenas.buffers[runner.arenas.slots["out0"]].fill_(0)
    assert torch.equal(low, x.amin(-1))


def test_a_runner_started_beside_other_threads_is_a_fresh_interpreter_and_works():
    """A fork copies only the calling thread: a lock another thread holds stays held in the child for good (a
    runner forked from a test worker died of SIGSEGV once; a worker that ran Ray's client keeps ten of its threads
    after ray.shutdown). Beside another thread, the runner starts as a fresh interpreter."""
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait, daemon=True)
    thread.start()
    try:
        runner = RunnerProcess("cpu")
        try:
            x = torch.rand(4, 9)
            low, high = stand_in(runner, PROBLEMS / "minmax.py")(x)
            assert torch.equal(low, x.amin(-1)) and torch.equal(high, x.amax(-1))
            assert isinstance(runner.process, subprocess.Popen), type(runner.process)
        finally:
            runner.stop()
    finally:
        stop.set()
        thread.join()


def test_outputs_larger_than_the_arenas_grow_them(runner):
    model = stand_in(runner, PROBLEMS / "minmax.py")
    assert model(torch.rand(2, 3))[0].shape == (2,)
    big = torch.rand(100_000, 3)
    assert torch.equal(model(big)[1], big.amax(-1))


def test_released_arenas_are_unmapped_by_both_processes_and_made_again_by_the_next_call(runner):
    model = stand_in(runner, PROBLEMS / "minmax.py")
    x = torch.rand(3, 5)
    model(x)

    def mapped_by(pid) -> set[str]:  # arenas' inodes: another test's judge objects may still map arenas here
        maps = Path(f"/proc/{pid}/maps").read_text()
        return {line.split()[4] for line in maps.splitlines() if "memfd:kbench-arena-" in line}
    arenas = mapped_by(runner.process.pid)
    assert arenas and arenas <= mapped_by("self") and runner.arenas.buffers
    model.release_arenas()
    assert not mapped_by(runner.process.pid) and not arenas & mapped_by("self") and not runner.arenas.buffers
    low, high = model(x)
    assert torch.equal(low, x.amin(-1)) and torch.equal(high, x.amax(-1))


def test_an_output_that_is_an_input_is_incorrect_unless_the_reference_s_is(config, tmp_path):
    (tmp_path / "copy.py").write_text(IDENTITY.format(body="x.clone()"))
    (tmp_path / "same.py").write_text(IDENTITY.format(body="x"))
    candidate = tmp_path / "returns_its_input.py"
    candidate.write_text("import torch.nn as nn\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n"
                         "        return x\n")
    against_copy = evaluate(tmp_path / "copy.py", candidate, config)
    assert against_copy.status == Status.INCORRECT and "shares memory with an input" in against_copy.message
    assert evaluate(tmp_path / "same.py", candidate, config).status == Status.CORRECT


def test_the_candidate_s_runner_detaches_the_profiler_when_a_profile_ends(config, tmp_path):
    """Kineto leaves CUPTI attached after a profile unless TEARDOWN_CUPTI=1, and the candidate's runner profiles
    before its timed calls (docs/timing.md): the variable is set before any candidate code runs."""
    (tmp_path / "copy.py").write_text(IDENTITY.format(body="x.clone()"))
    candidate = tmp_path / "reads_its_environment.py"
    candidate.write_text("import os\nimport torch.nn as nn\n\n"
                         "SCALE = 1.0 if os.environ.get('TEARDOWN_CUPTI') == '1' else 2.0\n\n\n"
                         "class ModelNew(nn.Module):\n    def forward(self, x):\n        return x * SCALE\n")
    result = evaluate(tmp_path / "copy.py", candidate, config)
    assert result.status == Status.CORRECT, result.message


IDENTITY = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return {body}


def get_inputs():
    return [torch.rand(64)]


def get_init_inputs():
    return []
"""


@pytest.mark.parametrize("reply", [
    {"outputs": "no"}, {"outputs": [{"dtype": "float32", "shape": [-1], "device": "cpu", "kind": "Tensor"}]},
    {"outputs": [{"dtype": 3}]},
])
def test_a_malformed_reply_is_a_protocol_error(reply):
    with pytest.raises(wire.ProtocolError):
        wire.CallReply.from_wire(reply)


HANDLE = base64.b64encode(bytes(range(64))).decode()


@pytest.mark.parametrize("claimed", [
    "no", {"handles": ["not base64!"], "calls": []}, {"handles": [base64.b64encode(b"short").decode()], "calls": []},
    {"handles": [HANDLE], "calls": [[[1, 0, [1], 0]]]}, {"handles": [HANDLE], "calls": [[[0, -256, [1], 0]]]},
    {"handles": [HANDLE], "calls": [[[0, 0, [-1], 0]]]}, {"handles": [HANDLE], "calls": [[[0, 0, [1]]]]},
    {"handles": [HANDLE], "calls": [[[0, 0, [1] * 65, 0]]]},
])
def test_held_outputs_the_judge_cannot_read_are_a_protocol_error(claimed):
    """A batch's held outputs (runner/held.py) name handles the batch sent and places in them counted from 0: the
    judge reads nothing before it has checked them."""
    with pytest.raises(wire.ProtocolError):
        wire.CallReply.from_wire({"outputs": [], "held": claimed})


def test_held_outputs_are_read_back_as_the_runner_named_them():
    reply = wire.CallReply.from_wire({"outputs": [], "held": {"handles": [HANDLE],
                                                              "calls": [[[0, 512, [3, 1], 2]], [None]]}})
    assert reply.held.handles == (bytes(range(64)),)
    assert reply.held.calls == ((wire.HeldRef(0, 512, (3, 1), 2),), (None,))


@pytest.mark.parametrize("spans, overlapping", [
    ([(b"a", 0, 100), (b"a", 100, 200), (b"b", 50, 150)], False),
    ([(b"a", 0, 1000), (b"a", 100, 200), (b"a", 300, 400)], True),  # within one: an earlier call's, overwritten
    ([(b"a", 300, 400), (b"a", 0, 301)], True),
])
def test_two_calls_outputs_in_the_same_memory_are_told_apart_from_neighbours(spans, overlapping):
    assert held.overlapping(spans) is overlapping


def test_a_batch_whose_outputs_are_not_all_held_is_read_from_the_slots_or_not_at_all(runner):
    """Held outputs are a GPU's (CUDA IPC): on a CPU the runner holds none, and a batch asked to hold them, which
    names no place for them, is refused (HoldUnusable: measure.py times again with copies), never half read."""
    model = stand_in(runner, PROBLEMS / "minmax.py")
    sets = [[torch.rand(4, 9)] for _ in range(2)]
    model.load_ring(sets, [4 * 4, 4 * 4])
    with pytest.raises(HoldUnusable, match="places for 0 of 2"):
        model.run_batch(2, hold=True)
    assert model.last.held == wire.HeldOutputs()
    outputs = model.run_batch(2)
    assert torch.equal(outputs.call(1)[0], sets[1][0].amin(-1))


def test_a_status_a_runner_cannot_claim_reads_as_a_load_error():
    assert wire.Failure.from_wire({"status": "correct", "message": "trust me"}).status == "load_error"


def test_a_runner_that_dies_is_reported_with_its_signal(runner):
    os.kill(runner.process.pid, 9)
    with pytest.raises(RunnerDied, match="SIGKILL"):
        stand_in(runner, AXPY)


def test_a_runner_that_dies_starting_is_told_apart_from_one_that_could_have_run_the_candidate(runner):
    """The reference's runner warms up (its CUDA context: here a device that does not exist) before it says it is
    ready: one that dies there ran nothing (the judge makes that an infrastructure failure, evaluation._decided)."""
    starting = RunnerProcess("cuda:99", protected=True)
    try:
        with pytest.raises(RunnerDied) as died:
            starting.request({"op": "quit"})
        assert not died.value.ready
    finally:
        starting.stop()
    with pytest.raises(RunnerDied) as died:
        runner.request({"op": "quit"})
    assert died.value.ready


def test_a_candidate_runner_that_fails_warming_up_ran_nothing_of_the_candidate_s(tmp_path):
    """The candidate's runner warms up only once confined, before its job comes (runner/serve.py): a failure
    there is an infrastructure failure, not the candidate's, told in reply to the job (evaluation._send_job)."""
    from types import SimpleNamespace
    from kbench.judge import evaluation
    from kbench.failures import Stop
    from kbench.verdicts import decide
    starting = RunnerProcess("cuda:99")
    try:
        context = SimpleNamespace(config=SimpleNamespace(cache_dir=tmp_path), runner=starting)
        job = SimpleNamespace(solution_path=str(AXPY), log_path="", build_only=False)
        confined = evaluation._send_job(job, context)
        with pytest.raises(Stop) as stop:
            confined()
        assert decide(stop.value.evidence).status == Status.INFRA_ERROR
        assert "before any candidate code" in stop.value.message
    finally:
        starting.stop()


def test_stopping_a_runner_kills_what_it_left_behind(runner):
    """A daemon left in a session of its own by a child of the judge's (here a stand-in for the runner) is
    reparented to the judge (a subreaper) and killed when the runner is stopped."""
    script = ("import subprocess, sys\n"
              "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'], start_new_session=True)\n"
              "print(child.pid, flush=True)\n")
    judge = subprocess.run([sys.executable, "-c", (
        "import subprocess, sys, time\n"
        "from kbench.runner.limits import judge_protection\n"
        "from kbench.processes import children_of\n"
        "from kbench.judge.remote_process import RunnerProcess\n"
        "import os\n"
        "judge_protection()\n"
        f"leaver = subprocess.Popen([sys.executable, '-c', {script!r}], stdout=subprocess.PIPE, start_new_session=True)\n"
        "daemon = int(leaver.stdout.readline())\n"
        "leaver.wait()\n"
        "time.sleep(0.2)\n"
        "assert daemon in children_of(os.getpid()), 'not reparented'\n"
        "runner = RunnerProcess('cpu')\n"
        "runner.stop()\n"
        "time.sleep(0.2)\n"
        "print('gone' if not os.path.exists(f'/proc/{daemon}') else 'alive')\n")],
        capture_output=True, text=True, timeout=120)
    assert judge.stdout.strip().endswith("gone"), (judge.stdout, judge.stderr)


MATMUL = """import torch
class Model(torch.nn.Module):
    def forward(self, a, b):
        return a @ b
n = 256
KBENCH_SMALL = {"n": 256}
def get_inputs():
    return [torch.rand(n, n), torch.rand(n, n)]
def get_init_inputs():
    return []
"""


@pytest.mark.parametrize("fixture", ["neighbour_processes.py", "neighbour_cgroup_escape.py"])
def test_processes_the_candidate_moves_out_of_its_group_are_stopped_with_its_runner(tmp_path, fixture):
    """The fixtures start processes that spin while the runner is stopped (while the reference is timed) and count
    their bursts: in sessions of their own (the runner's cgroup stops them first: freezer.py), or born straight
    into the judge's cgroup by clone3 (refused: runner/limits.py). They never spin; the cgroup goes with the
    evaluation, the neighbours killed."""
    from kbench.extensions.cache import solution_folder
    from kbench.freezer import Freezer
    from kbench.schedule.pool import worker_pool

    probe = Freezer.create(f"probe-{os.getpid()}")
    if probe is None:
        pytest.skip("no cgroup can be made here (the runner's log says its neighbours are not stopped)")
    probe.remove()
    problem = tmp_path / "matmul.py"
    problem.write_text(MATMUL)
    config = RunConfig(device="cpu", cache_dir=tmp_path / "cache", timeout_s=120, time_budget_s=0.5, sweep=0)
    mine = f"kbench-kbench-worker-{os.getpid()}-*"  # this process's workers' runners' cgroups
    before = set(probe.folder.parent.glob(mine))  # earlier tests' workers (a new pool removes what they left)
    result = evaluate(problem, CHEATS / fixture, config)
    assert result.status == Status.CORRECT and not rejecting(result), result.message
    counts = {path.name: path.read_text() for path in
              solution_folder(config.cache_dir, "triton", CHEATS / fixture).glob("neighbour-*")}
    assert not counts, counts  # no neighbour ever ran while the runner was stopped
    assert "neighbour-" not in subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    worker_pool().stop_waiting()  # the waiting workers' runners have cgroups too
    deadline = time.monotonic() + 15  # the evaluation's worker ends in the background (pool._end_in_background)
    while (left := set(probe.folder.parent.glob(mine)) - before) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not left, f"runners' cgroups left behind: {left}"


def test_what_a_killed_kbench_left_is_removed_by_the_next_one(tmp_path):
    """Worker folders (runners' arenas and scratch) and runner cgroups are named after the kbench process that
    made them; one killed outright cannot remove them: the next pool made on this machine does."""
    import tempfile

    from kbench.freezer import Freezer
    from kbench.schedule import worker_folders

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    stale = Path(tempfile.mkdtemp(prefix=f"kbench-worker-{gone.pid}-"))
    (stale / "kbench-exchange-x").mkdir()
    mine = Path(tempfile.mkdtemp(prefix=f"kbench-worker-{os.getpid()}-"))
    cgroup = Freezer.create(f"{stale.name}-1")
    worker_folders.remove_stale()
    assert not stale.exists() and mine.exists()
    assert cgroup is None or not cgroup.folder.exists()
    mine.rmdir()
