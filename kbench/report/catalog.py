"""What is in a problems folder and which solutions pair with each problem (for `kbench list`)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from kbench.names import natural_key, natural_sorted
from kbench.solution import Unpaired, find_pairs, folder_level, problem_files


@dataclass(frozen=True)
class ProblemEntry:
    name: str                 # file stem
    path: str
    family: str               # KBENCH_FAMILY, or "" when the file does not say
    kernelbench: str          # "L1 #64 64_conv_transposed_1D", or ""
    sizes: dict               # official values of the globals get_inputs()/get_init_inputs() read
    sweep: dict               # sweep space: global -> values
    sweep_declared: bool      # True: KBENCH_SWEEP in the file; False: derived by kbench
    small: dict               # overrides used on a CPU device
    solutions: list           # solution files paired with this problem
    error: str = ""           # why the file could not be loaded, if it could not
    level: int | None = None  # the KernelBench level its folder names (level2/ -> 2), None when it names none


def describe_problems(problems_dir: Path, solutions_dir: Path) -> list[ProblemEntry]:
    from kbench import params
    from kbench.problem import load_module

    paired = _paired_solutions(problems_dir, solutions_dir)
    entries = []
    for path in natural_sorted(problem_files(problems_dir), key=lambda path: f"{path.parent.name}/{path.name}"):
        solutions = paired.get(path.resolve(), [])
        try:
            module = load_module(path, "kbench_list")
            space, declared = params.sweep_space(module)
            kernelbench = kernelbench_label(path, module)
            entries.append(ProblemEntry(
                name=path.stem, path=str(path), family=getattr(module, "KBENCH_FAMILY", "") or family_of(path),
                kernelbench=kernelbench, sizes=params.parameter_globals(module), sweep=space,
                sweep_declared=declared, small=params.small_overrides(module), solutions=solutions,
                level=folder_level(path.parent)))
        except Exception as error:  # one broken file must not hide the others
            entries.append(ProblemEntry(name=path.stem, path=str(path), family="", kernelbench="", sizes={},
                                        sweep={}, sweep_declared=False, small={}, solutions=solutions,
                                        error=f"{type(error).__name__}: {error}", level=folder_level(path.parent)))
    return entries


def kernelbench_label(path: Path, module) -> str:
    """"L1 #64 64_conv_transposed_1D": from KERNELBENCH_ID (and _LEVEL, _NAME), or from a KernelBench file's own
    name in its level<N>/ folder; "" for other problems."""
    if hasattr(module, "KERNELBENCH_ID"):
        return (f"L{getattr(module, 'KERNELBENCH_LEVEL', 1)} #{module.KERNELBENCH_ID} "
                f"{getattr(module, 'KERNELBENCH_NAME', '')}").strip()
    level, number = folder_level(path.parent), re.match(r"^(\d+)_", path.name)
    return f"L{level} #{number.group(1)}" if level is not None and number else ""


# A KernelBench problem's family, from words in its name (first match wins); else its level's kind.
_FAMILY_WORDS = [("conv_transpose", "conv transposed"), ("conv", "conv"), ("matmul", "matmul"),
                 ("matrix", "matmul"), ("gemm", "matmul"), ("pool", "pooling"), ("norm", "normalization"),
                 ("loss", "loss"), ("attention", "attention"), ("softmax", "activation"), ("relu", "activation"),
                 ("gelu", "activation"), ("sigmoid", "activation"), ("tanh", "activation"), ("swish", "activation"),
                 ("elu", "activation"), ("softplus", "activation"), ("softsign", "activation"),
                 ("reduction", "reduction"), ("argm", "reduction"), ("cum", "scan")]
_LEVEL_KINDS = {1: "operator", 2: "fusion", 3: "architecture", 4: "model"}


def family_of(path: Path) -> str:
    """The family of a KernelBench problem file (in a level<N>/ folder); "" for other files."""
    level = folder_level(path.parent)
    if level is None:
        return ""
    if level == 1:
        name = path.stem.lower()
        for word, family in _FAMILY_WORDS:
            if word in name:
                return family
    return _LEVEL_KINDS.get(level, "")


def unpaired_solutions(problems_dir: Path, solutions_dir: Path) -> list[Unpaired]:
    """The solution files no problem pairs with, with why, as `kbench sweep` finds them."""
    return find_pairs(problems_dir, solutions_dir)[1] if solutions_dir.is_dir() else []


def _paired_solutions(problems_dir: Path, solutions_dir: Path) -> dict[Path, list[str]]:
    """Solutions per problem, discovered and paired exactly as `kbench sweep` does."""
    paired: dict[Path, list[str]] = {}
    if not solutions_dir.is_dir():
        return paired
    pairs, _ = find_pairs(problems_dir, solutions_dir)
    for problem, solution in pairs:
        paired.setdefault(problem.resolve(), []).append(str(solution.relative_to(solutions_dir)))
    return {problem: sorted(solutions, key=natural_key) for problem, solutions in paired.items()}
