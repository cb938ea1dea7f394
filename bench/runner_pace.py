"""Does a batch take longer in a runner started as the candidate's than in one started as the reference's? (GPU)

    PYTHONPATH=$PWD python3 bench/runner_pace.py PROBLEM.py [--count K] [--rounds N] [--pin]

Starts two runners as an evaluation starts the candidate's (confined, in a cgroup of their own) and two as it starts
the reference's (protected), builds the problem's own Model in each (a stand-in: the same code everywhere), loads
each ring with the same input sets and times batches of `--count` calls in each by the judge's clock, as the timing
loop does (the other runners stopped, L2 flushed, an untimed batch of no calls first, outputs held), in an order
that turns every round. Then one confined runner makes what the candidate's runner makes in its trials (a profiled
call of its kernels, a call with its ops recorded) and the rounds run again. Prints each runner's median batch wall
and request-to-reply time, in ms: runners of one kind should match; the candidate's kind against the reference's
is the side bias a self-candidate shows, and the profiled runner against its twin is what trials leave behind. With
`--pin`, every runner (and this process) runs on the CPU this process is on, as on a CPU device while timing: runners
of one kind then differ by what their processes are, not by where the scheduler put them."""
from __future__ import annotations

import argparse
import contextlib
import statistics
import time

from kbench.judge.remote_process import RunnerProcess
from kbench.processes import on_one_cpu
from kbench.runner.limits import private_shm

KINDS = (("confined", False), ("confined", False), ("protected", True), ("protected", True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("problem")
    parser.add_argument("--count", type=int, default=1, help="calls per batch")
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--pin", action="store_true", help="every runner on this process's CPU")
    arguments = parser.parse_args()
    shared = private_shm()
    runners = [RunnerProcess(arguments.device, protected=protected, private_shm=shared) for _, protected in KINDS]
    try:  # the runners start before this process touches CUDA, as an evaluation's do
        pids = [pid for runner in runners for pid in runner.processes()] if arguments.pin else []
        with on_one_cpu(pids) if pids else contextlib.nullcontext():
            run(runners, arguments)
    finally:
        for runner in runners:
            runner.stop()


def run(runners: list[RunnerProcess], arguments) -> None:
    import torch

    from kbench.judge import timing
    from kbench.judge.instances import begin_stand_in
    from kbench.judge.timed_sides import output_sizes
    from kbench.loading import input_maker, load_problem, reference_init_inputs

    device = torch.device(arguments.device)
    problem = load_problem(arguments.problem)
    make_inputs = input_maker(problem, device)
    init = reference_init_inputs(problem, 0, device)
    models = [begin_stand_in(runner, str(runner.lend(arguments.problem, "problem")), "strict-fp32", init, 0, {})()
              for runner in runners]
    sets = [make_inputs(seed) for seed in range(arguments.count)]
    sizes = output_sizes(models[0](*sets[0]))
    for model in models:
        model.load_ring(sets, sizes)
    l2 = timing.CudaEventTimer(device) if device.type == "cuda" else None
    names = [f"{kind} {index % 2 + 1}" for index, (kind, _) in enumerate(KINDS)]
    pinned = ", every runner on one CPU" if arguments.pin else ""
    print(f"{arguments.problem}: batches of {arguments.count}, {arguments.rounds} rounds{pinned}", flush=True)
    print(f"{'phase':<14} {'runner':<12} {'wall ms':>9} {'reply ms':>9}")
    for phase in ("fresh", "after trials"):  # the trials: confined 1 only
        if phase != "fresh":
            models[0].call(sets[0], mode="kernels")
            models[0].call(sets[0], mode="ops")
        walls, replies = rounds(runners, models, l2, device, arguments)
        for index, name in enumerate(names):
            print(f"{phase:<14} {name:<12} {statistics.median(walls[index]):9.4f} "
                  f"{statistics.median(replies[index]):9.4f}", flush=True)
    for model in models:
        model.close_held()


def rounds(runners, models, l2, device, arguments) -> tuple[list[list[float]], list[list[float]]]:
    import torch

    walls: list[list[float]] = [[] for _ in runners]
    replies: list[list[float]] = [[] for _ in runners]
    for number in range(arguments.rounds + 2):  # two rounds first, untimed
        order = [(number + shift) % len(runners) for shift in range(len(runners))]
        for index in order:
            for other, runner in enumerate(runners):
                if other != index:
                    runner.pause()
            if l2 is not None:
                l2.flush()
                torch.cuda.synchronize()
            models[index].run_batch(0)
            started = time.perf_counter()
            outputs = models[index].run_batch(arguments.count, hold=device.type == "cuda")
            wall_ms = (time.perf_counter() - started) * 1e3
            for other, runner in enumerate(runners):
                if other != index:
                    runner.resume()
            if number >= 2:
                walls[index].append(wall_ms)
                replies[index].append((outputs.replied_at - started) * 1e3)
    return walls, replies


if __name__ == "__main__":
    main()
