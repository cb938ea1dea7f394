"""Wall time of a kbench evaluation with guards on versus off, for correct solutions.

    PYTHONPATH=$PWD python3 bench/guard_overhead.py [--repeats 3] [--sweep 8] [--samples 10] [--only NAME]
                                                    [--csv out.csv]

Each evaluation is a real `kbench.schedule.child.evaluate` in a fresh worker process (builds cached first),
with the parameter sweep off (it is not a guard; `--sweep 8` times evaluations as `kbench eval` runs
them). `--samples N` fixes the timing loop at N rounds both ways: a reference whose own time moves between
levels (bench/reference_drift.py) otherwise makes the loop run from 10 rounds to its whole budget, which
says nothing of the guards. Prints the median wall time per setting and the overhead of the guards in percent, then where the
time went: the worker's phases (median seconds, guards off and on) and the guards' own entries, and the
samples the timing loop took per side.
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
from dataclasses import replace
from pathlib import Path

from kbench.config import RunConfig
from kbench.schedule.child import EvaluationOptions, evaluate

CASES = [
    ("problems/convt1d.py", "solutions/convt1d.py"),
    ("problems/convt1d_dilated.py", "solutions/convt1d_dilated/general.py"),
    ("problems/convt2d_asym.py", "solutions/convt2d_asym/general.py"),
    ("tests/fixtures/cheats/problems/convt1d_small.py", "tests/fixtures/cheats/honest_cuda_kernel.py"),
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="evaluations per setting (the median is shown)")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--csv", type=Path, default=None)
    parser.add_argument("--sweep", type=int, default=0,
                        help="parameter sweep per evaluation (0, the default, leaves it out: it is not a guard; "
                             "kbench eval's default is 8)")
    parser.add_argument("--samples", type=int, default=0,
                        help="timing rounds per evaluation, fixed (0, the default: as kbench runs, until precise)")
    parser.add_argument("--only", default="", help="only the cases whose solution path contains this")
    args = parser.parse_args()
    config = RunConfig(device=args.device, sweep=args.sweep)
    if args.samples:
        config = replace(config, min_samples=args.samples, max_samples=args.samples)
    rows = []
    for problem, solution in [case for case in CASES if args.only in case[1]]:
        evaluate(Path(problem), Path(solution), replace(config, time=False, trials=1),
                 EvaluationOptions(build_only=True))
        walls = {True: [], False: []}
        phases = {True: [], False: []}
        statuses = set()
        for _ in range(args.repeats):
            for guards_on in (False, True):
                result = evaluate(Path(problem), Path(solution), replace(config, guards=guards_on))
                walls[guards_on].append(result.wall_s)
                print(f"  guards {'on' if guards_on else 'off'}: {result.wall_s:.2f} s", flush=True)
                phases[guards_on].append(_phases(result))
                statuses.add(f"{result.status}{'+' + ','.join(result.flags) if result.flags else ''}")
                if result.reference_alone is not None and result.reference_timing is not None:
                    clocks, alone, during = result.clocks, result.reference_alone, result.reference_timing
                    print(f"  reference alone {alone.median_ms:.3g} ms, in the rounds {during.median_ms:.3g} ms; "
                          f"other threads' CPU per call {_ms(alone.others_cpu_median_ms)} and "
                          f"{_ms(during.others_cpu_median_ms)}; SM MHz in the rounds "
                          f"{clocks.sm_mhz_start if clocks else None}-{clocks.sm_mhz_end if clocks else None}",
                          flush=True)
                if result.status != "correct" or result.flags:
                    print(f"  {result.status}: {result.message}", flush=True)
        off, on = statistics.median(walls[False]), statistics.median(walls[True])
        rows.append({"solution": solution, "status": " ".join(sorted(statuses)), "guards_off_s": round(off, 2),
                     "guards_on_s": round(on, 2), "overhead_pct": round(100 * (on - off) / off, 1)})
        print(rows[-1], flush=True)
        _print_phases(phases)
    print(f"\n{'solution':48} {'status':24} {'guards off s':>12} {'guards on s':>12} {'overhead':>9}")
    for row in rows:
        print(f"{row['solution']:48} {row['status']:24} {row['guards_off_s']:>12} {row['guards_on_s']:>12} "
              f"{row['overhead_pct']:>8}%")
    if args.csv:
        with args.csv.open("w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    return 0


def _ms(value) -> str:
    return "-" if value is None else f"{value:.3g} ms"


def _phases(result) -> dict[str, float]:
    """The worker's seconds per phase, plus the samples each side took."""
    seconds = {}
    for entry in filter(None, result.phase_s.split("; ")):
        name, _, value = entry.rpartition(" ")
        seconds[name] = float(value)
    for side in ("reference", "candidate"):
        timing = getattr(result, f"{side}_timing")
        if timing is not None:
            seconds[f"samples of the {side}"] = len(timing.samples_ms)
            seconds[f"{side} median ms"] = timing.median_ms
    if result.reference_alone is not None:
        seconds["reference alone median ms"] = result.reference_alone.median_ms
    seconds["wall (parent)"] = result.wall_s or 0.0
    return seconds


def _print_phases(phases: dict[bool, list[dict[str, float]]]) -> None:
    names = dict.fromkeys(name for runs in phases.values() for run in runs for name in run)
    print(f"  {'phase (median)':40} {'guards off':>10} {'guards on':>10}")
    for name in names:
        medians = [statistics.median([run.get(name, 0.0) for run in phases[on]]) for on in (False, True)]
        print(f"  {name:40} {medians[0]:>10.3g} {medians[1]:>10.3g}")


if __name__ == "__main__":
    sys.exit(main())
