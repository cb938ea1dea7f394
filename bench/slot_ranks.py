"""Which build each compile was served as: a cold `run_pairs` of some solutions, then the compile slots' history
(the build rank the slot server found from each compiler's process tree, its kind, and when it queued, got its
slot and let it go). Every rank must be a real build's (0 to the number of pairs less one), none 1073741824
(slots.LAST_RANK: a compile from outside every build).

    PYTHONPATH=$PWD python3 bench/slot_ranks.py CACHE_DIR SOLUTION_SUFFIX... [--device cuda:0]

SOLUTION_SUFFIXes pick solutions under solutions/ by the end of their path ("gelu.py", "gelu/simple.py").
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from kbench.config import RunConfig
from kbench.schedule.executor import LocalExecutor
from kbench.schedule.scheduler import run_pairs
from kbench.solution import find_pairs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cache_dir", type=Path, help="a build cache (empty for a cold run)")
    parser.add_argument("suffixes", nargs="+")
    parser.add_argument("--device", default="cuda:0")
    arguments = parser.parse_args()
    pairs, _ = find_pairs(Path("problems"), Path("solutions"))
    pairs = [pair for pair in pairs if any(str(pair[1]).endswith(suffix) for suffix in arguments.suffixes)]
    executor = LocalExecutor()
    started = time.monotonic()
    results = run_pairs(pairs, RunConfig(device=arguments.device, cache_dir=arguments.cache_dir, sweep=2),
                        devices=[arguments.device], executor=executor)
    print(f"{len(results)} pairs in {time.monotonic() - started:.1f} s")
    for result in results:
        print(f"  {result.solution}: {result.status}")
    print(f"{'rank':>5} {'kind':5} {'queued s':>9} {'granted s':>9} {'released s':>10} within share")
    for entry in executor.compiles:
        print(f"{entry.rank:5d} {entry.kind:5} {entry.queued_s:9.2f} {entry.granted_s or 0:9.2f} "
              f"{entry.released_s or 0:10.2f} {entry.within_share}")
    ranks = sorted({entry.rank for entry in executor.compiles})
    print(f"ranks seen: {ranks}; every one a build's: {all(rank < len(pairs) for rank in ranks)}")


if __name__ == "__main__":
    main()
