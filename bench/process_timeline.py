"""Where a command's CPU goes over time: every process on the machine sampled from /proc, by kind.

    python3 bench/process_timeline.py [--every 0.25] [--bucket 2] [--out timeline.csv] -- COMMAND...

Runs COMMAND and, while it runs, reads every process's CPU time (/proc/PID/stat) every `--every` seconds.
Prints, per `--bucket` seconds, how many cores each kind of process used on average (CPU seconds over the
bucket's seconds): the host compiler (cc1plus), nvcc's steps (cicc, cudafe++, ptxas, the rest of nvcc),
ninja, Python processes and everything else; then when each kind first and last ran, and the command's
exit status and wall time. A build sweep's picture: when compilers start, whether the cores are full, the
tail where they idle. Linux only. A process that starts and ends between two samples is not seen: at a
quarter of a second, only short helpers (sh, ld, fatbinary) are missed.
"""

from __future__ import annotations

import argparse
import csv
import os
import subprocess
import sys
import time
from pathlib import Path

KINDS = {"cc1plus": "c++", "cicc": "cicc", "cudafe++": "cudafe++", "ptxas": "ptxas", "nvcc": "nvcc", "gcc": "nvcc",
         "c++": "nvcc", "g++": "nvcc", "ninja": "ninja", "ld": "link", "collect2": "link"}
COLUMNS = ["c++", "cicc", "cudafe++", "ptxas", "nvcc", "link", "ninja", "python", "other"]
TICKS = os.sysconf("SC_CLK_TCK")


def kind_of(name: str) -> str:
    if name.startswith("python") or name.startswith("pt_") or name.startswith("kbench"):
        return "python"
    return KINDS.get(name, "other")


def sample() -> dict[int, tuple[str, float]]:
    """{pid: (kind, CPU seconds used so far)} for every process readable now."""
    seen, own = {}, str(os.getpid())
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or entry.name == own:
            continue
        try:
            text = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        name = text[text.index("(") + 1:text.rindex(")")]
        fields = text[text.rindex(")") + 2:].split()
        seen[int(entry.name)] = (kind_of(name), (int(fields[11]) + int(fields[12])) / TICKS)
    return seen


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--every", type=float, default=0.25, help="seconds between samples")
    parser.add_argument("--bucket", type=float, default=2.0, help="seconds per printed row")
    parser.add_argument("--out", type=Path, default=None, help="also write every sample's cores by kind here")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to run after --")

    before = sample()
    started = time.monotonic()
    process = subprocess.Popen(command)
    rows = []  # (seconds since start, {kind: cores used since the previous sample})
    previous, previous_time = before, started
    while True:
        done = process.poll() is not None
        time.sleep(0 if done else args.every)
        now, current = time.monotonic(), sample()
        used: dict[str, float] = {}
        for pid, (kind, cpu) in current.items():
            _, earlier = previous.get(pid, (kind, 0.0 if pid not in before else cpu))
            used[kind] = used.get(kind, 0.0) + max(0.0, cpu - earlier) / max(now - previous_time, 1e-9)
        rows.append((now - started, used))
        previous, previous_time = current, now
        if done:
            break
    wall = time.monotonic() - started

    print(f"\ncores used by kind, every {args.bucket:g} s (a process seen first mid-run counts from its start)")
    print(f"{'s':>6} " + " ".join(f"{column:>8}" for column in COLUMNS) + f" {'all':>6}")
    bucket_end, sums, count = args.bucket, {}, 0
    for seconds, used in rows + [(float("inf"), {})]:
        if seconds > bucket_end and count:
            means = {kind: total / count for kind, total in sums.items()}
            print(f"{bucket_end:>6.1f} " + " ".join(f"{means.get(column, 0):>8.1f}" for column in COLUMNS)
                  + f" {sum(means.values()):>6.1f}")
            sums, count = {}, 0
            while seconds > bucket_end and seconds != float("inf"):
                bucket_end += args.bucket
        for kind, cores in used.items():
            sums[kind] = sums.get(kind, 0.0) + cores
        count += 1
    print("\nkind      first s   last s   CPU s")
    for column in COLUMNS:
        active = [(seconds, used[column]) for seconds, used in rows if used.get(column, 0) > 0.05]
        if active:
            cpu = sum(used.get(column, 0) * step for (seconds, used), step in
                      zip(rows, [rows[0][0]] + [b[0] - a[0] for a, b in zip(rows, rows[1:])]))
            print(f"{column:8} {active[0][0]:>8.1f} {active[-1][0]:>8.1f} {cpu:>7.1f}")
    print(f"\nexit status {process.returncode}, wall {wall:.1f} s, {os.cpu_count()} cores")
    if args.out:
        with args.out.open("w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(["s", *COLUMNS])
            for seconds, used in rows:
                writer.writerow([f"{seconds:.2f}", *(f"{used.get(column, 0):.2f}" for column in COLUMNS)])
    return process.returncode


if __name__ == "__main__":
    sys.exit(main())
