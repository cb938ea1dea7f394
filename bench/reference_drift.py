"""Does a reference's GPU time move within one process, and with what: the SM clock, or the kernels it runs?

    PYTHONPATH=$PWD python3 bench/reference_drift.py [--problem problems/convt2d_asym.py] [--processes 6]

Each process builds the reference at official size and times it as kbench does: first briefly alone (a
warm-up call, then calls until ALONE_BUDGET_S, as measure.time_alone), then in rounds for a few seconds
beside a stand-in candidate (the reference itself on other inputs, called first, as ModelNew is). Every
sample keeps the SM clock read right after it (NVML). The kernels of one call are listed with the CUDA
profiler at the start and at the end, so a change of cuDNN's choice shows. Prints, per process, the
medians and clocks of each stretch; `slowed_reference` compares the alone median with the rounds'.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

ROUNDS_S = 3.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problem", default="problems/convt2d_asym.py")
    parser.add_argument("--processes", type=int, default=6)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(_one_process(args.problem)))
        return 0
    print(f"{'process':>7} {'alone ms':>9} {'MHz':>5} {'rounds ms':>10} {'MHz min-max':>12} "
          f"{'1st/last s ms':>14}  kernels same")
    for index in range(args.processes):
        line = subprocess.run([sys.executable, __file__, "--child", "--problem", args.problem],
                              capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
        found = json.loads(line)
        alone, rounds = found["alone"], found["rounds"]
        first, last = _stretch(rounds, 0, 1.0), _stretch(rounds, ROUNDS_S - 1.0, ROUNDS_S)
        clocks = [sample[2] for sample in rounds if sample[2]]
        print(f"{index:>7} {_median(alone):>9.3g} {_median_clock(alone):>5.0f} {_median(rounds):>10.3g} "
              f"{min(clocks, default=0):>5.0f}-{max(clocks, default=0):<6.0f} {first:>6.3g}/{last:<7.3g} "
              f"{found['kernels_start'] == found['kernels_end']}")
        if index == 0 or found["kernels_start"] != found["kernels_end"]:
            print("         kernels:", found["kernels_start"], "->", found["kernels_end"])
    return 0


def _one_process(problem_path: str) -> dict:
    import torch

    from kbench.loading import build_reference, input_maker, load_problem, reference_init_inputs
    from kbench.config import RunConfig
    from kbench.judge.measure import ALONE_BUDGET_S
    from kbench.policy import apply_policy
    from kbench.judge.timing import CudaEventTimer

    device = torch.device("cuda")
    apply_policy(RunConfig().policy)  # kbench's default precision policy, as its workers run
    problem = load_problem(problem_path)
    model = build_reference(problem, reference_init_inputs(problem, 0, device), 0, device)
    make_inputs = input_maker(problem, device)
    timer = CudaEventTimer(device)
    clock = lambda: float(torch.cuda.clock_rate(device))  # noqa: E731
    with torch.no_grad():
        inputs = make_inputs(100)
        model(*inputs)
        torch.cuda.synchronize()
        kernels_start = _kernels(lambda: model(*inputs))
        alone = _timed(lambda: model(*inputs), timer, clock, ALONE_BUDGET_S, warmup=1)
        other = make_inputs(200)
        rounds = _timed(lambda: model(*inputs), timer, clock, ROUNDS_S, before=lambda: timer.measure(
            lambda: model(*other)))
        kernels_end = _kernels(lambda: model(*inputs))
    return {"alone": alone, "rounds": rounds, "kernels_start": kernels_start, "kernels_end": kernels_end}


def _timed(call, timer, clock, budget_s, warmup=0, before=lambda: None) -> list[tuple[float, float, float]]:
    """(seconds since the start, timed ms, SM MHz after the call) per sample."""
    for _ in range(warmup):
        timer.measure(call)
    samples, start = [], time.monotonic()
    while time.monotonic() - start < budget_s or len(samples) < 3:
        before()
        ms = timer.measure(call)[0]
        samples.append((time.monotonic() - start, ms, clock()))
    return samples


def _kernels(call) -> list[str]:
    import torch

    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as profiler:
        call()
        torch.cuda.synchronize()
    return sorted({event.name[:60] for event in profiler.events() if event.device_type.name == "CUDA"})


def _median(samples) -> float:
    return statistics.median(sample[1] for sample in samples)


def _median_clock(samples) -> float:
    clocks = [sample[2] for sample in samples if sample[2]]
    return statistics.median(clocks) if clocks else 0.0


def _stretch(samples, start_s: float, end_s: float) -> float:
    inside = [sample for sample in samples if start_s <= sample[0] < end_s]
    return _median(inside) if inside else float("nan")


if __name__ == "__main__":
    sys.exit(main())
