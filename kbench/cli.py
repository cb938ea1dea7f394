"""Command line: parse options into a RunConfig, call the runner, render. Nothing else lives here.

Exit codes: 0 every solution correct, 1 any solution not correct, 2 usage error.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from kbench import __version__
from kbench.config import RunConfig, default_cache_dir
from kbench.report import results_table
from kbench.results import Status, append_row
from kbench.solution import PairingError, default_problem_dirs, pair_problem

EXIT_ALL_CORRECT, EXIT_SOME_NOT_CORRECT, EXIT_USAGE = 0, 1, 2


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="kbench")
def main() -> None:
    """kbench judges GPU kernels: it builds each candidate solution, checks that it computes the same
    function as its PyTorch reference problem, times both with CUDA events, and records a verdict
    and a speedup per candidate in a table and a CSV.

    Exit codes: 0 every solution correct, 1 any solution not correct (skipped ones included),
    2 usage error.
    """


def run_options(command):
    """Options shared by the commands that evaluate solutions."""
    options = [
        click.option("--device", default="auto", show_default=True,
                     help="auto (CUDA when present), cpu, cuda or cuda:N."),
        click.option("--trials", default=5, show_default=True, type=click.IntRange(1),
                     help="Correctness trials, each with fresh seeded inputs."),
        click.option("--seed", default=42, show_default=True, type=int,
                     help="Base seed for parameters (models) and inputs (trial i uses seed + i)."),
        click.option("--atol", type=click.FloatRange(0), default=None,
                     help="Absolute tolerance [default: 1e-4 float32, 1e-2 float16/bfloat16]."),
        click.option("--rtol", type=click.FloatRange(0), default=None,
                     help="Relative tolerance [default: as --atol]."),
        click.option("--timeout", "timeout_s", default=900.0, show_default=True, type=click.FloatRange(1),
                     help="Wall-clock seconds per evaluation, first build included."),
        click.option("--time/--no-time", "do_time", default=True, show_default=True,
                     help="Time correct candidates against the reference."),
        click.option("--time-budget", "time_budget_s", default=10.0, show_default=True,
                     type=click.FloatRange(0), help="Seconds of sampling per evaluation at most."),
        click.option("--target-rse", default=0.01, show_default=True, type=click.FloatRange(0),
                     help="Stop sampling once both relative standard errors are below this."),
        click.option("--sweep", "sweep", default=8, show_default=True, type=click.IntRange(0),
                     help="Random parameter configurations checked after the official one (0: off)."),
        click.option("--strict", is_flag=True,
                     help="A sweep failure makes the verdict incorrect (default: a sweep_failed flag)."),
        click.option("--full-size", is_flag=True,
                     help="On a CPU device, run official sizes instead of reduced ones."),
        click.option("--guards/--no-guards", "guards", default=True, show_default=True,
                     help="Anti-cheat checks that cost time (rotating timed inputs, timed-output checks, "
                          "hidden-work, op and precision checks)."),
        click.option("--cache-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
                     help=f"Builds and logs [default: {default_cache_dir()}; env KBENCH_CACHE_DIR]."),
        click.option("--out", default=Path("results/results.csv"), show_default=True,
                     type=click.Path(dir_okay=False, path_type=Path), help="Results CSV (rows are appended)."),
        click.option("--json", "as_json", is_flag=True, help="Print results as JSON instead of a table."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def build_config(device, trials, seed, atol, rtol, timeout_s, do_time, time_budget_s, target_rse, sweep,
                 strict, full_size, guards, cache_dir) -> RunConfig:
    return RunConfig(device=device, trials=trials, seed=seed, atol=atol, rtol=rtol, timeout_s=timeout_s,
                     time=do_time, time_budget_s=time_budget_s, target_rse=target_rse, sweep=sweep,
                     strict=strict, full_size=full_size, guards=guards, cache_dir=cache_dir or default_cache_dir())


@main.command("eval")
@click.argument("solutions", nargs=-1, required=True,
                type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--problem", "problem_path", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Problem file for every SOLUTION (overrides pairing).")
@click.option("--problems", "problems_dir", type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="Folder to pair solutions in [default: problems/ beside solutions/, then ./problems].")
@click.option("--jobs", "-j", type=click.IntRange(1), default=None,
              help="Parallel builds when judging several solutions [default: number of cores].")
@run_options
def eval_command(solutions, problem_path, problems_dir, jobs, as_json, out, **options) -> None:
    """Judge SOLUTIONS (files defining ModelNew), each against its problem.

    Pairing: solutions/<problem>.py and solutions/<problem>/<any>.py belong to problems/<problem>.py;
    KernelBench run files level_<L>_problem_<ID>_sample_<S>_kernel.py pair with <ID>_*.py or a problem
    declaring KERNELBENCH_ID = <ID>. Each evaluation runs in its own child process.
    """
    from kbench.runner import evaluate_all, new_run_id

    config = build_config(**options)
    device = _checked_device(config.device)
    pairs = [(problem_path or _pair(solution, problems_dir), solution) for solution in solutions]
    console = Console(stderr=True)
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=console, transient=True, disable=as_json) as progress:
        building = progress.add_task("building", total=len(pairs), visible=len(pairs) > 1)
        evaluating = progress.add_task("evaluating", total=len(pairs))

        def record(result):
            append_row(out, result.to_row())  # written the moment it exists
            progress.advance(evaluating)

        results = evaluate_all(pairs, config, device=device, run_id=new_run_id(), jobs=jobs,
                               on_result=record, on_built=lambda result: progress.advance(building))
    if as_json:
        click.echo(json.dumps([result.to_row() for result in results], indent=2))
    else:
        _wide_console().print(results_table(results, title=f"kbench eval on {device}"))
        console.print(f"results appended to {out}")
    sys.exit(EXIT_ALL_CORRECT if all(r.status == Status.CORRECT for r in results) else EXIT_SOME_NOT_CORRECT)


@main.command("list")
@click.option("--problems", "problems_dir", default=Path("problems"), show_default=True,
              type=click.Path(exists=True, file_okay=False, path_type=Path), help="Folder of problem files.")
@click.option("--solutions", "solutions_dir", default=Path("solutions"), show_default=True,
              type=click.Path(file_okay=False, path_type=Path), help="Folder of solution files.")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON instead of a table.")
def list_command(problems_dir, solutions_dir, as_json) -> None:
    """List problems (family, official sizes, sweep space) and the solutions paired with them."""
    from kbench.catalog import describe_problems
    from kbench.report import problems_table

    entries = describe_problems(problems_dir, solutions_dir)
    if as_json:
        click.echo(json.dumps([entry.__dict__ for entry in entries], indent=2, default=str))
    else:
        _wide_console().print(problems_table(entries))


def _wide_console() -> Console:
    console = Console()
    return console if console.is_terminal else Console(width=200)  # pipes and logs: one line per row


def _pair(solution: Path, problems_dir: Path | None) -> Path:
    try:
        return pair_problem(solution, [problems_dir] if problems_dir else default_problem_dirs(solution))
    except PairingError as error:
        raise click.UsageError(str(error))


def _checked_device(requested: str) -> str:
    import torch

    from kbench.runner import resolve_device

    device = resolve_device(requested)
    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            raise click.UsageError(f"--device {requested}: no CUDA device here; use --device cpu")
        index = int(device.split(":")[1]) if ":" in device else 0
        if index >= torch.cuda.device_count():
            raise click.UsageError(f"--device {requested}: only {torch.cuda.device_count()} CUDA device(s)")
    elif device != "cpu":
        raise click.UsageError(f"--device {requested}: expected auto, cpu, cuda or cuda:N")
    return device


if __name__ == "__main__":
    main()
