"""A synthetic results CSV shaped like a KernelBench sweep: mixed statuses, flags and speedups.

Used by the report tests, and by hand to look at the plot of a large run:

    python3 tests/synthetic_results.py /tmp/level1.csv /path/to/KernelBench/level1
    kbench report /tmp/level1.csv --plot /tmp/level1.png
"""

from __future__ import annotations

import csv
import random
import re
import sys
from pathlib import Path

RUN_ID = "20261122-101500-synthetic"
DEVICE = "NVIDIA H200"
COLUMNS = ["time", "run_id", "problem", "solution", "status", "flags", "speedup", "ref_median_ms",
           "cand_median_ms", "sizes", "device", "device_name", "message", "first_mismatch", "sweep_failure",
           "problem_path"]
FAILURE_MESSAGES = {
    "compile_error": "cuda.cu(79): error: identifier \"threadsPerBlock\" has already been declared",
    "load_error": "TypeError: load_inline() got an unexpected keyword argument 'cuda_headers'",
    "runtime_error": "RuntimeError: CUDA error: an illegal memory access was encountered",
    "incorrect": "trial 0: output[0, 3, 17] = 0.5, expected 1.22898 (4096 elements off)",
    "rejected": "the timed stream saw 0.02 ms of 1.4 ms of device work",
    "timeout": "no result within 900 s (running)",
    "crashed": "worker died with SIGSEGV",
}
NOTING = ["sweep_failed", "low_precision", "calls_reference_op", "weak_check"]


def synthetic_rows(stems: list[str], seed: int = 0) -> list[dict]:
    """One to three solutions per problem; about half correct, a few flagged, the rest failing."""
    rng = random.Random(seed)
    rows = []
    for stem in stems:
        number = re.match(r"\d+", stem)
        for sample in range(rng.randint(1, 3)):
            name = f"level_1_problem_{number.group() if number else 0}_sample_{sample}_kernel.py"
            rows.append(_row(rng, stem, f"runs/level1/{name}"))
    return rows


def _row(rng: random.Random, stem: str, solution: str) -> dict:
    status = rng.choices(["correct"] + list(FAILURE_MESSAGES), weights=[10, 3, 2, 2, 3, 1, 1, 1])[0]
    row = {"time": "2026-11-22T10:15:00+00:00", "run_id": RUN_ID, "problem": stem, "solution": solution,
           "status": status, "flags": "", "sizes": "", "device": "cuda:0", "device_name": DEVICE}
    if status == "rejected":
        row["flags"] = "side_stream"
    if status != "correct":
        row["message"] = FAILURE_MESSAGES[status]
        return row
    speedup = round(rng.lognormvariate(0.0, 1.0), 3)
    reference = round(rng.uniform(0.05, 40.0), 3)
    row.update(speedup=speedup, ref_median_ms=reference, cand_median_ms=round(reference / speedup, 4))
    if rng.random() < 0.15:
        row["flags"] = rng.choice(NOTING)
        row["sweep_failure"] = "stride=2 length=37: output[0, 3, 17] = 0, expected 1.22898" \
            if row["flags"] == "sweep_failed" else ""
    elif rng.random() < 0.1:
        row["flags"] = "throttled"
    return row


def write_csv(path: Path, rows: list[dict]) -> Path:
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS, restval="")
        writer.writeheader()
        writer.writerows(rows)
    return path


if __name__ == "__main__":
    stems = sorted(path.stem for path in Path(sys.argv[2]).glob("*.py"))
    write_csv(Path(sys.argv[1]), synthetic_rows(stems))
