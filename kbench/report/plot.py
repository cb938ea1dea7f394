"""The speedup plot of `kbench report --plot`: the best speedup per problem, one bar each, on a log axis.

Bars grow from 1x (right: faster than the reference, left: slower) and are coloured by outcome; a
problem without a correct solution gets a grey mark at 1x and the status most of its solutions got.
Needs matplotlib (pip install "kbench[plot]").
"""

from __future__ import annotations

import math
from pathlib import Path

from kbench.names import problem_label

# outcome (summary.best_per_problem) -> bar colour and legend entry; colour-blind safe (ColorBrewer Dark2)
OUTCOMES = {
    "faster": ("#1b9e77", "correct, faster than the reference"),
    "slower": ("#d95f02", "correct, slower than the reference"),
    "untimed": ("#7570b3", "correct, not timed"),
}
FAILED = ("#9e9e9e", "no trusted correct solution (flagged, or the most common status)")
TICKS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)
ROW_INCHES = 0.24     # height per problem: labels never overlap
HEADER_INCHES = 1.0   # title and legend
LABEL_CHARACTERS = 34


def plot_title(summary) -> str:
    """Run and device on the first line; problems solved and trusted fast_1 on the second."""
    runs = f"run {summary.run_ids[0]}" if len(summary.run_ids) == 1 else f"{len(summary.run_ids)} runs"
    devices = ", ".join(summary.devices) or "unknown device"
    solved = int((summary.best["correct"] > 0).sum()) if len(summary.best) else 0
    trusted = summary.fast_p.get(1.0, 0.0)
    return (f"kbench: best speedup per problem, {runs} on {devices}\n"
            f"{summary.problems} problems, {solved} with a correct solution; fast_1 {trusted:.0%} (trusted)")


class BadPlotPath(ValueError):
    """A file name whose extension matplotlib cannot write, or in a folder that does not exist."""


def plot_best(best, path, title: str = "kbench: best speedup per problem") -> None:
    """Draw summary.best_per_problem into an image at `path` (in a folder that exists; the format from its
    extension): fastest at the top, unsolved at the bottom. Raises BadPlotPath before drawing anything."""
    import matplotlib
    from matplotlib.backend_bases import FigureCanvasBase

    path = Path(path)
    formats = FigureCanvasBase.get_supported_filetypes()
    if path.suffix.lstrip(".").lower() not in formats:
        raise BadPlotPath(f"name a file ending in one of .{', .'.join(sorted(formats))} (.png, say)")
    if not path.parent.is_dir():  # a mistyped folder is the user's to fix, not kbench's to make
        raise BadPlotPath(f"no folder {path.parent}")

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = _ordered(best.to_dict("records"))
    height = ROW_INCHES * len(rows) + HEADER_INCHES + 0.9
    figure, axis = plt.subplots(figsize=(10, height))
    low, high = _limits([row["best_speedup"] for row in rows if _solved(row)])
    for index, row in enumerate(rows):
        _draw_row(axis, index, row)
    labels = [problem_label(str(row["problem"]), row.get("level"), LABEL_CHARACTERS) for row in rows]
    axis.set_yticks(range(len(rows)), labels, fontsize=8)
    axis.set_ylim(-0.7, len(rows) - 0.3)
    _log_axis(axis, low, high)
    axis.set_xlabel("best speedup over the reference (log scale)")
    # Title, then the legend, above the plot: a tall plot is read from the top.
    figure.text(0.01, 1 - 0.1 / height, title, va="top", ha="left", fontsize=10)
    figure.legend(handles=_legend_handles(rows), loc="upper left", bbox_to_anchor=(0.01, 1 - 0.5 / height),
                  ncol=2, fontsize=8, frameon=False)
    figure.tight_layout(rect=(0, 0, 1, 1 - HEADER_INCHES / height))
    figure.savefig(path, dpi=110)
    plt.close(figure)


def speedup_label(value: float) -> str:
    """Three significant digits, as in the tables: 1.05x (not 1x), 0.336x, 12.1x, 150x."""
    return f"{value:.3g}x"


def _solved(row) -> bool:
    return row.get("outcome") in OUTCOMES and row.get("best_speedup") is not None


def _ordered(rows: list[dict]) -> list[dict]:
    """Bottom to top: problems without a timed correct solution (grouped by status), then by speedup
    (fastest at the top)."""
    return sorted(reversed(rows), key=lambda row: (_solved(row), row["best_speedup"] if _solved(row) else 0.0,
                                                   "" if _solved(row) else str(row.get("outcome"))))


def _limits(speedups: list[float]) -> tuple[float, float]:
    """The axis: every bar and its label fits, and at least 0.5x to 2x is shown."""
    low = min(speedups + [1.0]) / 1.6
    high = max(speedups + [1.0]) * 2.4
    return min(low, 0.5), max(high, 2.0)


def _draw_row(axis, index: int, row: dict) -> None:
    if not _solved(row):
        status = {"untimed": "correct, not timed", "flagged": "correct, all flagged"}.get(
            row.get("outcome"), row.get("outcome") or "none")
        axis.plot([1.0], [index], marker="x", color=FAILED[0], markersize=5)
        axis.text(1.0, index, f"  {status}", va="center", ha="left", fontsize=7, color="#616161")
        return
    value = float(row["best_speedup"])
    colour = OUTCOMES[row["outcome"]][0]
    axis.barh(index, value - 1.0, left=1.0, height=0.7, color=colour)
    label = speedup_label(value)
    if value >= 1:
        axis.text(value * 1.03, index, label, va="center", ha="left", fontsize=7)
    else:
        axis.text(value / 1.03, index, label, va="center", ha="right", fontsize=7)


def _log_axis(axis, low: float, high: float) -> None:
    """Log x axis with a few labelled ticks (0.5x, 1x, 2x ...), on top and bottom for tall plots."""
    from matplotlib.ticker import NullFormatter, NullLocator

    axis.set_xscale("log")
    axis.set_xlim(low, high)
    ticks = [tick for tick in TICKS if low <= tick <= high]
    if math.log10(high / low) > 3.5:  # a wide axis: powers of ten only, or the labels collide
        ticks = [tick for tick in ticks if math.log10(tick).is_integer()]
    axis.set_xticks(ticks, [f"{tick:g}x" for tick in ticks], fontsize=8)
    axis.xaxis.set_minor_locator(NullLocator())
    axis.xaxis.set_minor_formatter(NullFormatter())
    axis.tick_params(axis="x", top=True, labeltop=True)
    axis.grid(axis="x", color="#dddddd", linewidth=0.6)
    axis.set_axisbelow(True)
    axis.axvline(1.0, color="black", linewidth=1)


def _legend_handles(rows: list[dict]) -> list:
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    present = {row.get("outcome") for row in rows if _solved(row)}
    handles = [Patch(color=colour, label=label) for outcome, (colour, label) in OUTCOMES.items()
               if outcome in present]
    if any(not _solved(row) for row in rows):
        handles.append(Line2D([], [], marker="x", linestyle="", color=FAILED[0], label=FAILED[1]))
    return handles
