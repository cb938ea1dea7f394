"""Which pairs a `kbench sweep` runs: discovery, problem filters, --only-failed and --resume."""

from __future__ import annotations

import fnmatch
from pathlib import Path

from kbench.config import RunConfig
from kbench.results import Status
from kbench.results_csv import read_rows
from kbench.schedule.child import file_hash
from kbench.solution import Unpaired, find_pairs


def select_pairs(problems_dir: Path, solutions_dir: Path, filters: tuple[str, ...], only_failed_in: Path | None,
                 resume_from: Path | None, config: RunConfig, device: str
                 ) -> tuple[list[tuple[Path, Path]], list[Unpaired], int]:
    """(pairs to run, solutions no problem matched, pairs skipped because --resume found them). With --only-failed,
    --resume skips only pairs recorded `correct`: the failures it selects are final rows too, and are what it
    re-runs."""
    pairs, unpaired = find_pairs(problems_dir, solutions_dir)
    if filters:
        pairs = [(p, s) for p, s in pairs if any(fnmatch.fnmatch(p.stem, pattern) for pattern in filters)]
    if only_failed_in is not None:
        failed = _latest_statuses(only_failed_in)
        pairs = [(p, s) for p, s in pairs if failed.get(_solution_key(s), Status.CORRECT) != Status.CORRECT]
    skipped = 0
    if resume_from is not None:
        done = _recorded(resume_from, (Status.CORRECT,) if only_failed_in is not None else Status.FINAL)
        settings = config.fingerprint(device)
        remaining = []
        for problem, solution in pairs:
            key = (_solution_key(solution), file_hash(solution), file_hash(problem), settings)
            if key in done:
                skipped += 1
            else:
                remaining.append((problem, solution))
        pairs = remaining
    return pairs, unpaired, skipped


def _solution_key(path: Path | str) -> str:
    return str(Path(path).resolve())


def _rows(path: Path) -> list[dict]:
    return read_rows(path) if path.is_file() and path.stat().st_size else []


def _latest_statuses(path: Path) -> dict[str, str]:
    return {_solution_key(row["solution"]): row["status"] for row in _rows(path)}


def _recorded(path: Path, statuses) -> set[tuple]:
    """Pairs a CSV already holds a verdict among `statuses` for, keyed by solution, contents and settings."""
    return {(_solution_key(row["solution"]), row.get("solution_hash", ""), row.get("problem_hash", ""),
             row.get("settings", "")) for row in _rows(path) if row.get("status") in statuses}
