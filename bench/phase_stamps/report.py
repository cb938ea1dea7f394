"""Per-call medians (µs) of each phase of the timed batches (16 calls or more, not calibrations), per side and batch
length, from bench/phase_stamps' files: python3 bench/phase_stamps/report.py FOLDER

wake: request to the runner's start (per batch); queue: its calls; named: naming held outputs; gpuwait: its
synchronisation; reply: its end to the judge's receipt (per batch); parse, copies (lookups and launch), jsync (the
judge's synchronisation: its copies), close (per batch); total: request to the judge's synchronisation; rcpu and
rproc: the runner's thread's and process's CPU time over its calls; switches, affinity, threads: the runner's
context switches over its calls, its CPUs, its threads; judge cpu: the judge's CPU time while it waited."""
import ast
import statistics
import sys
from pathlib import Path

PHASES = {
    "wake": lambda j, r, n: (r["start"] - j[0]) * 1e6,
    "queue/call": lambda j, r, n: (r["named0"] - r["start"]) * 1e6 / n,
    "named/call": lambda j, r, n: (r["named1"] - r["named0"]) * 1e6 / n,
    "gpuwait/call": lambda j, r, n: (r["sync1"] - r["sync0"]) * 1e6 / n,
    "reply": lambda j, r, n: (j[1] - r["end"]) * 1e6,
    "parse/call": lambda j, r, n: (j[2] - j[1]) * 1e6 / n,
    "copies/call": lambda j, r, n: (j[3] - j[2]) * 1e6 / n,
    "jsync/call": lambda j, r, n: (j[4] - j[3]) * 1e6 / n,
    "close": lambda j, r, n: (j[5] - j[4]) * 1e6,
    "total/call": lambda j, r, n: (j[4] - j[0]) * 1e6 / n,
    "rcpu/call": lambda j, r, n: (r["cpu1"] - r["cpu0"]) * 1e6 / n,
    "rproc/call": lambda j, r, n: (r["pcpu1"] - r["pcpu0"]) * 1e6 / n,
    "switches": lambda j, r, n: r["sw1"] - r["sw0"],
    "affinity": lambda j, r, n: r["affinity"],
    "threads": lambda j, r, n: r["threads"],
}


def main() -> None:
    rows = [ast.literal_eval(line) for path in sorted(Path(sys.argv[1]).glob("phases-*.txt"))
            for line in path.read_text().splitlines()]
    groups: dict[tuple, list] = {}
    for row in rows:
        if not row["kept"] and row["count"] >= 16:
            groups.setdefault(("ref" if row["ref"] else "cand", row["count"], row["hold"]), []).append(row)
    for (side, count, hold), items in sorted(groups.items()):
        cells = []
        for name, phase in PHASES.items():
            try:
                cells.append(f"{name} {statistics.median(phase(r['judge'], r['runner'], count) for r in items):.1f}")
            except KeyError:  # a stamp this batch has not (no held outputs: no naming)
                cells.append(f"{name} -")
        judge_cpu = statistics.median(r["judge_cpu"] for r in items) * 1e6 / count
        collections = [c for r in items for c in r.get("collections", ())]
        collected_us = sum(seconds for _, seconds in collections) * 1e6
        print(f"{side} n={count} hold={hold} batches={len(items)}: {', '.join(cells)}, judge cpu/call {judge_cpu:.1f}, "
              f"judge's collections in its batches {len(collections)} ({collected_us:.0f} us in all)")


if __name__ == "__main__":
    main()
