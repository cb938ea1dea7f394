"""Solutions: find a candidate's problem (pairing rules) and read what kbench needs from its source."""

from __future__ import annotations

import ast
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

# KernelBench run folders name candidates level_<L>_problem_<ID>_sample_<S>_kernel.py.
KERNELBENCH_RUN_NAME = re.compile(r"level_(\d+)_problem_(\d+)_sample_(\d+)_kernel\.py$")
# A problem file may record its KernelBench id as `KERNELBENCH_ID = 64` (and level: `KERNELBENCH_LEVEL = 1`).
DECLARED_ID = re.compile(r"^KERNELBENCH_ID\s*=\s*(\d+)\s*$", re.MULTILINE)
DECLARED_LEVEL = re.compile(r"^KERNELBENCH_LEVEL\s*=\s*(\d+)\s*$", re.MULTILINE)
# KernelBench's problem folders: level1/, level2/, level3/ (its root holds them side by side).
LEVEL_FOLDER = re.compile(r"^level(\d+)$")
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

    @property
    def declared_cflags(self) -> list[list[str]]:
        """The `extra_cflags` of each call in the source that passes them as a literal list of strings (a
        source that does not parse, or is too deep for Python's parser, has none)."""
        try:
            tree = ast.parse(self.source)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return []
        found = []
        for node in ast.walk(tree):
            for keyword in node.keywords if isinstance(node, ast.Call) else ():
                if keyword.arg == "extra_cflags" and isinstance(keyword.value, (ast.List, ast.Tuple)) and all(
                        isinstance(item, ast.Constant) and isinstance(item.value, str) for item in keyword.value.elts):
                    found.append([item.value for item in keyword.value.elts])
        return found


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
    1. KernelBench run names (level_1_problem_64_sample_0_kernel.py) pair by level and id: with `64_*.py`
       (or a file declaring `KERNELBENCH_ID = 64`) in the folder's `level1/` when it is KernelBench's root, in
       the folder itself when it is `level1/` or names no level. A folder of another level is never searched:
       that is an error that says so.
    2. solutions/<problem>/<any>.py pairs with <problem>.py.
    3. solutions/<problem>.py pairs with <problem>.py.
    """
    tried = []
    kernelbench = KERNELBENCH_RUN_NAME.search(solution_path.name)
    for directory in problem_dirs:
        if kernelbench:
            level, problem_id = int(kernelbench.group(1)), int(kernelbench.group(2))
            match = _find_kernelbench(solution_path, directory, level, problem_id)
            if match:
                return match
            tried.append(f"{_level_folder(directory, level)}/{problem_id}_*.py")
            continue
        for stem in (solution_path.parent.name, solution_path.stem):
            candidate = directory / f"{stem}.py"
            if candidate.is_file() and candidate.resolve() != solution_path.resolve():
                return candidate
            tried.append(str(candidate))
    raise PairingError(f"no problem found for {solution_path} (looked for {', '.join(tried)})")


def folder_level(directory: Path) -> int | None:
    """The KernelBench level a folder holds (level2/ -> 2), None when its name says none."""
    match = LEVEL_FOLDER.match(directory.resolve().name)
    return int(match.group(1)) if match else None


def level_folders(directory: Path) -> list[Path]:
    """KernelBench's level folders directly under `directory` (its root), in level order."""
    if not directory.is_dir():
        return []
    return sorted((child for child in directory.iterdir() if child.is_dir() and LEVEL_FOLDER.match(child.name)),
                  key=lambda child: int(LEVEL_FOLDER.match(child.name).group(1)))


def _level_folder(directory: Path, level: int) -> Path:
    """Where a level's problems are: `level<N>/` under KernelBench's root, else the folder itself."""
    return directory / f"level{level}" if level_folders(directory) else directory


def _find_kernelbench(solution_path: Path, directory: Path, level: int, problem_id: int) -> Path | None:
    folder = _level_folder(directory, level)
    folder_says = folder_level(folder)
    if folder_says is not None and folder_says != level:
        raise PairingError(f"{solution_path.name} is a level-{level} file but {directory} holds level-{folder_says} "
                           f"problems: pass KernelBench's level{level}/ folder or its root")
    return _find_by_id(folder, problem_id, level if folder_says is None else None)


def _find_by_id(directory: Path, problem_id: int, level: int | None) -> Path | None:
    """`<id>_*.py`, or a file declaring KERNELBENCH_ID = <id>; with `level`, none that declares another level."""
    if not directory.is_dir():
        return None
    for path in sorted(directory.glob(f"{problem_id}_*.py")) + sorted(directory.glob("*.py")):
        text = path.read_text(errors="replace")
        declared_id, declared_level = DECLARED_ID.search(text), DECLARED_LEVEL.search(text)
        by_name = path.name.startswith(f"{problem_id}_")
        if not by_name and not (declared_id and int(declared_id.group(1)) == problem_id):
            continue
        if level is not None and declared_level and int(declared_level.group(1)) != level:
            continue
        return path
    return None


def problem_files(problems_dir: Path) -> list[Path]:
    """The problem files of a folder: its own *.py, or every level's under KernelBench's root."""
    folders = level_folders(problems_dir) or [problems_dir]
    return [path for folder in folders for path in sorted(folder.glob("*.py"))]


@dataclass(frozen=True)
class Unpaired:
    solution: Path
    reason: str    # the PairingError's message


def find_pairs(problems_dir: Path, solutions_dir: Path) -> tuple[list[tuple[Path, Path]], list[Unpaired]]:
    """Every solution file under `solutions_dir` with its problem; and the files no problem matched, with why.

    Files and folders whose names start with `_` or `.` (helpers, caches) are not solutions.
    """
    pairs, unpaired = [], []
    for solution in sorted(solutions_dir.rglob("*.py")):
        relative = solution.relative_to(solutions_dir)
        if any(part.startswith(("_", ".")) for part in relative.parts):
            continue
        try:
            pairs.append((pair_problem(solution, [problems_dir]), solution))
        except PairingError as error:
            unpaired.append(Unpaired(solution, str(error)))
    return pairs, unpaired
