"""A C++ candidate's cold build: torch's own `load_inline` against kbench's build, on this machine, in one run.

    PYTHONPATH=$PWD python3 bench/build_cost.py [SOLUTION PROBLEM] [--rounds 3]

Default pair: the README's C++ swish solution. Each round builds the solution cold both ways, alternating:
torch's way is a fresh Python importing the solution with an empty TORCH_EXTENSIONS_DIR (the time inside
the import, torch already loaded); kbench's way is `kbench eval`'s build phase in a fresh build cache where
torch's headers were precompiled before for the solution's flags (kbench/extensions/primer.py; its time is
printed too: a sweep prepares it once per build cache for the default flags and for the allow-listed flags its
candidates pass, as the default pair's -O3). Prints the medians and their ratio.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kbench.config import RunConfig
from kbench.extensions import primer
from kbench.schedule.executor import LocalExecutor
from kbench.solution import Solution

REPO = Path(__file__).resolve().parent.parent
SWISH = (REPO / "examples" / "solutions" / "swish" / "cpp.py", REPO / "examples" / "problems" / "swish.py")
TORCH_WAY = """
import importlib.util, sys, time
import torch
started = time.monotonic()
spec = importlib.util.spec_from_file_location("solution", sys.argv[1])
spec.loader.exec_module(importlib.util.module_from_spec(spec))
print(time.monotonic() - started)
"""
def torch_build_s(solution: Path) -> float:
    with tempfile.TemporaryDirectory(prefix="kbench-torch-ext-") as folder:
        completed = subprocess.run([sys.executable, "-c", TORCH_WAY, str(solution)], capture_output=True, text=True,
                                   env={**os.environ, "TORCH_EXTENSIONS_DIR": folder}, check=True)
    return float(completed.stdout.strip().splitlines()[-1])


def kbench_build_s(solution: Path, problem: Path, cache: Path) -> float:
    result = LocalExecutor().build((problem, solution), RunConfig(device="cpu", cache_dir=cache), "cpu", "", 2)
    if result.status != "built":
        raise SystemExit(f"kbench could not build {solution}: {result.status}: {result.message}")
    return result.build_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("solution", type=Path, nargs="?", default=SWISH[0])
    parser.add_argument("problem", type=Path, nargs="?", default=SWISH[1])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cflags", nargs="*", default=None,
                        help="the extra_cflags the precompiled header is made for [default: those the solution "
                             "passes, as a sweep primes them]")
    arguments = parser.parse_args()
    if arguments.cflags is None:
        declared = Solution.read(arguments.solution).declared_cflags
        arguments.cflags = primer.primable(declared[0]) if declared else []
    torch_times, kbench_times = [], []
    with tempfile.TemporaryDirectory(prefix="kbench-build-cost-") as scratch:
        for round_index in range(arguments.rounds):
            cache = Path(scratch) / f"cache{round_index}"
            started = time.monotonic()
            subprocess.run([sys.executable, "-m", "kbench.extensions.primer",
                            *primer.arguments(cache, False, arguments.cflags)], check=True,
                           env={**os.environ, "PYTHONPATH": str(REPO)})
            print(f"round {round_index + 1}: preparing the cache (torch's headers precompiled) "
                  f"{time.monotonic() - started:6.1f} s", flush=True)
            torch_times.append(torch_build_s(arguments.solution))
            kbench_times.append(kbench_build_s(arguments.solution, arguments.problem, cache))
            print(f"round {round_index + 1}: torch load_inline {torch_times[-1]:6.1f} s   "
                  f"kbench build {kbench_times[-1]:6.1f} s", flush=True)
    torch_median, kbench_median = statistics.median(torch_times), statistics.median(kbench_times)
    print(f"\n{'':28}{'median':>10}")
    print(f"{'torch load_inline, cold':28}{torch_median:9.1f}s")
    print(f"{'kbench build, cold':28}{kbench_median:9.1f}s")
    print(f"{'kbench / torch':28}{kbench_median / torch_median:10.2f}")


if __name__ == "__main__":
    main()
