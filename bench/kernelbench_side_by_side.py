"""Helper of bench/kernelbench_side_by_side.sh (read its header first). Subcommands:

    select RUN_FOLDER N     the first N files of a KernelBench run folder, by problem id, that KernelBench compiled
    kernelbench OUT ...     KernelBench's evaluator on the files of OUT/selected.txt, both passes timed
    table OUT               the side-by-side table of OUT's results

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
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from kbench.report.kernelbench_verdicts import EVAL_RESULTS, read_verdicts, run_folder_level
from kbench.solution import KERNELBENCH_RUN_NAME
from kbench.stats import finite_number

WIDTH = 80


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


def problem_file(problems: Path, level: int, problem_id: int) -> Path:
    matches = sorted((problems / f"level{level}").glob(f"{problem_id}_*.py"))
    if len(matches) != 1:
        raise SystemExit(f"{len(matches)} problem files for level {level} problem {problem_id} in {problems}")
    return matches[0]


def kernelbench(out: Path, evaluator: Path, problems: Path, site: Path, work: Path, timeout: float,
                deadline: float | None = None) -> None:
    """KernelBench's evaluator as its scripts/eval_from_generations.py runs it: the CPU build pass (one process
    per sample, as many at once as there are cores, each in its own build folder), then the GPU pass on the same
    build folders, one fresh process per sample, one after another on device 0. Every sample gets a row in
    OUT/kernelbench.jsonl, written as it finishes: its KBJSON fields, or why there were none.

    With `deadline` (seconds from this call's start), no eval starts after it: the rest is left to a later call
    with the same OUT and WORK on the same machine, which skips the build pass and the files that have rows and
    adds its GPU pass's time to the first's. KernelBench runs each eval in a fresh process, so where the pass is
    cut changes none of its times; it lets the pass span device calls of limited length."""
    called = time.perf_counter()
    files = [Path(line) for line in (out / "selected.txt").read_text().splitlines() if line]
    env = dict(os.environ, PYTHONPATH=str(site))  # pydantic, and no kbench on KernelBench's side
    logs = out / "kernelbench"
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
        code = run_logged([sys.executable, str(evaluator / "kb_eval_one.py"), str(problems_of[path]), str(path),
                           str(build_dir(path))], log, timeout, env, work)
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
    one = commands.add_parser("kernelbench")
    one.add_argument("out", type=Path)
    one.add_argument("--evaluator", type=Path, required=True, help="kb_build_one.py, kb_eval_one.py, kernelbench/")
    one.add_argument("--problems", type=Path, required=True, help="KernelBench's root: level1/ ...")
    one.add_argument("--site", type=Path, required=True, help="pydantic and its dependencies")
    one.add_argument("--work", type=Path, required=True, help="an empty folder: build folders, working directory")
    one.add_argument("--timeout", type=float, default=300, help="seconds per process, build or eval")
    one.add_argument("--deadline", type=float, help="seconds from the start after which no eval starts (the "
                     "rest is left to a later call with the same OUT and --work, on the same machine)")
    one = commands.add_parser("table")
    one.add_argument("out", type=Path)
    args = parser.parse_args()
    if args.command == "select":
        print("\n".join(str(path.resolve()) for path in select(args.run, args.count)))
    elif args.command == "kernelbench":
        kernelbench(args.out, args.evaluator.resolve(), args.problems.resolve(), args.site.resolve(),
                    args.work.resolve(), args.timeout, args.deadline)
    else:
        print(table(args.out))


if __name__ == "__main__":
    main()
