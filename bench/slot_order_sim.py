"""Simulated sweeps: how the compile-slot order does against the floor, by number of builds.

    python3 bench/slot_order_sim.py

No GPU and no compiler: list scheduling of each build's two compiles (device and host) on 16 slots,
with durations drawn like the H200 sweep bench measured them (device ~48 s, 5% failing early at 12 s;
host ~15 s; evaluations 0.7-8 s on one GPU), compilers starting 6 or 11.4 s into the sweep. A build's
evaluation starts when both its compiles are done and the GPU is free. Prints wall / max(compile CPU
/ slots, GPU time) for a device compile served `lookahead` builds early (kbench: slots // 2 = 8).
"""

from __future__ import annotations

import heapq
import random
import statistics

SLOTS = 16
EVALUATION_S = [0.7, 1.1, 1.3, 1.5, 1.7, 2, 2.3, 2.8, 3, 3.4, 4, 5.5, 8]


def simulate(builds: list[tuple[float, float, float]], lookahead: int, start_s: float) -> float:
    """Wall time of a sweep of `builds` (device s, host s, evaluation s), in build order."""
    waiting = []
    for rank, (device_s, host_s, _) in enumerate(builds):
        heapq.heappush(waiting, (rank - lookahead, 0, rank, device_s))
        heapq.heappush(waiting, (rank, 1, rank, host_s))
    running: list[tuple[float, int]] = []
    now, compiles_left, built_at = start_s, [2] * len(builds), {}
    while waiting or running:
        while waiting and len(running) < SLOTS:
            _, _, rank, seconds = heapq.heappop(waiting)
            heapq.heappush(running, (now + seconds, rank))
        now, rank = heapq.heappop(running)
        compiles_left[rank] -= 1
        if not compiles_left[rank]:
            built_at[rank] = now
    gpu_free = 0.0
    for rank in sorted(built_at, key=built_at.get):
        gpu_free = max(gpu_free, built_at[rank]) + builds[rank][2]
    return max(now, gpu_free)


def draw(count: int, rng: random.Random) -> list[tuple[float, float, float]]:
    return [(12.0 if rng.random() < 0.05 else rng.gauss(48, 3), rng.gauss(15, 1.5), rng.choice(EVALUATION_S))
            for _ in range(count)]


def main() -> None:
    rng = random.Random(2)
    lookaheads = (0, 4, 8, 12)
    print(f"{'start s':>7} {'builds':>6} " + " ".join(f"{'lookahead ' + str(value):>12}" for value in lookaheads))
    for start_s in (11.4, 6.0):
        for count in (24, 36, 48, 60, 100):
            sweeps = [draw(count, rng) for _ in range(30)]
            ratios = []
            for lookahead in lookaheads:
                ratios.append(statistics.mean(
                    simulate(builds, lookahead, start_s)
                    / max(sum(device + host for device, host, _ in builds) / SLOTS, sum(b[2] for b in builds))
                    for builds in sweeps))
            print(f"{start_s:>7} {count:>6} " + " ".join(f"{ratio:>12.3f}" for ratio in ratios))


if __name__ == "__main__":
    main()
