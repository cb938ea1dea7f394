"""Rich tables from results. Pure: functions return renderables, they do not print."""

from __future__ import annotations

import math

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
    Status.INFRA_ERROR: "yellow",
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
    baseline_names = sorted({name for result in results for name, _ in result.baselines})
    table = Table(title=title, header_style="bold", expand=False)
    table.add_column("solution", overflow="fold")
    table.add_column("problem")
    table.add_column("status")
    table.add_column("trials", justify="right")
    table.add_column("max abs err", justify="right")
    table.add_column("ref ms", justify="right")
    table.add_column("cand ms", justify="right")
    table.add_column("speedup", justify="right")
    for name in baseline_names:
        table.add_column(f"vs {name}", justify="right")
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
            *[format_speedup(result.baseline_speedup(name)) for name in baseline_names],
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


def summary_tables(summary) -> list[Table]:
    """`kbench report`: best per problem, then status counts, fast_p and the geometric mean."""
    best = Table(title="best correct solution per problem", header_style="bold")
    for column, justify in (("problem", "left"), ("solutions", "right"), ("correct", "right"),
                            ("best solution", "left"), ("ref ms", "right"), ("cand ms", "right"),
                            ("speedup", "right")):
        best.add_column(column, justify=justify, overflow="fold")
    for row in summary.best.to_dict("records"):
        best.add_row(row["problem"], str(row["solutions"]), str(row["correct"]),
                     short_path(row["best_solution"]) if isinstance(row["best_solution"], str) else "-",
                     format_ms(_number(row["ref_median_ms"])), format_ms(_number(row["cand_median_ms"])),
                     format_speedup(_number(row["best_speedup"])))
    totals = Table(title=f"{summary.results} results over {summary.problems} problems", header_style="bold")
    totals.add_column("measure")
    totals.add_column("value", justify="right")
    for status, count in summary.status_counts.items():
        totals.add_row(Text(status, style=STATUS_STYLE.get(status, "")), str(count))
    for p, value in summary.fast_p.items():
        totals.add_row(f"fast_{p:g}", f"{value:.1%}")
    totals.add_row("geomean speedup (correct)", format_speedup(summary.geometric_mean_speedup))
    return [best, totals]


def summary_markdown(summary) -> str:
    lines = ["| problem | solutions | correct | best solution | ref ms | cand ms | speedup |",
             "| --- | ---: | ---: | --- | ---: | ---: | ---: |"]
    for row in summary.best.to_dict("records"):
        speedup = _number(row["best_speedup"])
        lines.append(f"| {row['problem']} | {row['solutions']} | {row['correct']} | "
                     f"{row['best_solution'] if isinstance(row['best_solution'], str) else '-'} | "
                     f"{format_ms(_number(row['ref_median_ms']))} | {format_ms(_number(row['cand_median_ms']))} | "
                     f"{'-' if speedup is None else f'{speedup:.3g}x'} |")
    lines += ["", "| measure | value |", "| --- | ---: |"]
    lines += [f"| {status} | {count} |" for status, count in summary.status_counts.items()]
    lines += [f"| fast_{p:g} | {value:.1%} |" for p, value in summary.fast_p.items()]
    geomean = summary.geometric_mean_speedup
    lines.append(f"| geomean speedup (correct) | {'-' if geomean is None else f'{geomean:.3g}x'} |")
    return "\n".join(lines)


def comparison_table(comparison, label_a: str, label_b: str) -> Table:
    table = Table(title=f"{label_a} (a) vs {label_b} (b)", header_style="bold")
    for column in ("problem", "correct a", "correct b", "speedup a", "speedup b", "b / a"):
        table.add_column(column, justify="left" if column == "problem" else "right")
    for row in comparison.to_dict("records"):
        ratio = _number(row["ratio_b_over_a"])
        table.add_row(row["problem"], _count(row["correct_a"]), _count(row["correct_b"]),
                      format_speedup(_number(row["best_speedup_a"])), format_speedup(_number(row["best_speedup_b"])),
                      Text("-" if ratio is None else f"{ratio:.3g}", style="" if ratio is None else
                           ("green" if ratio >= 1 else "red")))
    return table


def plot_best(best, path) -> None:
    """A horizontal bar per problem: its best speedup on a log axis, 1x marked; unsolved problems in grey."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter

    rows = best.sort_values("best_speedup", na_position="first").to_dict("records")
    speedups = [_number(row["best_speedup"]) for row in rows]
    values = [value if value is not None else 1.0 for value in speedups]
    colours = ["#bbbbbb" if value is None else ("#2e8b57" if value >= 1 else "#c0392b") for value in speedups]
    figure, axis = plt.subplots(figsize=(8, 0.35 * len(rows) + 1.5))
    # Bars grow from 1x: right for faster than the reference, left for slower.
    axis.barh([row["problem"] for row in rows], [value - 1.0 for value in values], left=1.0, color=colours)
    axis.set_xscale("log")
    spread = max(max(max(value, 1.0 / value) for value in values) * 1.3, 2.0)
    axis.set_xlim(1.0 / spread, spread)
    # Ticks at powers of two, labelled like the table ("0.5x"); matplotlib's own labels of a narrow log
    # axis overlap each other.
    ticks = [2.0 ** power for power in range(-int(math.log2(spread)), int(math.log2(spread)) + 1)]
    axis.set_xticks(ticks, [f"{tick:g}x" for tick in ticks])
    axis.xaxis.set_minor_formatter(NullFormatter())
    axis.axvline(1.0, color="black", linewidth=1)
    axis.set_xlabel("best speedup over the reference (log scale; grey: no correct solution)")
    for index, value in enumerate(speedups):
        # Beyond the bar's end: right of a faster bar, left of a slower one.
        if value is None:
            label, side = " none", "left"
        else:
            label, side = (f" {value:.2g}x", "left") if value >= 1 else (f"{value:.2g}x ", "right")
        axis.text(values[index], index, label, va="center", ha=side, fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def _number(value) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if number != number else number


def _count(value) -> str:
    number = _number(value)
    return "-" if number is None else str(int(number))
