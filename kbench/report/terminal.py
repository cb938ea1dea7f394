"""What kbench shows on the terminal while a run goes and after it: progress bars, a line per running worker
saying what it does, the summary tables. The CLI calls these; nothing here decides anything."""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

from rich.console import Console
from rich.text import Text
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn,
                           TimeRemainingColumn)

from kbench.report.tables import FAILURES_SHOWN, cut
from kbench.results import Status
from kbench.results_csv import append_row


def wide_console() -> Console:
    """The terminal's width; piped or logged, COLUMNS when set, else 200 (one line per row)."""
    console = Console()
    if console.is_terminal:
        return console
    columns = os.environ.get("COLUMNS", "")
    return Console(width=int(columns) if columns.isdigit() and int(columns) > 0 else 200)


def run_with_progress(pairs, config, devices, jobs, out: Path, quiet: bool, run_id=None, executor=None,
                      resume_hint: str = ""):
    """Run pairs with progress bars (builds; evaluations with failures so far and time left) and a line per
    running worker ("convt1d.py: building conv_ext (nvcc) 12 s", "sweep 3/8"), or where stderr is no terminal a
    line per build and per verdict (_LogLines); every result is appended to
    `out` the moment it exists. Ctrl-C: exit 130, the CSV holding every finished result; the message (after
    the progress display is gone, which would erase it) ends with `resume_hint`."""
    try:
        return _run_with_progress(pairs, config, devices, jobs, out, quiet, run_id, executor)
    except KeyboardInterrupt:
        Console(stderr=True).print(f"interrupted: every finished result is in {out}{resume_hint}", soft_wrap=True)
        sys.exit(130)


def _run_with_progress(pairs, config, devices, jobs, out: Path, quiet: bool, run_id, executor):
    from kbench.schedule.child import new_run_id
    from kbench.schedule.scheduler import run_pairs

    failures = 0
    lines = None if quiet or Console(stderr=True).is_terminal else _LogLines(len(pairs))
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), _Count(),
                  TextColumn("{task.fields[failed]}"), TimeElapsedColumn(), TimeRemainingColumn(),
                  console=Console(stderr=True), transient=True, disable=quiet) as progress:
        building = progress.add_task("building", total=len(pairs), visible=len(pairs) > 1, failed="")
        evaluating = progress.add_task("evaluating", total=len(pairs), failed="")
        workers = _WorkerLines(progress)

        def record(result):
            nonlocal failures
            append_row(out, result.to_row())  # written the moment it exists
            failures += result.status != Status.CORRECT
            progress.update(evaluating, advance=1, failed=f"{failures} not correct" if failures else "")
            if lines:
                lines.judged(result)

        def built(result):
            progress.advance(building)
            if lines:
                lines.built(result)

        return run_pairs(pairs, config, devices=devices, run_id=run_id or new_run_id(), jobs=jobs,
                         executor=executor, on_result=record, on_built=built, on_progress=workers.show)


class _LogLines:
    """Piped or logged, no bar is drawn: a line per build that ran and per verdict, as each comes, so that the log
    of a long run (a batch job's, one cut by a time limit) says how far it got."""

    def __init__(self, total: int):
        self.total = total
        self.built_count = 0
        self.judged_count = 0

    def built(self, result) -> None:
        self.built_count += 1
        if result.status == Status.BUILT and result.build_s is not None and not result.build_reused:
            _say(f"built {self.built_count}/{self.total}: {result.solution} in {result.build_s:.1f} s")

    def judged(self, result) -> None:
        self.judged_count += 1
        what = result.status
        if result.speedup is not None:
            what += f", {result.speedup:.3g}x"
        if result.flags:
            what += f" [{';'.join(result.flags)}]"
        if result.status != Status.CORRECT and result.message:
            what += f": {cut(' '.join(result.message.split()), 160)}"
        took = f" ({result.wall_s:.1f} s)" if result.wall_s is not None else ""
        _say(f"judged {self.judged_count}/{self.total}: {result.solution} ({result.problem}): {what}{took}")


def _say(line: str) -> None:
    print(f"kbench: {line}", file=sys.stderr, flush=True)


class _Count(MofNCompleteColumn):
    """'3/10' on the bars; nothing on a worker's line, which has no total."""

    def render(self, task):
        return Text("") if task.total is None else super().render(task)


class _WorkerLines:
    """One progress line per running worker, removed when it ends."""

    def __init__(self, progress: Progress):
        self.progress = progress
        self.lines: dict[tuple, int] = {}
        self.lock = threading.Lock()

    def show(self, pair, record) -> None:
        with self.lock:
            line = self.lines.get(pair)
            if record is None:
                if line is not None:
                    self.progress.remove_task(self.lines.pop(pair))
                return
            description = f"  {Path(pair[1]).name}: {record.describe(time.time())}"
            if line is None:
                self.lines[pair] = self.progress.add_task(description, total=None, failed="")
            else:
                self.progress.update(line, description=description)


def print_unpaired(unpaired, problems_dir: Path) -> None:
    """The solutions no problem paired with (solution.Unpaired), one line each, and their count."""
    console = Console(stderr=True)
    for entry in unpaired:
        console.print(f"[yellow]not judged: {entry.reason}[/yellow]", soft_wrap=True)
    if unpaired:
        console.print(f"[yellow]{len(unpaired)} solution(s) paired with no problem under {problems_dir}: give "
                      "--problems the folder their problems are in (KernelBench's root for run files of "
                      "several levels)[/yellow]", soft_wrap=True)


def warn_if_noisy(results) -> None:
    """After a run: results timed on a busy machine, and what to do (their rows say `noisy_timing`)."""
    from kbench.flags import NOISY_TIMING

    noisy = [result for result in results if NOISY_TIMING in result.flags]
    if noisy:
        Console(stderr=True).print(
            f"[yellow]Warning: {len(noisy)} result(s) timed with times spread too widely to trust their speedups "
            "(flag noisy_timing; kept out of best solution and trusted fast_p). Other work was running: re-run "
            "them on a quiet machine.[/yellow]", soft_wrap=True)


def print_report(out: Path, run_id: str) -> None:
    from kbench.report import summary

    print_summary(summary.summarise(summary.load(out, run_id)))


def print_summary(result, failures_limit=FAILURES_SHOWN) -> None:
    from kbench.report.tables import summary_tables

    console = wide_console()
    for table in summary_tables(result, failures_limit, width=console.width):
        console.print(table)
