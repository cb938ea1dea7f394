"""Names as people read them: natural order (2 before 10 before 100) and short problem labels."""

from __future__ import annotations

import re

_DIGITS = re.compile(r"(\d+)")
_KERNELBENCH_STEM = re.compile(r"^(\d+)_+(.*)$")


def natural_key(text: str) -> tuple:
    """Sort key that compares runs of digits as numbers: 2_relu < 10_gelu < 100_hinge."""
    return tuple((0, int(part), "") if part.isdigit() else (1, 0, part.lower())
                 for part in _DIGITS.split(str(text)) if part)


def natural_sorted(items, key=lambda item: item) -> list:
    return sorted(items, key=lambda item: natural_key(str(key(item))))


# Words shortened, in this order, when a label is too long (KernelBench's level-1 names are up to 99 characters).
ABBREVIATIONS = [("conv transposed", "convT"), ("multiplication", "mult"), ("asymmetric", "asym"),
                 ("square", "sq"), ("standard ", ""), ("dimension", "dim"), ("kernel", "kern"),
                 ("input", "in")]


def short_problem(stem: str, width: int = 36) -> str:
    """A problem label that fits: KernelBench's id, then the name with underscores as spaces, common words
    abbreviated when too long, cut to width (other names are only cut).

    75_conv_transposed_2D_asymmetric_input_asymmetric_kernel_strided__grouped____padded____dilated__
    becomes "75 convT 2D asym in asym kern strid…".
    """
    match = _KERNELBENCH_STEM.match(stem)
    if not match:  # kbench's own names (convt1d_dilated) stay as typed, e.g. in --filter
        return stem if len(stem) <= width else stem[:width - 1] + "…"
    label = " ".join(part for part in [match.group(1)] + match.group(2).split("_") if part)
    for long, short in ABBREVIATIONS:
        if len(label) <= width:
            break
        label = label.replace(long, short)
    return label if len(label) <= width else label[:width - 1].rstrip() + "…"


def problem_label(stem: str, level, width: int = 36) -> str:
    """short_problem with KernelBench's level in front when the problem's folder names one ("L2 12 Gemm…"):
    two levels' problem 12 are told apart."""
    if isinstance(level, (int, float)) and level == level:
        return f"L{int(level)} " + short_problem(stem, width - len(f"L{int(level)} "))
    return short_problem(stem, width)


def short_path(path: str, width: int = 40) -> str:
    """parent/name, enough to tell solutions/convt1d/seed000.py from solutions/convt2d/seed000.py; the name
    alone when that is too long (KernelBench run files: level_1_problem_75_sample_0_kernel.py)."""
    parts = str(path).replace("\\", "/").split("/")
    short = "/".join(parts[-2:])
    return short if len(short) <= width else parts[-1]
