"""Command line: parse options into a RunConfig, call the runner, render. Nothing else lives here.

Exit codes: 0 every solution correct, 1 any solution not correct, 2 usage error, 130 interrupted.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
from rich.console import Console

from kbench import __version__
from kbench.cli_options import build_config, run_options
from kbench.report.tables import FAILURES_SHOWN, results_table
from kbench.results import Status
from kbench.schedule.devices import DeviceError, checked_device, executor_and_devices
from kbench.solution import PairingError, default_problem_dirs, pair_problem
from kbench.report.terminal import (print_report, print_summary, print_unpaired, run_with_progress, warn_if_noisy,
                             wide_console)

EXIT_ALL_CORRECT, EXIT_SOME_NOT_CORRECT = 0, 1  # usage errors exit 2 through click


class _OneLineError(click.ClickException):
    """An expected failure shown as one line ("Error: ...") with the usage-error exit code."""

    exit_code = 2


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="kbench")
def main() -> None:
    """kbench judges GPU kernels: it builds each candidate solution, checks that it computes the same
    function as its PyTorch reference problem, times both alike (batches of calls on fresh inputs, on the
    judge's own clock), and records a verdict and a speedup per candidate in a table and a CSV.

    Exit codes: 0 every solution correct, 1 any solution not correct (skipped ones and solutions no
    problem pairs with included), 2 usage error, 130 interrupted (every finished result is already in
    the CSV).
    """


@main.command("eval")
@click.argument("solutions", nargs=-1, required=True,
                type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--problem", "problem_path", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Problem file for every SOLUTION (overrides pairing).")
@click.option("--problems", "problems_dir", type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="Folder to pair solutions in [default: problems/ beside solutions/, then ./problems].")
@click.option("--jobs", "-j", type=click.IntRange(1), default=None,
              help="Compilers at once when judging several solutions; builds queue their compilers for them "
                   "[default: usable cores, fewer if memory is short].")
@run_options
def eval_command(solutions, problem_path, problems_dir, jobs, as_json, out, **options) -> None:
    """Judge SOLUTIONS (files defining ModelNew), each against its problem.

    Pairing: solutions/<problem>.py and solutions/<problem>/<any>.py belong to problems/<problem>.py;
    KernelBench run files level_<L>_problem_<ID>_sample_<S>_kernel.py pair with <ID>_*.py or a problem
    declaring KERNELBENCH_ID = <ID>. Each evaluation runs in its own child process.
    """
    from kbench.schedule.pool import worker_pool

    not_python = [str(solution) for solution in solutions if solution.suffix != ".py"]
    if not_python:
        raise click.UsageError(f"not a Python file: {', '.join(not_python)} (a solution is a .py file "
                               "defining ModelNew)")
    config = build_config(**options)
    for waiting in ([True, False] if len(solutions) > 1 else [True]):  # the evaluations' and the builds' servers
        worker_pool().start_fork_server(waiting)  # their imports of torch beside this process's
    device = _or_usage_error(checked_device, config.device)
    folders = lambda solution: [problems_dir] if problems_dir else default_problem_dirs(solution)
    pairs = [(problem_path or _or_usage_error(pair_problem, solution, folders(solution), hint="pass --problem PATH"),
              solution) for solution in solutions]
    results = run_with_progress(pairs, config, [device], jobs, out, as_json)
    if as_json:
        click.echo(json.dumps([result.to_row() for result in results], indent=2))
    else:
        console = wide_console()
        console.print(results_table(results, title=f"kbench eval on {device}", width=console.width))
        Console(stderr=True).print(f"results appended to {out}")
    warn_if_noisy(results)
    sys.exit(_exit_code(results))


@main.command("sweep")
@click.option("--problems", "problems_dir", default=Path("problems"), show_default=True,
              type=click.Path(exists=True, file_okay=False, path_type=Path), help="Folder of problem files.")
@click.option("--solutions", "solutions_dir", default=Path("solutions"), show_default=True,
              type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="Folder of solutions (searched recursively; KernelBench run folders work as they are).")
@click.option("--filter", "filters", multiple=True, metavar="GLOB",
              help="Only problems whose name matches GLOB (repeatable).")
@click.option("--only-failed", is_flag=True, help="Only pairs whose latest row in --out is not correct.")
@click.option("--resume", is_flag=True,
              help="Skip pairs already in --out with the same solution, problem and settings.")
@click.option("--jobs", "-j", type=click.IntRange(1), default=None,
              help="Compilers at once; builds queue their compilers for them (with --executor ray: builds "
                   "at once, each reserving its share of the cluster's CPUs) [default: usable cores, fewer if "
                   "memory is short].")
@click.option("--gpus", default=None, metavar="N|I,J",
              help="GPUs to evaluate on, one worker each: a count (2) or indices (0,1; a single index as 3,) "
                   "[default: all visible]. Local executor only.")
@click.option("--executor", "executor_name", type=click.Choice(["local", "ray"]), default="local",
              show_default=True,
              help="Where builds and evaluations run: child processes on this machine, or Ray tasks on a "
                   "cluster (one evaluation per GPU of the cluster; needs pip install \"kbench[ray]\" and "
                   "problems, solutions and --cache-dir at the same paths on every node).")
@click.option("--ray-address", default=None, metavar="ADDR",
              help="With --executor ray: the cluster to join, auto (the one `ray start` runs on this machine) "
                   "or host:port [default: a new Ray instance on this machine, for this run].")
@run_options
def sweep_command(problems_dir, solutions_dir, filters, only_failed, resume, jobs, gpus, executor_name,
                  ray_address, as_json, out, **options) -> None:
    """Judge every solution under --solutions against its problem under --problems.

    Builds run in parallel first (cached), evaluations one per GPU as builds finish; every result is
    appended to --out the moment it exists, so Ctrl-C or a crash leaves a valid CSV and --resume
    picks up where it stopped. Ends with the report of this run (see `kbench report`).
    """
    from kbench.schedule.child import new_run_id
    from kbench.schedule.pool import worker_pool
    from kbench.schedule.sweep import select_pairs

    config = build_config(**options)
    if executor_name == "local":
        worker_pool().start_fork_server(waiting=False)  # its import of torch beside this process's
    executor, devices = _or_usage_error(executor_and_devices, executor_name, ray_address, config.device, gpus)
    pairs, unpaired, skipped = select_pairs(problems_dir, solutions_dir, filters, out if only_failed else None,
                                            out if resume else None, config, devices[0])
    console = Console(stderr=True)
    print_unpaired(unpaired, problems_dir)
    if skipped:
        console.print(f"resume: {skipped} pair(s) already in {out} with the same settings")
    if not pairs:
        if unpaired or not skipped:
            raise _OneLineError(f"no solution under {solutions_dir} pairs with a problem under {problems_dir} "
                              "(KernelBench run files need KernelBench's root or the level's folder)")
        console.print("nothing to evaluate")
        sys.exit(EXIT_ALL_CORRECT)
    run_id = new_run_id()
    results = run_with_progress(pairs, config, devices, jobs, out, as_json, run_id=run_id, executor=executor,
                                resume_hint="; run the same command with --resume to judge the rest")
    if as_json:
        click.echo(json.dumps([result.to_row() for result in results], indent=2))
    else:
        print_report(out, run_id)
        console.print(f"{len(results)} results appended to {out} (run {run_id})")
    warn_if_noisy(results)
    sys.exit(EXIT_SOME_NOT_CORRECT if unpaired else _exit_code(results))


@main.command("report")
@click.argument("csvs", nargs=-1, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--format", "output_format", type=click.Choice(["table", "markdown", "json", "csv"]),
              default="table", show_default=True, help="How to print the summary.")
@click.option("--run-id", default=None, help="Only rows of this run.")
@click.option("--plot", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also draw the best speedup per problem into this PNG (needs matplotlib).")
@click.option("--failures", "all_failures", is_flag=True,
              help=f"List every failure [default: the first {FAILURES_SHOWN} per status].")
@click.option("--kernelbench", "kernelbench_path", type=click.Path(exists=True, path_type=Path), default=None,
              help="Also list where KernelBench's verdicts disagree with kbench's: a KernelBench run folder or "
                   "its eval_results.json (--format table or json).")
def report_command(csvs, output_format, run_id, plot, all_failures, kernelbench_path) -> None:
    """Summarise a results CSV [default: results/results.csv]: best solution and speedup per problem,
    the solutions that failed and why, counts per status, the geometric-mean speedup of correct
    results and fast_p (share of problems with a correct solution faster than p x the reference, p in
    0, 0.5, 0.8, 1, 1.5, 2) two ways: trusted (correct at the official sizes, no flag but throttled)
    and KernelBench's (correct at the official sizes).
    With two CSVs, compare them problem by problem. Rows are the latest per problem and solution.
    With --kernelbench, also the candidates KernelBench's own verdicts disagree on, with kbench's evidence.
    """
    from kbench.report import summary
    from kbench.report.kernelbench_verdicts import compare, comparison_renderables
    from kbench.report.tables import comparison_table, summary_markdown

    paths = list(csvs) or [Path("results/results.csv")]
    if len(paths) > 2:
        raise click.UsageError("give one CSV to summarise or two to compare")
    if kernelbench_path and (len(paths) == 2 or output_format not in ("table", "json")):
        raise click.UsageError("--kernelbench goes with one CSV and --format table or json")
    frames = [_load_results(path, run_id) for path in paths]
    try:  # before the report, so that a JSON it cannot read stops with one line, not half an output
        verdicts = compare(kernelbench_path, paths[0], run_id) if kernelbench_path else None
    except ValueError as error:
        raise click.UsageError(f"--kernelbench: {error}")
    if len(frames) == 2:
        comparison = summary.compare(*frames)
        if output_format == "json":
            click.echo(comparison.to_json(orient="records", indent=2))
        elif output_format == "csv":
            click.echo(comparison.to_csv(index=False), nl=False)
        else:
            console = wide_console()
            console.print(comparison_table(comparison, str(paths[0]), str(paths[1]), width=console.width))
        return
    result = summary.summarise(frames[0])
    limit = None if all_failures else FAILURES_SHOWN
    if output_format == "json":
        kernelbench = {"kernelbench": verdicts.to_dict()} if verdicts else {}
        click.echo(json.dumps({**result.to_dict(), **kernelbench}, indent=2))
    elif output_format == "csv":
        click.echo(result.best.to_csv(index=False), nl=False)
    elif output_format == "markdown":
        click.echo(summary_markdown(result, limit))
    else:
        print_summary(result, limit)
        if verdicts:
            console = wide_console()
            for renderable in comparison_renderables(verdicts, width=console.width):
                console.print(renderable)  # one print each: print(*many) puts texts on one line
    if plot:
        _plot(result, plot)


def _plot(result, path: Path) -> None:
    try:
        from kbench.report.plot import BadPlotPath, plot_best, plot_title
    except ImportError:
        raise click.UsageError("--plot needs matplotlib: pip install 'kbench[plot]'")
    try:
        plot_best(result.best, path, plot_title(result))
    except BadPlotPath as error:
        raise _OneLineError(f"--plot {path}: {error}")
    Console(stderr=True).print(f"plot written to {path}")


def _load_results(path: Path, run_id: str | None):
    from kbench.report import summary

    if not path.is_file():
        hint = ("run `kbench eval` or `kbench sweep` first (they append to it), or name a CSV: kbench report "
                "PATH") if path == Path("results/results.csv") else "check the path"
        raise _OneLineError(f"no results CSV at {path}: {hint}")
    try:
        frame = summary.load(path, run_id)
    except ValueError as error:
        raise click.UsageError(f"{path}: not a kbench results CSV ({summary.first_line(error)})")
    if frame.empty:
        raise click.UsageError(f"{path}: no results" + (f" for run {run_id}" if run_id else ""))
    return frame


def _exit_code(results) -> int:
    return EXIT_ALL_CORRECT if all(r.status == Status.CORRECT for r in results) else EXIT_SOME_NOT_CORRECT


@main.command("list")
@click.option("--problems", "problems_dir", default=Path("problems"), show_default=True,
              type=click.Path(exists=True, file_okay=False, path_type=Path), help="Folder of problem files.")
@click.option("--solutions", "solutions_dir", default=Path("solutions"), show_default=True,
              type=click.Path(file_okay=False, path_type=Path), help="Folder of solution files.")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON instead of a table.")
def list_command(problems_dir, solutions_dir, as_json) -> None:
    """List problems (family, official sizes, sweep space) and the solutions paired with them."""
    from kbench.report.catalog import describe_problems, unpaired_solutions
    from kbench.report.tables import problems_table
    from kbench.solution import problem_files

    if not problem_files(problems_dir):
        raise _OneLineError(f"no problem files under {problems_dir} (a folder of .py problems, KernelBench's root "
                            "or one of its level folders)")
    entries = describe_problems(problems_dir, solutions_dir)
    print_unpaired(unpaired_solutions(problems_dir, solutions_dir), problems_dir)
    if as_json:
        click.echo(json.dumps([entry.__dict__ for entry in entries], indent=2, default=str))
    else:
        console = wide_console()
        console.print(problems_table(entries, width=console.width))


def _or_usage_error(call, *arguments, hint: str = ""):
    """call(*arguments), with kbench's expected refusals (a device it cannot use, a solution no problem pairs
    with) as one-line usage errors, `hint` after the message."""
    try:
        return call(*arguments)
    except (DeviceError, PairingError) as error:
        raise click.UsageError(f"{error}; {hint}" if hint else str(error))


if __name__ == "__main__":
    main()
