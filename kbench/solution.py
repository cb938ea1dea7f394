"""Solutions: find a candidate's problem (pairing rules) and read what kbench needs from its source."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

# KernelBench run folders name candidates level_<L>_problem_<ID>_sample_<S>_kernel.py.
KERNELBENCH_RUN_NAME = re.compile(r"level_(\d+)_problem_(\d+)_sample_(\d+)_kernel\.py$")
# A problem file may record its KernelBench id as `KERNELBENCH_ID = 64`.
DECLARED_ID = re.compile(r"^KERNELBENCH_ID\s*=\s*(\d+)\s*$", re.MULTILINE)
# Source patterns that only work with a CUDA device: kernels, CUDA builds, Triton, explicit .cuda().
NEEDS_CUDA = re.compile(
    r"cuda_sources\s*=|__global__|^\s*(import|from)\s+triton\b|\.cuda\(\)|device\s*=\s*['\"]cuda",
    re.MULTILINE,
)

# Source patterns of a solution that builds an extension when imported.
BUILDS_EXTENSION = re.compile(r"\bload_inline\b|\bcpp_extension\b")


@dataclass(frozen=True)
class Solution:
    path: Path     # the candidate file
    source: str    # its text
    sha256: str    # first 16 hex digits of the file's sha256

    @classmethod
    def read(cls, path: Path) -> "Solution":
        data = path.read_bytes()
        return cls(path=path, source=data.decode("utf-8", errors="replace"),
                   sha256=hashlib.sha256(data).hexdigest()[:16])

    @property
    def needs_cuda(self) -> bool:
        return bool(NEEDS_CUDA.search(self.source))

    @property
    def builds_extension(self) -> bool:
        return bool(BUILDS_EXTENSION.search(self.source))


class PairingError(LookupError):
    """No problem file could be found for a solution."""


def default_problem_dirs(solution_path: Path) -> list[Path]:
    """problems/ beside the nearest enclosing solutions/ folder, then ./problems."""
    dirs = []
    for parent in solution_path.resolve().parents:
        if parent.name == "solutions":
            dirs.append(parent.parent / "problems")
            break
    dirs.append(Path("problems").resolve())
    return list(dict.fromkeys(dirs))


def pair_problem(solution_path: Path, problem_dirs: list[Path]) -> Path:
    """Find the problem file a solution belongs to.

    Rules, first match wins, in each problem folder:
    1. KernelBench run names (level_1_problem_64_sample_0_kernel.py) pair by id with `64_*.py`,
       or with a problem file declaring `KERNELBENCH_ID = 64`.
    2. solutions/<problem>/<any>.py pairs with <problem>.py.
    3. solutions/<problem>.py pairs with <problem>.py.
    """
    tried = []
    kernelbench = KERNELBENCH_RUN_NAME.search(solution_path.name)
    for directory in problem_dirs:
        if kernelbench:
            match = _find_by_id(directory, int(kernelbench.group(2)))
            if match:
                return match
            tried.append(f"{directory}/{kernelbench.group(2)}_*.py")
            continue
        for stem in (solution_path.parent.name, solution_path.stem):
            candidate = directory / f"{stem}.py"
            if candidate.is_file() and candidate.resolve() != solution_path.resolve():
                return candidate
            tried.append(str(candidate))
    raise PairingError(f"no problem found for {solution_path} (looked for {', '.join(tried)}); "
                       "pass --problem PATH")


def _find_by_id(directory: Path, problem_id: int) -> Path | None:
    if not directory.is_dir():
        return None
    by_name = sorted(directory.glob(f"{problem_id}_*.py"))
    if by_name:
        return by_name[0]
    for path in sorted(directory.glob("*.py")):
        declared = DECLARED_ID.search(path.read_text(errors="replace"))
        if declared and int(declared.group(1)) == problem_id:
            return path
    return None


def find_pairs(problems_dir: Path, solutions_dir: Path) -> tuple[list[tuple[Path, Path]], list[Path]]:
    """Every solution file under `solutions_dir` with its problem; and the files no problem matched.

    Files and folders whose names start with `_` or `.` (helpers, caches) are not solutions.
    """
    pairs, unpaired = [], []
    for solution in sorted(solutions_dir.rglob("*.py")):
        relative = solution.relative_to(solutions_dir)
        if any(part.startswith(("_", ".")) for part in relative.parts):
            continue
        try:
            pairs.append((pair_problem(solution, [problems_dir]), solution))
        except PairingError:
            unpaired.append(solution)
    return pairs, unpaired
