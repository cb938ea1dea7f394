"""Rich tables from results. Pure: functions return renderables, they do not print."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from kbench.results import Result, Status

STATUS_STYLE = {
    Status.CORRECT: "bold green",
    Status.INCORRECT: "bold red",
    Status.REJECTED: "bold magenta",
    Status.LOAD_ERROR: "red",
    Status.COMPILE_ERROR: "red",
    Status.RUNTIME_ERROR: "red",
    Status.CRASHED: "bold red",
    Status.TIMEOUT: "yellow",
    Status.SKIPPED: "dim",
    Status.REFERENCE_ERROR: "yellow",
}


def format_ms(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.4g}" if value < 1000 else f"{value:,.0f}"


def format_error(value: float | None) -> str:
    return "-" if value is None else f"{value:.2e}"


def format_speedup(value: float | None) -> Text:
    if value is None:
        return Text("-")
    return Text(f"{value:.3g}x", style="green" if value >= 1 else "red")


def format_sweep(result: Result) -> Text:
    sweep = result.sweep
    if sweep is None:
        return Text("-")
    text = f"{sweep.passed}/{sweep.run}" + (f" ({sweep.skipped} skipped)" if sweep.skipped else "")
    return Text(text, style="green" if sweep.passed == sweep.run else "red")


def short_path(path: str) -> str:
    """parent/name: enough to tell solutions/convt1d/seed000.py from solutions/convt2d/seed000.py."""
    parts = path.replace("\\", "/").split("/")
    return "/".join(parts[-2:])


def results_table(results: list[Result], title: str | None = None) -> Table:
    """One row per result: verdict, correctness numbers, median times and speedup, and why."""
    show_sizes = any(result.sizes for result in results)
    table = Table(title=title, header_style="bold", expand=False)
    table.add_column("solution", overflow="fold")
    table.add_column("problem")
    table.add_column("status")
    table.add_column("trials", justify="right")
    table.add_column("max abs err", justify="right")
    table.add_column("ref ms", justify="right")
    table.add_column("cand ms", justify="right")
    table.add_column("speedup", justify="right")
    table.add_column("sweep", justify="right")
    table.add_column("build s", justify="right")
    if show_sizes:
        table.add_column("sizes")
    table.add_column("message", overflow="fold", max_width=80)
    for result in results:
        check = result.check
        ref = result.reference_timing
        cand = result.candidate_timing
        message = result.message
        if result.flags:
            message = f"[flags: {', '.join(result.flags)}] {message}".strip()
        cells = [
            short_path(result.solution),
            result.problem,
            Text(result.status, style=STATUS_STYLE.get(result.status, "")),
            f"{check.trials_passed}/{check.trials_total}" if check else "-",
            format_error(check.max_abs_err if check else None),
            format_ms(ref.median_ms if ref else None) + (f" ±{ref.iqr_ms / 2:.2g}" if ref and ref.count > 1 else ""),
            format_ms(cand.median_ms if cand else None) + (f" ±{cand.iqr_ms / 2:.2g}" if cand and cand.count > 1 else ""),
            format_speedup(result.speedup),
            format_sweep(result),
            "-" if result.build_s is None else f"{result.build_s:.1f}" + (" (cached)" if result.build_reused else ""),
        ]
        if show_sizes:
            cells.append(result.sizes or "official")
        cells.append(Text(message))  # plain text: "[flags: ...]" is not rich markup
        table.add_row(*cells)
    return table


def problems_table(entries) -> Table:
    """`kbench list`: one row per problem."""
    table = Table(header_style="bold")
    table.add_column("problem")
    table.add_column("family")
    table.add_column("KernelBench", overflow="fold", max_width=28)
    table.add_column("official sizes", overflow="fold", max_width=48)
    table.add_column("sweep space", overflow="fold", max_width=40)
    table.add_column("solutions", overflow="fold", max_width=40)
    for entry in entries:
        if entry.error:
            table.add_row(entry.name, "", "", Text(entry.error, style="red"), "", "\n".join(entry.solutions))
            continue
        sizes = " ".join(f"{name}={value}" for name, value in entry.sizes.items())
        sweep = ("declared: " if entry.sweep_declared else "derived: ") + ", ".join(entry.sweep)
        table.add_row(entry.name, entry.family, entry.kernelbench, Text(sizes), Text(sweep),
                      Text("\n".join(entry.solutions) or "-"))
    return table
