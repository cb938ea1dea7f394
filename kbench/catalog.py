"""What is in a problems folder and which solutions pair with each problem (for `kbench list`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kbench.names import natural_key, natural_sorted
from kbench.solution import find_pairs, problem_files


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
            kernelbench = ""
            if hasattr(module, "KERNELBENCH_ID"):
                kernelbench = (f"L{getattr(module, 'KERNELBENCH_LEVEL', 1)} #{module.KERNELBENCH_ID} "
                               f"{getattr(module, 'KERNELBENCH_NAME', '')}").strip()
            entries.append(ProblemEntry(
                name=path.stem, path=str(path), family=getattr(module, "KBENCH_FAMILY", ""),
                kernelbench=kernelbench, sizes=params.parameter_globals(module), sweep=space,
                sweep_declared=declared, small=params.small_overrides(module), solutions=solutions))
        except Exception as error:  # one broken file must not hide the others
            entries.append(ProblemEntry(name=path.stem, path=str(path), family="", kernelbench="", sizes={},
                                        sweep={}, sweep_declared=False, small={}, solutions=solutions,
                                        error=f"{type(error).__name__}: {error}"))
    return entries


def _paired_solutions(problems_dir: Path, solutions_dir: Path) -> dict[Path, list[str]]:
    """Solutions per problem, discovered and paired exactly as `kbench sweep` does."""
    paired: dict[Path, list[str]] = {}
    if not solutions_dir.is_dir():
        return paired
    pairs, _ = find_pairs(problems_dir, solutions_dir)
    for problem, solution in pairs:
        paired.setdefault(problem.resolve(), []).append(str(solution.relative_to(solutions_dir)))
    return {problem: sorted(solutions, key=natural_key) for problem, solutions in paired.items()}
