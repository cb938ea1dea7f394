"""What Ray adds to each evaluation: the same evaluations through LocalExecutor and RayExecutor on this host.

    PYTHONPATH=$PWD python3 bench/ray_overhead.py [--gpus N] [--ray-address auto] [--cache-dir DIR] [--repeat R]
                                                  [--pairs P]

Builds are cached first. Then every pair is evaluated one at a time, by the local executor and then by
Ray, each timed on the driver from the call to its Result (for Ray: submitting the task, scheduling it,
the Ray worker, the Result's way back). Prints each evaluation's wall time and the median overhead of
Ray over local. Without --gpus: the C++ and PyTorch fixtures of tests/fixtures on the CPU; with
--gpus N: solutions/ and the GPU fixtures of bench/sweep_bench.py, local evaluations taking the N GPUs
in turn and Ray tasks one GPU each. Without --ray-address a Ray instance of this machine is started.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from kbench.config import RunConfig
from kbench.schedule.ray_executor import RayExecutor
from kbench.schedule.executor import LocalExecutor
from kbench.solution import find_pairs

sys.path.insert(0, str(Path(__file__).parent))
from sweep_bench import EXTRA_PAIRS  # noqa: E402  (the GPU fixtures, one list for both benches)

FIXTURES = Path("tests/fixtures")
CPU_PAIRS = [(FIXTURES / "problems" / "axpy.py", FIXTURES / "solutions" / "axpy" / name)
             for name in ("correct.py", "correct_plain.py", "wrong_shape.py", "segfault.py")] + [
    (FIXTURES / "problems" / "linear.py", FIXTURES / "solutions" / "linear" / "correct.py")]


def timed(evaluate, *arguments):
    started = time.monotonic()
    result = evaluate(*arguments)
    return result, time.monotonic() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=0, help="evaluate on N GPUs (default: the CPU)")
    parser.add_argument("--ray-address", default=None, help="Ray cluster to join (default: start one here)")
    parser.add_argument("--cache-dir", type=Path, default=None)
    parser.add_argument("--repeat", type=int, default=2, help="rounds over the pairs")
    parser.add_argument("--pairs", type=int, default=None, help="only the first P pairs")
    parser.add_argument("--time-budget", type=float, default=1.0, help="seconds of timing per evaluation")
    parser.add_argument("--settle", type=float, default=3.0,
                        help="seconds of rest after each evaluation, so the waiting workers that each executor "
                             "starts meanwhile are warm (their warm-up is not what this bench times)")
    args = parser.parse_args()
    if args.gpus:
        pairs = find_pairs(Path("problems"), Path("solutions"))[0] + EXTRA_PAIRS
        local_devices = [f"cuda:{index}" for index in range(args.gpus)]
    else:
        pairs, local_devices = CPU_PAIRS, ["cpu"]
    pairs = pairs[:args.pairs]
    cache_dir = args.cache_dir or Path(tempfile.mkdtemp(prefix="kbench-ray-overhead-"))
    config = RunConfig(device=local_devices[0], cache_dir=cache_dir, time_budget_s=args.time_budget, sweep=0)

    local = LocalExecutor()
    cores = os.cpu_count() or 1
    with ThreadPoolExecutor(max_workers=cores) as pool:  # cached builds first: the bench times evaluations
        list(pool.map(lambda pair: local.build(pair, config, local_devices[0], "", max(1, cores // len(pairs))),
                      pairs))
    local_devices = local.evaluation_devices(local_devices)  # waiting workers, as a sweep starts them
    on_ray = RayExecutor(args.ray_address)
    ray_device = on_ray.device_for("cuda" if args.gpus else "cpu")

    print(f"{'solution':48} {'status local / ray':28} {'local s':>8} {'ray s':>8} {'overhead s':>10}  ray device")
    local_times, ray_times, mismatched = [], [], []
    for round_index in range(args.repeat):
        for index, pair in enumerate(pairs):
            local_result, local_s = timed(local.evaluate, pair, config, local_devices[index % len(local_devices)],
                                          "bench")
            time.sleep(args.settle)
            ray_result, ray_s = timed(on_ray.evaluate, pair, config, ray_device, "bench")
            time.sleep(args.settle)
            local_times.append(local_s)
            ray_times.append(ray_s)
            if local_result.status != ray_result.status:
                mismatched.append(str(pair[1]))
            statuses = f"{local_result.status} / {ray_result.status}"
            print(f"{str(pair[1])[-48:]:48} {statuses:28} {local_s:>8.2f} {ray_s:>8.2f} {ray_s - local_s:>10.2f}"
                  f"  {ray_result.device}")
    overheads = [ray_s - local_s for local_s, ray_s in zip(local_times, ray_times)]
    median_overhead = statistics.median(overheads)
    print(f"\n{len(overheads)} evaluations each; wall per evaluation: local median "
          f"{statistics.median(local_times):.2f} s, Ray median {statistics.median(ray_times):.2f} s")
    print(f"Ray's overhead per evaluation: median {median_overhead:.2f} s "
          f"({median_overhead / statistics.median(local_times):.0%} of local), max {max(overheads):.2f} s; "
          f"the first {overheads[0]:.2f} s (a new Ray worker)")
    print(f"verdicts equal: {not mismatched} {mismatched or ''}")
    return 0 if not mismatched else 1


if __name__ == "__main__":
    sys.exit(main())
