"""Rich tables and markdown from results and summaries. Pure: functions return renderables, they do not print.

Tables fit the width they are given: status and speedup are never cut; paths and names fold or are
shortened, and the least useful columns are left out when the width is short (80 columns included).
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.console import Group
from rich.table import Table
from rich.text import Text

from kbench import stats
from kbench.names import problem_label, short_path, short_problem
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
FAILURES_SHOWN = 3   # failures listed per status before "... N more" (kbench report --failures: all)
PROBLEM_WIDTH = 30   # problem labels in tables: KernelBench id and a shortened name
REASON_CHARACTERS = 120  # a failure's reason in the table (--format json has all of it)
WRAP_MIN = 16        # narrowest a folding column (paths, names, messages) may get


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


def format_status(status: str) -> Text:
    return Text(status, style=STATUS_STYLE.get(status, ""))


def format_sweep(result: Result) -> Text:
    sweep = result.sweep
    if sweep is None:
        return Text("-")
    text = f"{sweep.passed}/{sweep.run}" + (f" ({sweep.skipped} skipped)" if sweep.skipped else "")
    return Text(text, style="green" if sweep.passed == sweep.run else "red")


@dataclass(frozen=True)
class Column:
    header: str
    cells: list               # one str or Text per row
    justify: str = "left"
    wrap: bool = False        # long cells fold onto more lines (paths, messages); other columns are never cut
    drop: int = 0             # 0: always shown; when the width is short, the highest are left out first
    least: int = WRAP_MIN     # a folding column is left out rather than made narrower than this

    def widest(self) -> int:
        return max([len(self.header)] + [len(line) for cell in self.cells for line in str(cell).splitlines()])

    def needs(self) -> int:
        """Characters this column needs: its widest cell (or header), or `least` when it may fold."""
        return min(self.widest(), self.least) if self.wrap else self.widest()


def fit_columns(columns: list[Column], width: int | None) -> list[Column]:
    """The columns shown at `width` (None: all): those never left out (room kept for their cells, up to 40
    characters), then the others by `drop`, lowest first, those of equal `drop` together while they fit."""
    if not width:
        return list(columns)
    used = 1 + sum(min(column.widest(), max(column.needs(), 40)) + 3 for column in columns if not column.drop)
    kept = {id(column) for column in columns if not column.drop}
    for drop in sorted({column.drop for column in columns if column.drop}):
        group = [column for column in columns if column.drop == drop]
        if used + sum(column.needs() + 3 for column in group) <= width:
            used += sum(column.needs() + 3 for column in group)
            kept |= {id(column) for column in group}
    return [column for column in columns if id(column) in kept]


def fitted_table(columns: list[Column], width: int | None = None, **options) -> Table:
    """A table of the columns that fit `width` (None: all, each as wide as its cells need)."""
    kept = fit_columns(columns, width)
    widths = _folding_widths(kept, width) if width else {}
    table = Table(header_style="bold", **options)
    for index, column in enumerate(kept):
        if column.wrap:
            table.add_column(column.header, justify=column.justify, overflow="fold", width=widths.get(index))
        else:
            table.add_column(column.header, justify=column.justify, no_wrap=True, min_width=column.needs())
    for row in range(len(columns[0].cells) if columns else 0):
        table.add_row(*[column.cells[row] for column in kept])
    return table


def _folding_widths(columns: list[Column], width: int) -> dict[int, int]:
    """Widths of the folding columns: each gets its `least`, then what is left goes to them in order, each up
    to its widest cell, so that a path is whole before a message gets wider (a message wraps at spaces,
    a path only mid-name)."""
    folding = [index for index, column in enumerate(columns) if column.wrap]
    spare = width - 1 - sum(column.needs() + 3 for column in columns)
    widths = {}
    for index in folding:
        column = columns[index]
        widths[index] = min(column.widest(), column.needs() + max(spare, 0))
        spare -= widths[index] - column.needs()
    return widths


def _timing_cell(timing) -> str:
    if timing is None:
        return "-"
    return format_ms(timing.median_ms) + (f" ±{timing.iqr_ms / 2:.2g}" if timing.count > 1 else "")


def _message(result: Result) -> Text:
    message = result.message
    if result.flags:
        message = f"[flags: {', '.join(result.flags)}] {message}".strip()
    return Text(message)  # plain text: "[flags: ...]" is not rich markup


def results_table(results: list[Result], title: str | None = None, width: int | None = None):
    """One row per result: verdict, correctness numbers, median times and speedup, and why. Where the width
    leaves the messages too little room, they follow the table, one per line."""
    baselines = sorted({name for result in results for name, _ in result.baselines})
    cell = lambda function: [function(result) for result in results]
    columns = [
        Column("solution", cell(lambda r: short_path(r.solution)), wrap=True),
        Column("problem", cell(lambda r: short_problem(r.problem, 24)), drop=4),
        Column("status", cell(lambda r: format_status(r.status))),
        Column("trials", cell(lambda r: f"{r.check.trials_passed}/{r.check.trials_total}" if r.check else "-"),
               justify="right", drop=3),
        Column("max err", cell(lambda r: format_error(r.check.max_abs_err if r.check else None)), "right", drop=6),
        Column("ref ms", cell(lambda r: _timing_cell(r.reference_timing)), "right", drop=1),
        Column("cand ms", cell(lambda r: _timing_cell(r.candidate_timing)), "right", drop=1),
        Column("speedup", cell(lambda r: format_speedup(r.speedup)), "right"),
        *[Column(f"vs {name}", cell(lambda r, name=name: format_speedup(r.baseline_speedup(name))), "right",
                 drop=5) for name in baselines],
        Column("sweep", cell(format_sweep), "right", drop=5),
        Column("build s", cell(lambda r: "-" if r.build_s is None else f"{r.build_s:.1f}" + (
            " (cached)" if r.build_reused else "")), "right", drop=7),
    ]
    if any(result.sizes for result in results):
        columns.append(Column("sizes", cell(lambda r: r.sizes or "official"), wrap=True, drop=4))
    message = Column("message", cell(_message), wrap=True, drop=2, least=40)
    if message in fit_columns(columns + [message], width) or not any(cell.plain for cell in message.cells):
        return fitted_table(columns + [message], width, title=title)
    notes = [Text(f"{short_path(result.solution)}: ", style="bold") + _message(result)
             for result in results if _message(result).plain]
    return Group(fitted_table(columns, width, title=title), *notes)


def problems_table(entries, width: int | None = None) -> Table:
    """`kbench list`: one row per problem."""
    def sweep(entry) -> Text:
        if entry.error:
            return Text("")
        return Text(("declared: " if entry.sweep_declared else "derived: ") + ", ".join(entry.sweep))

    solutions = [Text("\n".join(entry.solutions) or "-") for entry in entries]
    names = max((len(name) for entry in entries for name in entry.solutions), default=0)
    sizes = [Text(entry.error, style="red") if entry.error else
             Text(" ".join(f"{name}={value}" for name, value in entry.sizes.items())) for entry in entries]
    columns = [
        Column("problem", [problem_label(entry.name, entry.level, PROBLEM_WIDTH) for entry in entries]),
        Column("family", [entry.family for entry in entries], drop=3),
        Column("KernelBench", [entry.kernelbench for entry in entries], wrap=True, drop=4),
        Column("official sizes", sizes, wrap=True, drop=1),
        Column("sweep space", [sweep(entry) for entry in entries], wrap=True, drop=2),
        Column("solutions", solutions, wrap=True, least=max(WRAP_MIN, min(40, names))),  # a name whole
    ]
    return fitted_table(columns, width)


def _count(value) -> str:
    number = stats.finite_number(value)
    return "-" if number is None else str(int(number))


def best_table(best, width: int | None = None) -> Table:
    """Best correct solution per problem (summary.best_per_problem)."""
    rows = best.to_dict("records")
    solution = lambda row: short_path(row["best_solution"]) if isinstance(row["best_solution"], str) else "-"
    columns = [
        Column("problem", [problem_label(row["problem"], row.get("level"), PROBLEM_WIDTH) for row in rows]),
        Column("tried", [str(row["solutions"]) for row in rows], "right", drop=3),
        Column("correct", [str(row["correct"]) for row in rows], "right", drop=2),
        Column("best solution", [solution(row) for row in rows], wrap=True, drop=1, least=22),
        Column("ref ms", [format_ms(stats.finite_number(row["ref_median_ms"])) for row in rows], "right", drop=4),
        Column("cand ms", [format_ms(stats.finite_number(row["cand_median_ms"])) for row in rows], "right", drop=4),
        Column("speedup", [format_speedup(stats.finite_number(row["best_speedup"])) for row in rows], "right"),
        Column("flags", [row.get("best_flags") or "" for row in rows], wrap=True, drop=5),
    ]
    if not any(row.get("best_flags") for row in rows):
        columns.pop()
    return fitted_table(columns, width, title="best correct solution per problem")


def cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 1] + "…"


def collapsed_failures(failures, limit: int | None = FAILURES_SHOWN) -> tuple[list[dict], dict[str, int]]:
    """The failure rows to show (the first `limit` per status; None: all) and how many are left out per status."""
    shown, hidden = [], {}
    for row in failures.to_dict("records"):
        listed = sum(1 for kept in shown if kept["status"] == row["status"])
        if limit is None or listed < limit:
            shown.append(row)
        else:
            hidden[row["status"]] = hidden.get(row["status"], 0) + 1
    return shown, hidden


def failures_table(failures, limit: int | None = FAILURES_SHOWN, width: int | None = None) -> Table | None:
    """Solutions that failed (or are correct with a disqualifying flag) and why; None when there are none."""
    if failures.empty:
        return None
    shown, hidden = collapsed_failures(failures, limit)
    for status, count in hidden.items():
        shown.append({"status": status, "problem": "", "solution": f"... {count} more", "reason": ""})
    columns = [
        Column("status", [format_status(row["status"]) for row in shown]),
        Column("problem", [short_problem(row["problem"], 24) if row["problem"] else "" for row in shown], drop=2),
        Column("solution", [short_path(row["solution"]) for row in shown], wrap=True, least=20),
        Column("reason", [Text(cut(row["reason"] or "", REASON_CHARACTERS)) for row in shown], wrap=True, least=30),
    ]
    title = "failures and flags" + (" (kbench report --failures: all)" if hidden else "")
    return fitted_table(columns, width, title=title)


def fast_p_table(summary) -> Table:
    """fast_p both ways: trusted (kbench's headline) and KernelBench's."""
    table = Table(title="problems solved faster than p x", header_style="bold")
    for header in ("p", "trusted", "KernelBench"):
        table.add_column(header, justify="right", no_wrap=True)
    for p, value in summary.fast_p.items():
        table.add_row(f"fast_{p:g}", f"{value:.1%}", f"{summary.fast_p_kernelbench[p]:.1%}")
    return table


def totals_table(summary) -> Table:
    title = f"{summary.results} result{'s' * (summary.results != 1)}, {summary.problems} problem" + \
        "s" * (summary.problems != 1)
    totals = Table(title=title, header_style="bold")
    totals.add_column("status", no_wrap=True)
    totals.add_column("count", justify="right", no_wrap=True)
    for status, count in summary.status_counts.items():
        totals.add_row(format_status(status), str(count))
    totals.add_row("geomean speedup", format_speedup(summary.geometric_mean_speedup))
    return totals


def summary_tables(summary, failures_limit: int | None = FAILURES_SHOWN, width: int | None = None) -> list:
    """`kbench report`: best per problem, failures, then status counts beside fast_p both ways, and notes."""
    tables = [best_table(summary.best, width), failures_table(summary.failures, failures_limit, width)]
    side_by_side = Table.grid(padding=(0, 3))
    side_by_side.add_row(totals_table(summary), fast_p_table(summary))
    notes = [Text(note, style="dim") for note in summary_notes(summary)]
    return [table for table in tables if table is not None] + [side_by_side] + notes


def summary_notes(summary) -> list[str]:
    notes = ["geomean speedup: of every correct result",
             "fast_p, trusted: correct, official sizes, no flag but throttled",
             "fast_p, KernelBench: correct, official sizes"]
    skipped = summary.status_counts.get(Status.SKIPPED, 0)
    if skipped:
        notes.append(f"{skipped} skipped: CUDA solutions need a GPU; on a CPU, C++ and plain-PyTorch solutions run "
                     "(try the quick start: kbench eval examples/solutions/swish/*.py)")
    if summary.reduced_sizes:
        notes.append(f"{summary.reduced_sizes} correct result(s) ran at reduced sizes (CPU): in neither fast_p "
                     "(--full-size runs official sizes)")
    return notes


def comparison_table(comparison, label_a: str, label_b: str, width: int | None = None) -> Table:
    rows = comparison.to_dict("records")

    def ratio(row) -> Text:
        value = stats.finite_number(row["ratio_b_over_a"])
        return Text("-") if value is None else Text(f"{value:.3g}", style="green" if value >= 1 else "red")

    columns = [
        Column("problem", [short_problem(row["problem"], PROBLEM_WIDTH) for row in rows]),
        Column("correct a", [_count(row["correct_a"]) for row in rows], "right", drop=1),
        Column("correct b", [_count(row["correct_b"]) for row in rows], "right", drop=1),
        Column("speedup a", [format_speedup(stats.finite_number(row["best_speedup_a"])) for row in rows], "right"),
        Column("speedup b", [format_speedup(stats.finite_number(row["best_speedup_b"])) for row in rows], "right"),
        Column("b / a", [ratio(row) for row in rows], "right"),
    ]
    return fitted_table(columns, width, title=f"{label_a} (a) vs {label_b} (b)")


def _markdown(headers: list[str], rows: list[list[str]], right: set[str] = frozenset()) -> list[str]:
    lines = ["| " + " | ".join(headers) + " |",
             "| " + " | ".join("---:" if header in right else "---" for header in headers) + " |"]
    return lines + ["| " + " | ".join(str(cell).replace("|", "\\|") for cell in row) + " |" for row in rows]


def summary_markdown(summary, failures_limit: int | None = FAILURES_SHOWN) -> str:
    """The summary as markdown tables: best per problem, failures, counts, fast_p both ways."""
    speedup = lambda value: "-" if stats.finite_number(value) is None else f"{stats.finite_number(value):.3g}x"
    best = [[row["problem"], row["solutions"], row["correct"],
             row["best_solution"] if isinstance(row["best_solution"], str) else "-",
             format_ms(stats.finite_number(row["ref_median_ms"])),
             format_ms(stats.finite_number(row["cand_median_ms"])),
             speedup(row["best_speedup"])] for row in summary.best.to_dict("records")]
    lines = _markdown(["problem", "solutions", "correct", "best solution", "ref ms", "cand ms", "speedup"], best,
                      {"solutions", "correct", "ref ms", "cand ms", "speedup"})
    shown, hidden = collapsed_failures(summary.failures, failures_limit)
    if shown:
        failures = [[row["status"], row["problem"], row["solution"], row["reason"]] for row in shown]
        failures += [[status, "", f"... {count} more", ""] for status, count in hidden.items()]
        lines += [""] + _markdown(["status", "problem", "solution", "reason"], failures)
    counts = [[status, count] for status, count in summary.status_counts.items()]
    counts.append(["geomean speedup", speedup(summary.geometric_mean_speedup)])
    lines += [""] + _markdown(["status", "count"], counts, {"count"})
    fast = [[f"fast_{p:g}", f"{value:.1%}", f"{summary.fast_p_kernelbench[p]:.1%}"]
            for p, value in summary.fast_p.items()]
    lines += [""] + _markdown(["p", "trusted", "KernelBench"], fast, {"trusted", "KernelBench"})
    return "\n".join(lines + [""] + [f"{note}." for note in summary_notes(summary)])
