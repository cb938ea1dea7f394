"""Do KernelBench references run at kbench's reduced CPU sizes and in its sweep configurations?

    PYTHONPATH=$PWD python3 bench/reference_sizes.py [--kernelbench ../shared/kernelbench]
        [--out table.txt] [--json rows.json]
    python3 bench/reference_sizes.py --compare before.json after.json

For every file of level1..level3: the small sizes (params.small_overrides), then Model and a
forward under problem.overridden, seeded as the worker seeds them; then a sweep the way the worker
runs one (worker._sweep): configurations from params.iter_configurations capped at
params.SMALL_INPUT_BYTES, at most 4 draws per requested configuration, stopping once 8 ran; a
configuration whose reference fails to build or run, or returns only empty tensors, is skipped.

Each problem runs in its own subprocess (two at a time) with a timeout; the child prints one JSON
line per step, so a timeout still reports what had finished. Uses only APIs that also exist at
commit c30b6de, so the same script measures the code before the fix (PYTHONPATH to a worktree).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from itertools import islice
from pathlib import Path

LEVELS = ("level1", "level2", "level3")
SWEEP = 8                       # configurations a sweep asks for (kbench's default --sweep)
ATTEMPTS_PER_CONFIGURATION = 4  # worker._SWEEP_ATTEMPTS_PER_CONFIGURATION
SEED = 42                       # RunConfig.seed


def reason(stage: str, error: BaseException) -> str:
    """One line: the stage, the error, and for a bare `assert` the line that raised it."""
    import traceback

    lines = str(error).strip().splitlines()
    text = lines[0][:160] if lines else ""
    if not text:
        frames = traceback.extract_tb(error.__traceback__)
        text = f"at {frames[-1].line}" if frames and frames[-1].line else ""
    return f"{stage}: {type(error).__name__}: {text}".rstrip(": ")


def run_reference(module, overrides: dict, input_seed: int) -> str | None:
    """None if the reference builds and runs at these overrides, else why not (one line)."""
    import torch

    from kbench.problem import overridden

    with torch.no_grad(), overridden(module, overrides):
        torch.manual_seed(SEED)
        try:
            model = module.Model(*module.get_init_inputs())
        except Exception as error:
            return reason("build", error)
        torch.manual_seed(input_seed)
        try:
            with torch.device("cpu"):
                inputs = list(module.get_inputs())
            output = model(*inputs)
        except Exception as error:
            return reason("forward", error)
    outputs = output if isinstance(output, (tuple, list)) else [output]
    if outputs and all(isinstance(o, torch.Tensor) and o.numel() == 0 for o in outputs):
        return "empty output"
    return None


def measure(path: Path, memory_gb: float) -> None:
    """The child: one JSON line per step on stdout."""
    import resource

    # Broadcasting references can ask for tens of GB at some sweep sizes: fail that one instead.
    limit = int(memory_gb * (1 << 30))
    resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    import torch

    from kbench import params
    from kbench.problem import describe_overrides, load_module

    torch.set_num_threads(1)  # two children share two cores

    def emit(**fields):
        print(json.dumps(fields), flush=True)

    try:
        module = load_module(path, "bench_problem")
        small = params.small_overrides(module)
    except Exception as error:
        emit(step="small", error=reason("load", error), sizes="")
        return
    emit(step="small", error=run_reference(module, small, SEED), sizes=describe_overrides(small))
    cap = params.SMALL_INPUT_BYTES
    configurations = params.iter_configurations(module, SEED, cap)
    ran = 0
    for index, configuration in enumerate(islice(configurations, SWEEP * ATTEMPTS_PER_CONFIGURATION)):
        if ran == SWEEP:
            break
        error = run_reference(module, configuration, SEED + 1000 + index)
        ran += error is None
        emit(step="sweep", error=error, sizes=describe_overrides(configuration))


def child(path: Path, timeout_s: float, memory_gb: float, pythonpath: str) -> dict:
    """Run one problem in a subprocess; a timeout or crash keeps the steps it printed."""
    started = time.monotonic()
    command = [sys.executable, __file__, "--one", str(path), "--memory-gb", str(memory_gb)]
    env = {**os.environ, "PYTHONPATH": pythonpath, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}
    try:
        completed = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, env=env)
        stdout, ending = completed.stdout, None
        if completed.returncode != 0:
            last = (completed.stderr.strip().splitlines() or ["no output"])[-1]
            ending = f"child exited {completed.returncode}: {last[:160]}"
    except subprocess.TimeoutExpired as expired:
        stdout = expired.stdout.decode() if isinstance(expired.stdout, bytes) else (expired.stdout or "")
        ending = f"timeout after {timeout_s:.0f} s"
    steps = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    print(f"{path.parent.name}/{path.name}: {time.monotonic() - started:.0f} s {ending or ''}", file=sys.stderr)
    return {"level": path.parent.name, "problem": path.name, "steps": steps, "ending": ending,
            "seconds": round(time.monotonic() - started, 1)}


def problem_files(root: Path) -> list[Path]:
    def number(path: Path) -> int:
        head = path.name.split("_", 1)[0]
        return int(head) if head.isdigit() else 10 ** 6
    return [path for level in LEVELS for path in sorted((root / level).glob("*.py"), key=number)]


def summarize(row: dict) -> dict:
    """Counts and failure lines of one problem."""
    small = next((step for step in row["steps"] if step["step"] == "small"), None)
    sweep = [step for step in row["steps"] if step["step"] == "sweep"]
    skipped = [step for step in sweep if step["error"]]
    failures = []
    if small is None:
        failures.append(f"small sizes: {row['ending']}")
    elif small["error"]:
        failures.append(f"small sizes ({small['sizes']}): {small['error']}")
    if skipped:
        first = skipped[0]
        failures.append(f"sweep: {len(skipped)} skipped, first ({first['sizes']}): {first['error']}")
    if row["ending"] and small is not None:
        failures.append(f"stopped after {len(sweep)} sweep draws: {row['ending']}")
    return {"small_ok": bool(small) and not small["error"], "timeout": bool(row["ending"]),
            "ran": len(sweep) - len(skipped), "skipped": len(skipped), "failures": failures}


def level_table(rows: list[dict]) -> list[str]:
    header = (f"{'level':<8}{'problems':>9}{'ref runs small':>16}{'ref fails small':>17}{'timeout/crash':>15}"
              f"{'sweep ran':>11}{'sweep skipped':>15}{'problems w/ skips':>19}{'sweeps < 8':>12}")
    lines = [header, "-" * len(header)]
    for level in LEVELS + ("all",):
        chosen = [summarize(row) for row in rows if level in ("all", row["level"])]
        if not chosen:
            continue
        small_ok = sum(s["small_ok"] for s in chosen)
        timeouts = sum(s["timeout"] for s in chosen)
        lines.append(f"{level:<8}{len(chosen):>9}{small_ok:>16}{len(chosen) - small_ok:>17}{timeouts:>15}"
                     f"{sum(s['ran'] for s in chosen):>11}{sum(s['skipped'] for s in chosen):>15}"
                     f"{sum(s['skipped'] > 0 for s in chosen):>19}{sum(s['ran'] < SWEEP for s in chosen):>12}")
    return lines


def failure_table(rows: list[dict]) -> list[str]:
    lines = []
    for row in rows:
        for failure in summarize(row)["failures"]:
            lines.append(f"{row['level']:<8}{row['problem'][:48]:<50}{failure}")
    return lines or ["(none)"]


def skip_reasons(rows: list[dict], top: int = 8) -> list[str]:
    """The commonest reasons sweep configurations were skipped, per level (numbers folded to N)."""
    import re
    from collections import Counter

    lines = []
    for level in LEVELS:
        counts = Counter((re.sub(r"\d+", "N", step["error"])[:120], row["problem"]) for row in rows
                         if row["level"] == level for step in row["steps"] if step["step"] == "sweep" and step["error"])
        by_reason = Counter()
        problems: dict[str, set] = {}
        for (text, problem), count in counts.items():
            by_reason[text] += count
            problems.setdefault(text, set()).add(problem)
        for text, count in by_reason.most_common(top):
            lines.append(f"{level:<8}{count:>6} skips in {len(problems[text]):>3} problems  {text}")
    return lines or ["(none)"]


def render(rows: list[dict], label: str) -> str:
    seconds = sum(row["seconds"] for row in rows)
    parts = [f"References at kbench's reduced CPU sizes and in an {SWEEP}-configuration sweep ({label}); "
             f"{len(rows)} problems, {seconds:.0f} s of child time", "", *level_table(rows), "",
             "Why not (one line per failure; 'sweep' lines count configurations skipped because the "
             "reference failed there):", *failure_table(rows), "",
             "Commonest reasons for skipped sweep configurations:", *skip_reasons(rows), "",
             "Each child runs with torch.set_num_threads(1) and a data-size limit (--memory-gb, default 4 GB):",
             "'can't allocate memory' means a reference needed more than that at those sizes."]
    return "\n".join(parts) + "\n"


def compare(before_path: Path, after_path: Path) -> str:
    """One line per level: references that run at small sizes, and sweep skips, before -> after."""
    before, after = (json.loads(Path(p).read_text()) for p in (before_path, after_path))
    header = f"{'level':<8}{'problems':>9}{'ref runs small':>22}{'sweep skipped':>20}{'sweeps < 8':>16}"
    lines = [header, "-" * len(header)]
    for level in LEVELS + ("all",):
        counts = []
        for rows in (before, after):
            chosen = [summarize(row) for row in rows if level in ("all", row["level"])]
            counts.append((len(chosen), sum(s["small_ok"] for s in chosen), sum(s["skipped"] for s in chosen),
                           sum(s["ran"] < SWEEP for s in chosen)))
        (n, *old), (_, *new) = counts
        cells = [f"{o} -> {w}" for o, w in zip(old, new)]
        lines.append(f"{level:<8}{n:>9}{cells[0]:>22}{cells[1]:>20}{cells[2]:>16}")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernelbench", type=Path, default=Path(__file__).resolve().parents[2] / "shared/kernelbench")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--label", default="")
    parser.add_argument("--timeout", type=float, default=240.0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--memory-gb", type=float, default=4.0, help="data size limit of each child")
    parser.add_argument("--only", help="substring of the files to run (for a quick look)")
    parser.add_argument("--one", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("BEFORE_JSON", "AFTER_JSON"))
    parser.add_argument("--from-json", type=Path, help="render rows saved by an earlier --json, run nothing")
    args = parser.parse_args()
    if args.one:
        return measure(args.one, args.memory_gb)
    if args.compare:
        return print(compare(*args.compare), end="")
    pythonpath = os.environ.get("PYTHONPATH", "")
    if args.from_json:
        rows = json.loads(args.from_json.read_text())
    else:
        files = [path for path in problem_files(args.kernelbench) if not args.only or args.only in str(path)]
        with ThreadPoolExecutor(max_workers=args.workers) as pool:
            rows = list(pool.map(lambda path: child(path, args.timeout, args.memory_gb, pythonpath), files))
    text = render(rows, args.label or f"PYTHONPATH={pythonpath}")
    print(text, end="")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
    if args.json and not args.from_json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
