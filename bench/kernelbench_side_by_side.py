"""Helper of bench/kernelbench_side_by_side.sh (read its header first). Subcommands:

    select RUN_FOLDER N     the first N files of a KernelBench run folder, by problem id, that KernelBench compiled
    reference-candidates PROBLEMS FOLDER ID...
                            level-1 candidates that are their reference (class ModelNew(Model)), any precision's
    kernelbench OUT ...     KernelBench's evaluator on the files of OUT/selected.txt, both passes timed
                            (--precision: its eval_kernel_against_ref at that precision, bench/kernelbench_eval_at.py)
    kbench-entry OUT ...    kbench.eval_kernel_against_ref on the same files with the same keywords, in one process
                            (its warm judge), after a parallel build pass; then its per-call overhead
    table OUT               the side-by-side table of OUT's results (of `kbench sweep`)
    entry-table OUT         both entry points' compiled, correctness, runtime, ref_runtime per file, and the overhead

Both entry points on the same files (the lead's GPU run; .device/kb filled as kernelbench_side_by_side.sh says):

    python3 bench/kernelbench_side_by_side.py select .device/kb/deepseek_v4_pro_l1 16 > $OUT/selected.txt
    python3 bench/kernelbench_side_by_side.py kernelbench $OUT --evaluator .device/kb/evaluator --problems .device/kb \
        --site /tmp/site --work /tmp/kb-work
    python3 bench/kernelbench_side_by_side.py kbench-entry $OUT --problems .device/kb --work /tmp/kbench-work
    python3 bench/kernelbench_side_by_side.py entry-table $OUT

and at bfloat16, on candidates that are their references (a generated CUDA kernel of float pointers cannot run on
bfloat16 tensors): `reference-candidates .device/kb $OUT/candidates 1 2 ... > $OUT/selected.txt`, then the same
with `--precision bfloat16` on `kernelbench` and `kbench-entry`.

Everything goes through files under OUT, so a call cut off half-way leaves what it finished, and `table` can be
run again on them later. KernelBench's side runs in subprocesses given PYTHONPATH=SITE (pydantic) and nothing of
kbench's; this file reads run names, eval_results.json and kbench's CSV with kbench's own readers (no torch).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from kbench.report.kernelbench_verdicts import EVAL_RESULTS, read_verdicts, run_folder_level
from kbench.solution import KERNELBENCH_RUN_NAME
from kbench.stats import finite_number

WIDTH = 80
PRECISION_CHOICES = ("float32", "float16", "bfloat16")


def candidate_key(path: Path) -> tuple[int, int, int]:
    level, problem_id, sample = KERNELBENCH_RUN_NAME.search(path.name).groups()
    return int(level), int(problem_id), int(sample)


# ---- select ----------------------------------------------------------------------------------------------------


def compiled_samples(run: Path) -> set[tuple[int, int]]:
    """(problem id, sample) of every candidate the run folder's eval_results.json says KernelBench compiled."""
    verdicts = read_verdicts(run / EVAL_RESULTS, run_folder_level(run) or 1)
    return {(verdict.problem_id, verdict.sample) for verdict in verdicts if verdict.compiled}


def select(run: Path, count: int) -> list[Path]:
    compiled = compiled_samples(run)
    files = sorted((path for path in run.glob("*.py") if KERNELBENCH_RUN_NAME.search(path.name)), key=candidate_key)
    chosen = [path for path in files if candidate_key(path)[1:] in compiled][:count]
    if len(chosen) < count:
        print(f"only {len(chosen)} files of {run} were compiled by KernelBench", file=sys.stderr)
    return chosen


# ---- kernelbench -----------------------------------------------------------------------------------------------


def run_logged(command: list[str], log: Path, timeout: float, env: dict, cwd: Path) -> int | None:
    """Runs `command` with its output in `log`; its exit code, None when it ran past `timeout` (its whole process
    group is killed then: a build leaves ninja and nvcc behind otherwise)."""
    with open(log, "w") as handle:
        process = subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT, env=env, cwd=cwd,
                                   start_new_session=True)
        try:
            return process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            return None


def kbjson(log: Path) -> dict | None:
    """The last KBJSON line of an eval's log; raw_decode, because stderr may have been written after it on the
    same line."""
    found = None
    for line in log.read_text(errors="replace").splitlines():
        if "KBJSON " in line:
            try:
                found = json.JSONDecoder().raw_decode(line.split("KBJSON ", 1)[1])[0]
            except ValueError:
                pass
    return found


def reference_candidates(problems: Path, folder: Path, problem_ids: list[int]) -> list[Path]:
    """For each level-1 problem id, a candidate named as KernelBench names its samples that is the problem itself
    with `class ModelNew(Model): pass`: correct at every precision on both sides, so their times compare."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for problem_id in problem_ids:
        source = problem_file(problems, 1, problem_id).read_text()
        path = folder / f"level_1_problem_{problem_id}_sample_0_kernel.py"
        path.write_text(source + "\n\nclass ModelNew(Model):\n    pass\n")
        written.append(path.resolve())
    return written


def problem_file(problems: Path, level: int, problem_id: int) -> Path:
    matches = sorted((problems / f"level{level}").glob(f"{problem_id}_*.py"))
    if len(matches) != 1:
        raise SystemExit(f"{len(matches)} problem files for level {level} problem {problem_id} in {problems}")
    return matches[0]


def kernelbench(out: Path, evaluator: Path, problems: Path, site: Path, work: Path, timeout: float,
                deadline: float | None = None, precision: str = "float32") -> None:
    """KernelBench's evaluator as its scripts/eval_from_generations.py runs it: the CPU build pass (one process
    per sample, as many at once as there are cores, each in its own build folder), then the GPU pass on the same
    build folders, one fresh process per sample, one after another on device 0. Every sample gets a row in
    OUT/kernelbench.jsonl, written as it finishes: its KBJSON fields, or why there were none (each process's log
    in WORK/logs).

    With `deadline` (seconds from this call's start), no eval starts after it: the rest is left to a later call
    with the same OUT and WORK on the same machine, which skips the build pass and the files that have rows and
    adds its GPU pass's time to the first's. KernelBench runs each eval in a fresh process, so where the pass is
    cut changes none of its times; it lets the pass span device calls of limited length.

    `precision` other than float32: each eval runs bench/kernelbench_eval_at.py (kb_eval_one.py's call at that
    precision) in place of kb_eval_one.py."""
    called = time.perf_counter()
    files = [Path(line) for line in (out / "selected.txt").read_text().splitlines() if line]
    env = dict(os.environ, PYTHONPATH=str(site))  # pydantic, and no kbench on KernelBench's side
    logs = work / "logs"  # not under OUT: a device call brings back a limited number of files
    logs.mkdir(parents=True, exist_ok=True)
    problems_of = {path: problem_file(problems, *candidate_key(path)[:2]) for path in files}  # before any clock
    build_dir = lambda path: work / "build" / path.stem
    workers = os.cpu_count() or 1
    times_path, rows = out / "kernelbench_times.json", out / "kernelbench.jsonl"
    times = read_json(times_path)

    def build(path: Path) -> tuple[int | None, float]:
        started = time.perf_counter()
        code = run_logged([sys.executable, str(evaluator / "kb_build_one.py"), str(path), str(build_dir(path))],
                          logs / f"{path.stem}.build.log", timeout, env, work)
        return code, time.perf_counter() - started

    if "builds" in times:  # a later call: the build pass is done
        missing = [path.name for path in files if not build_dir(path).is_dir()]
        if missing:
            raise SystemExit(f"the build pass's folders are gone ({missing[0]} ...): run both passes again "
                             f"on one held machine")
        builds = {path: tuple(times["builds"][path.name]) for path in files}
        print(f"GPU pass resumed: {len(read_rows(rows))} of {len(files)} files done", flush=True)
    else:
        work.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        with ThreadPoolExecutor(max_workers=workers) as pool:  # threads only wait: each build is a process
            builds = dict(zip(files, pool.map(build, files)))
        times = {"build_s": time.perf_counter() - started, "build_workers": workers, "files": len(files),
                 "builds": {path.name: list(result) for path, result in builds.items()}, "gpu_calls": 0}
        write_json(times_path, times)
        rows.write_text("")

    done = {row["solution"] for row in read_rows(rows)}
    started = time.perf_counter()
    for path in files:
        if path.name in done:
            continue
        if deadline is not None and time.perf_counter() - called > deadline:
            print(f"deadline: {len(files) - len(read_rows(rows))} files left for a later call", flush=True)
            break
        log, began = logs / f"{path.stem}.eval.log", time.perf_counter()
        pair = [str(problems_of[path]), str(path), str(build_dir(path))]
        command = [sys.executable, str(evaluator / "kb_eval_one.py"), *pair] if precision == "float32" else \
            [sys.executable, str(Path(__file__).with_name("kernelbench_eval_at.py")), str(evaluator), *pair, precision]
        code = run_logged(command, log, timeout, env, work)
        found = kbjson(log)
        row = {"solution": path.name, "problem": problems_of[path].name, "eval_exit": code,
               "eval_s": round(time.perf_counter() - began, 2), "build_exit": builds[path][0],
               "build_s": round(builds[path][1], 2), **(found or {})}
        if code is None:
            row["failure"] = f"timeout: no result in {timeout:g} s"
        elif found is None:
            row["failure"] = f"no KBJSON line: the evaluator exited with {code}"
        with open(rows, "a") as handle:
            handle.write(json.dumps(row) + "\n")
        print(f"{path.name}: {verdict_of_kernelbench(row)} in {row['eval_s']} s", flush=True)
    times["gpu_calls"] += 1
    times["gpu_pass_s"] = times.get("gpu_pass_s", 0.0) + time.perf_counter() - started
    if len(read_rows(rows)) == len(files):
        times["gpu_s"] = times["gpu_pass_s"]  # the whole pass, over gpu_calls calls
    write_json(times_path, times)


def read_rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line] if path.is_file() else []


def write_json(path: Path, data: dict) -> None:
    path.write_text(json.dumps(data, indent=1) + "\n")


# ---- kbench-entry -----------------------------------------------------------------------------------------------

# KernelBench's keywords as kb_eval_one.py passes them (scripts/eval_from_generations.py's).
ENTRY_KEYWORDS = dict(seed_num=42, num_correct_trials=5, num_perf_trials=100, measure_performance=True,
                      backend="cuda")
OVERHEAD_PROBLEM = "19_ReLU.py"  # the overhead's pair: level 1's ReLU against itself (class ModelNew(Model))


def kbench_entry(out: Path, problems: Path, work: Path, precision: str, device: str, overhead_calls: int) -> None:
    """kbench.eval_kernel_against_ref on OUT/selected.txt's files, one call after another in this process (the
    warm judge: the first call pays its start-up), after a build pass that builds every candidate at once into the
    cache the calls use (as KernelBench's build pass does for its GPU pass). Rows in OUT/kbench_entry.jsonl;
    times in OUT/kbench_entry_times.json, with `overhead_calls` calls of the ReLU pair without timing: what a
    warm call costs beyond its work."""
    import torch

    import kbench
    from kbench.config import RunConfig
    from kbench.schedule.child import EvaluationOptions, evaluate

    files = [Path(line) for line in (out / "selected.txt").read_text().splitlines() if line]
    problems_of = {path: problem_file(problems, *candidate_key(path)[:2]) for path in files}
    cache = work / "kbench-cache"
    device_name = f"cuda:{device}" if device.isdigit() else device
    config = RunConfig(device=device_name, cache_dir=cache, precision=precision)
    started = time.perf_counter()
    threads = max(1, (os.cpu_count() or 1) // max(1, len(files)))
    with ThreadPoolExecutor(max_workers=max(1, len(files))) as pool:
        options = EvaluationOptions(device=device_name, build_only=True, build_threads=threads)
        built = list(pool.map(lambda path: evaluate(problems_of[path], path, config, options), files))
    times = {"build_s": time.perf_counter() - started, "files": len(files), "precision": precision,
             "builds": {path.name: result.status for path, result in zip(files, built)}}
    rows = out / "kbench_entry.jsonl"
    rows.write_text("")
    keywords = dict(ENTRY_KEYWORDS, build_dir=cache, device=int(device) if device.isdigit() else device,
                    precision=getattr(torch, precision))
    started = time.perf_counter()
    for index, path in enumerate(files):
        began = time.perf_counter()
        result = kbench.eval_kernel_against_ref(problems_of[path].read_text(), path.read_text(), **keywords)
        call_s = time.perf_counter() - began
        if index == 0:
            times["first_call_s"] = call_s
        judged = result.result
        row = {"solution": path.name, "problem": problems_of[path].name, "compiled": result.compiled,
               "correctness": result.correctness, "runtime_ms": result.runtime, "ref_runtime_ms": result.ref_runtime,
               "speedup": round(result.ref_runtime / result.runtime, 3) if result.runtime > 0 else None,
               "reward": result.reward, "status": judged.status, "flags": list(judged.flags),
               "build_reused": judged.build_reused, "call_s": round(call_s, 2),
               "metadata": {key: str(value)[:300] for key, value in result.metadata.items()}}
        with open(rows, "a") as handle:
            handle.write(json.dumps(row) + "\n")
        print(f"{path.name}: {judged.status} in {call_s:.1f} s", flush=True)
    times["calls_s"] = time.perf_counter() - started
    times["overhead_calls_s"] = entry_overhead(problems, work, keywords, overhead_calls)
    write_json(out / "kbench_entry_times.json", times)


def entry_overhead(problems: Path, work: Path, keywords: dict, calls: int) -> list[float]:
    """Wall seconds of `calls` warm calls on the ReLU pair, correctness only (five trials, no timing)."""
    import kbench

    reference = (problems / "level1" / OVERHEAD_PROBLEM).read_text()
    candidate = reference + "\n\nclass ModelNew(Model):\n    pass\n"
    keywords = dict(keywords, measure_performance=False)
    walls = []
    for _ in range(calls):
        began = time.perf_counter()
        result = kbench.eval_kernel_against_ref(reference, candidate, **keywords)
        walls.append(round(time.perf_counter() - began, 3))
        if not result.correctness:
            print(f"the overhead's pair was judged {result.result.status}: {result.result.message}", flush=True)
    return walls


def entry_table(out: Path) -> str:
    """Per file, KernelBench's entry point (OUT/kernelbench.jsonl) beside kbench's (OUT/kbench_entry.jsonl)."""
    files = [Path(line).name for line in (out / "selected.txt").read_text().splitlines() if line]
    by_kernelbench = {row["solution"]: row for row in read_rows(out / "kernelbench.jsonl")}
    by_kbench = {row["solution"]: row for row in read_rows(out / "kbench_entry.jsonl")}
    row_format = "{:>4} {:<14} | {:>5} {:>5} {:>9} {:>9} | {:>5} {:>5} {:>9} {:>9} | {:>5}"
    text = ["KernelBench's eval_kernel_against_ref | kbench's (runtime, ref_runtime: ms, the mean of the timed calls)",
            row_format.format("id", "problem", "comp", "corr", "runtime", "ref", "comp", "corr", "runtime", "ref",
                              "agree"), "-" * 96]
    agree = compared = 0
    for name in files:
        theirs, ours = by_kernelbench.get(name), by_kbench.get(name)
        judged = theirs is not None and "compiled" in theirs and ours is not None
        same = judged and bool(theirs.get("correctness")) == bool(ours.get("correctness"))
        agree, compared = agree + same, compared + judged
        problem = re.sub(r"^\d+_", "", (ours or theirs or {}).get("problem", "")).removesuffix(".py")
        text.append(row_format.format(
            candidate_key(Path(name))[1], short(problem, 14),
            *entry_columns(theirs, "correctness"), *entry_columns(ours, "correctness"),
            "-" if not judged else "yes" if same else "NO"))
        if judged and not same:
            text += ["  KernelBench: " + short(kernelbench_reason(theirs), 80),
                     "  kbench: " + short(f"{ours.get('status')}: {ours.get('metadata', {}).get('kbench_message', '')}",
                                          85)]
    times = read_json(out / "kbench_entry_times.json")
    walls = times.get("overhead_calls_s") or []
    text += ["-" * 96, f"correctness agrees on {agree}/{compared} files",
             f"kbench: build pass {seconds(times.get('build_s'))}, {times.get('files', '-')} calls "
             f"{seconds(times.get('calls_s'))}, the first (the warm judge's start-up) {seconds(times.get('first_call_s'))}",
             f"kbench warm call, ReLU against itself, correctness only: median "
             f"{g(statistics.median(walls)) if walls else '-'} s over {len(walls)} calls "
             f"(min {g(min(walls)) if walls else '-'}, max {g(max(walls)) if walls else '-'})"]
    return "\n".join(text)


def entry_columns(row: dict | None, correct_key: str) -> list[str]:
    if not row or "compiled" not in row:
        return ["-", "-", "-", "-"]
    return ["yes" if row["compiled"] else "no", "yes" if row.get(correct_key) else "no",
            g(positive(row.get("runtime_ms"))), g(positive(row.get("ref_runtime_ms")))]


def positive(value):
    return value if isinstance(value, (int, float)) and value > 0 else None


# ---- table -----------------------------------------------------------------------------------------------------


def verdict_of_kernelbench(row: dict | None) -> str:
    if row is None:
        return "no row"  # the call ended before its eval
    if "compiled" in row:
        return "correct" if row.get("correctness") else "incorrect" if row["compiled"] else "not compiled"
    if row.get("eval_exit") is None:
        return "timeout"
    if "exception" in row:
        return "error"    # the evaluator raised (kb_eval_one.py caught it)
    if "failure" in row:
        return "crashed"  # its process died before printing a KBJSON line
    return "no result"    # eval_kernel_against_ref returned None


def kernelbench_reason(row: dict | None) -> str:
    """What KernelBench's verdict rests on: the trials passed, else why it failed: the process's failure, the
    evaluator's exception, or the first of its metadata's error or issue entries (compilation_error,
    runtime_error, correctness_issue, ...)."""
    if not row:
        return "no row"
    if "failure" in row or "exception" in row:
        return row.get("failure") or row["exception"]
    if "compiled" not in row:
        return "eval_kernel_against_ref returned None"
    metadata = row.get("metadata") or {}
    if row.get("correctness"):
        return f"correct, trials {metadata.get('correctness_trials', '?')}"
    reason = next((f"{key}: {value}" for key, value in metadata.items() if key.endswith(("error", "issue"))), "")
    if "max_difference" in metadata:
        reason += f" (max difference {metadata['max_difference']})"
    return reason or "no reason recorded"


def kbench_reason(row: dict) -> str:
    """What kbench's verdict rests on: its errors and trials when correct, else where it went wrong."""
    if not row:
        return "no row"
    flags = f"; flags {';'.join(row['flags'])}" if row.get("flags") else ""
    if row.get("status") == "correct":
        sweep = f", sweep {g(row['sweep_passed'])}/{g(row['sweep_run'])}" if finite_number(row.get("sweep_run")) else ""
        return (f"correct, max abs err {g(row.get('max_abs_err'))}, trials {g(row.get('trials_passed'))}/"
                f"{g(row.get('trials_total'))}{sweep}{flags}")
    return (text_of(row.get("first_mismatch")) or text_of(row.get("message")) or text_of(row.get("status"))) + flags


def kbench_rows(csv_path: Path) -> dict[str, dict]:
    """kbench's latest row per solution file name (its CSV names the copies under the call's temporary folder)."""
    if not csv_path.is_file():
        return {}
    import kbench

    frame = kbench.read_results(csv_path)
    return {Path(row["solution"]).name: row for row in frame.to_dict("records")}


def g(value) -> str:
    value = finite_number(value)
    return "-" if value is None else f"{value:.3g}"


def speedup(value) -> str:
    value = finite_number(value)
    return "-" if value is None else f"{value:.2f}x"


def seconds(value) -> str:
    value = finite_number(value)
    return f"{'-':>8}  " if value is None else f"{value:8.1f} s"


def short(text: str, width: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[:width - 3] + "..."


def text_of(value) -> str:
    return value if isinstance(value, str) else ""  # pandas reads an empty cell as NaN


def table(out: Path) -> str:
    files = [Path(line).name for line in (out / "selected.txt").read_text().splitlines() if line]
    kernelbench_path = out / "kernelbench.jsonl"
    by_kernelbench = {row["solution"]: row for row in read_rows(kernelbench_path)}
    by_kbench = kbench_rows(out / "kbench.csv")
    row_format = "{:>4} {:<18} {:<12} {:>8}  {:<15} {:>8}  {:>5}"
    text = [row_format.format("id", "problem", "KernelBench", "speedup", "kbench", "speedup", "agree"), "-" * WIDTH]
    agree, compared, notes = 0, 0, []
    for name in files:
        kernelbench_row, kbench_row = by_kernelbench.get(name) or {}, by_kbench.get(name) or {}
        kernelbench_verdict = verdict_of_kernelbench(by_kernelbench.get(name))
        kbench_status = text_of(kbench_row.get("status")) or "no row"
        judged = "no row" not in (kernelbench_verdict, kbench_status)  # a side cut off says nothing
        same = (kernelbench_verdict == "correct") == (kbench_status == "correct")
        agree, compared = agree + (judged and same), compared + judged
        problem = text_of(kbench_row.get("problem")) or kernelbench_row.get("problem", "").removesuffix(".py")
        problem = re.sub(r"^\d+_", "", problem)  # its id has a column of its own
        text.append(row_format.format(candidate_key(Path(name))[1], short(problem, 18), kernelbench_verdict,
                                      speedup(kernelbench_row.get("speedup")), kbench_status,
                                      speedup(kbench_row.get("speedup")),
                                      "-" if not judged else "yes" if same else "NO"))
        if judged and not same:  # what each verdict rests on: the write-up must explain every disagreement
            notes += [f"{name}:", "  KernelBench: " + short(kernelbench_reason(by_kernelbench.get(name)), WIDTH - 15),
                      "  kbench: " + short(kbench_reason(kbench_row), WIDTH - 10)]
        if kernelbench_row.get("static_valid") is False:
            notes.append(short(f"{name}: KernelBench's static checker: {kernelbench_row.get('static_errors')}", WIDTH))
    times = read_json(out / "kernelbench_times.json")
    kbench_time = read_json(out / "kbench_time.json")
    # A GPU pass cut short (the call's limit) still has the rows of the files it finished, each with its time:
    # their sum bounds KernelBench's time from below.
    whole = "gpu_s" in times and len(by_kernelbench) == len(files)
    gpu_s = times["gpu_s"] if whole else sum(row.get("eval_s", 0.0) for row in by_kernelbench.values()) or None
    kernelbench_total = times["build_s"] + gpu_s if "build_s" in times and gpu_s else None
    ratio = kernelbench_total / kbench_time["wall_s"] if kernelbench_total and kbench_time.get("wall_s") else None
    at_least = "" if whole else ", at least"
    calls = times.get("gpu_calls", 1)
    gpu_note = ("one process per file, one at a time" + (f", over {calls} calls" if calls > 1 else "")
                + ("" if whole else f"; {len(by_kernelbench)} of {len(files)} files, then cut"))
    text += ["-" * WIDTH, f"verdicts agree on {agree}/{compared} files (KernelBench correct == kbench correct)"
             + (f"; {len(files) - compared} without a row on one side" if compared < len(files) else ""),
             *notes, "", "wall times, end to end:",
             f"  KernelBench build pass  {seconds(times.get('build_s'))}   ({times.get('files', '-')} processes, "
             f"{times.get('build_workers', '-')} at once)",
             f"  KernelBench GPU pass    {seconds(gpu_s)}   ({gpu_note})",
             f"  KernelBench total       {seconds(kernelbench_total)}{at_least}",
             f"  kbench sweep            {seconds(kbench_time.get('wall_s'))}   (cold cache, exit status "
             f"{kbench_time.get('exit', '-')})",
             f"  KernelBench / kbench    {'       -' if ratio is None else f'{ratio:8.2f}x'}{at_least}"]
    return "\n".join(text)


def read_json(path: Path) -> dict:
    return json.loads(path.read_text()) if path.is_file() else {}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    one = commands.add_parser("select")
    one.add_argument("run", type=Path)
    one.add_argument("count", type=int)
    one = commands.add_parser("reference-candidates")
    one.add_argument("problems", type=Path, help="KernelBench's root: level1/ ...")
    one.add_argument("folder", type=Path)
    one.add_argument("ids", type=int, nargs="+", help="level-1 problem ids")
    one = commands.add_parser("kernelbench")
    one.add_argument("out", type=Path)
    one.add_argument("--evaluator", type=Path, required=True, help="kb_build_one.py, kb_eval_one.py, kernelbench/")
    one.add_argument("--problems", type=Path, required=True, help="KernelBench's root: level1/ ...")
    one.add_argument("--site", type=Path, required=True, help="pydantic and its dependencies")
    one.add_argument("--work", type=Path, required=True, help="an empty folder: build folders, working directory")
    one.add_argument("--timeout", type=float, default=300, help="seconds per process, build or eval")
    one.add_argument("--deadline", type=float, help="seconds from the start after which no eval starts (the "
                     "rest is left to a later call with the same OUT and --work, on the same machine)")
    one.add_argument("--precision", choices=PRECISION_CHOICES, default="float32")
    one = commands.add_parser("kbench-entry")
    one.add_argument("out", type=Path)
    one.add_argument("--problems", type=Path, required=True, help="KernelBench's root: level1/ ...")
    one.add_argument("--work", type=Path, required=True, help="a folder for kbench's build cache")
    one.add_argument("--precision", choices=PRECISION_CHOICES, default="float32")
    one.add_argument("--device", default="0", help="a GPU index (default 0), or cpu")
    one.add_argument("--overhead", type=int, default=20, help="warm calls on the ReLU pair to time")
    one = commands.add_parser("entry-table")
    one.add_argument("out", type=Path)
    one = commands.add_parser("table")
    one.add_argument("out", type=Path)
    args = parser.parse_args()
    if args.command == "select":
        print("\n".join(str(path.resolve()) for path in select(args.run, args.count)))
    elif args.command == "reference-candidates":
        print("\n".join(str(path) for path in reference_candidates(args.problems, args.folder, args.ids)))
    elif args.command == "kernelbench":
        kernelbench(args.out, args.evaluator.resolve(), args.problems.resolve(), args.site.resolve(),
                    args.work.resolve(), args.timeout, args.deadline, args.precision)
    elif args.command == "kbench-entry":
        kbench_entry(args.out, args.problems.resolve(), args.work.resolve(), args.precision, args.device,
                     args.overhead)
        print(entry_table(args.out))
    elif args.command == "entry-table":
        print(entry_table(args.out))
    else:
        print(table(args.out))


if __name__ == "__main__":
    main()
