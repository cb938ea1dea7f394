"""KernelBench's own verdicts beside kbench's (`kbench report --kernelbench`).

A KernelBench run folder holds its candidates (level_<L>_problem_<ID>_sample_<S>_kernel.py) and an
eval_results.json with KernelBench's verdict on each. Re-judged by kbench, the two can disagree (KernelBench
checks against TF32 convolutions, on another GPU and toolkit, with other tolerances): this reads KernelBench's
verdicts into records, joins them with kbench's latest row per candidate, and keeps the candidates one calls
correct and the other does not, with what kbench's verdict rests on.
"""

from __future__ import annotations

import json
import textwrap
from dataclasses import asdict, dataclass
from pathlib import Path

from rich.text import Text

from kbench import stats
from kbench.extensions.cache import first_error_line
from kbench.report.tables import REASON_CHARACTERS, Column, fitted_table, format_error, format_status
from kbench.results import Status
from kbench.results_csv import read_rows
from kbench.solution import KERNELBENCH_RUN_NAME

EVAL_RESULTS = "eval_results.json"
# KernelBench's verdicts, coarse: it records only whether a candidate compiled and whether it was correct.
CORRECT, INCORRECT, NOT_COMPILED = "correct", "incorrect", "not compiled"
KERNELBENCH_STYLE = {CORRECT: "bold green", INCORRECT: "bold red", NOT_COMPILED: "red"}
# kbench verdicts that say nothing of the candidate: they neither agree nor disagree with KernelBench's.
NOT_JUDGED = (Status.SKIPPED, Status.REFERENCE_ERROR, Status.INFRA_ERROR, Status.BUILT)


@dataclass(frozen=True)
class KernelBenchVerdict:
    """KernelBench's verdict on one candidate, as its eval_results.json records it."""

    level: int
    problem_id: int
    sample: int
    compiled: bool
    correct: bool
    runtime_ms: float | None  # None where KernelBench did not time it (it writes -1)
    summary: str              # one line: the error, the max/avg difference, or the trials passed

    @property
    def status(self) -> str:
        return CORRECT if self.correct else INCORRECT if self.compiled else NOT_COMPILED


@dataclass(frozen=True)
class KbenchEvidence:
    """kbench's verdict on one candidate and what it rests on: the columns of its results row (None or empty
    where the row has none)."""

    solution: str
    status: str
    message: str
    flags: str
    first_mismatch: str
    max_abs_err: float | None
    norm_err: float | None
    truth_trials: int                  # trials the float64 truth decided (the float32 reference failed them)
    truth_candidate_err: float | None  # in those trials: the candidate's error against the truth
    truth_reference_err: float | None  # and the float32 reference's

    @classmethod
    def of_row(cls, row: dict) -> "KbenchEvidence":
        text = lambda column: (row.get(column) or "").strip()
        number = lambda column: stats.finite_number(row.get(column))
        return cls(solution=text("solution"), status=text("status"), message=text("message"), flags=text("flags"),
                   first_mismatch=text("first_mismatch"), max_abs_err=number("max_abs_err"),
                   norm_err=number("norm_err"), truth_trials=int(number("truth_trials") or 0),
                   truth_candidate_err=number("truth_candidate_err"),
                   truth_reference_err=number("truth_reference_err"))

    @property
    def correct(self) -> bool:
        return self.status == Status.CORRECT

    def line(self) -> str:
        """One line: the errors measured for a verdict on values (correct, incorrect), else kbench's message
        (it names the phase that failed, or the first compiler error); flags first."""
        parts = [f"flags: {self.flags.replace(';', ', ')}"] if self.flags else []
        if self.status in (Status.CORRECT, Status.INCORRECT):
            parts.append(self._errors())
        if self.status != Status.CORRECT:
            mismatch = self.first_mismatch if self.status == Status.INCORRECT else ""
            parts.append(mismatch or _first_line(self.message))
        return "; ".join(part for part in parts if part)

    def _errors(self) -> str:
        errors = f"max abs err {format_error(self.max_abs_err)}, norm err {format_error(self.norm_err)}"
        if self.truth_candidate_err is None or self.truth_reference_err is None:
            return errors
        return (f"{errors}; vs float64 truth: candidate {format_error(self.truth_candidate_err)}, "
                f"float32 reference {format_error(self.truth_reference_err)}")


@dataclass(frozen=True)
class Disagreement:
    kernelbench: KernelBenchVerdict
    kbench: KbenchEvidence

    def to_dict(self) -> dict:
        return {"problem_id": self.kernelbench.problem_id, "sample": self.kernelbench.sample,
                "kernelbench": {**asdict(self.kernelbench), "status": self.kernelbench.status},
                "kbench": {**asdict(self.kbench), "evidence": self.kbench.line()}}


@dataclass(frozen=True)
class Comparison:
    """KernelBench's verdicts on one run folder beside kbench's; candidates are (problem id, sample)."""

    source: str                                   # the eval_results.json
    level: int
    agreements: int
    disagreements: tuple[Disagreement, ...]
    only_kernelbench: tuple[tuple[int, int], ...]  # a verdict in the JSON, no kbench row
    only_kbench: tuple[tuple[int, int], ...]       # a kbench row, no verdict in the JSON
    not_judged: tuple[tuple[int, int], ...]        # in both, kbench's status one of NOT_JUDGED

    def counts(self) -> dict[str, int]:
        return {"agree": self.agreements, "disagree": len(self.disagreements),
                "only_kernelbench": len(self.only_kernelbench), "only_kbench": len(self.only_kbench),
                "not_judged_by_kbench": len(self.not_judged)}

    def to_dict(self) -> dict:
        pairs = lambda keys: [{"problem_id": problem_id, "sample": sample} for problem_id, sample in keys]
        return {"source": self.source, "level": self.level, "counts": self.counts(),
                "disagreements": [disagreement.to_dict() for disagreement in self.disagreements],
                "only_kernelbench": pairs(self.only_kernelbench), "only_kbench": pairs(self.only_kbench),
                "not_judged_by_kbench": pairs(self.not_judged)}


def compare(kernelbench: Path, csv_path: Path, run_id: str | None = None) -> Comparison:
    """KernelBench's verdicts (`kernelbench`: an eval_results.json or the run folder holding it) beside the
    kbench rows of `csv_path` (those of `run_id` only, when given). ValueError when either cannot be read."""
    path = eval_results_path(kernelbench)
    rows = [row for row in read_rows(csv_path) if not run_id or row.get("run_id") == run_id]
    level = run_folder_level(path.parent) or rows_level(rows)
    verdicts = read_verdicts(path, level)
    return join(verdicts, kbench_rows(rows, level, path.parent), level, str(path))


def eval_results_path(path: Path) -> Path:
    if not path.is_dir():
        return path
    if not (path / EVAL_RESULTS).is_file():
        raise ValueError(f"{path} holds no {EVAL_RESULTS}")
    return path / EVAL_RESULTS


def run_folder_level(folder: Path) -> int | None:
    """The level of a run folder, from its candidates' names (eval_results.json does not record it); None when
    it holds none."""
    levels = {int(match.group(1)) for match in map(_run_name, folder.iterdir()) if match}
    if len(levels) > 1:
        raise ValueError(f"{folder} holds candidates of levels {sorted(levels)}: a KernelBench run is one level")
    return levels.pop() if levels else None


def rows_level(rows: list[dict]) -> int:
    """The level of a JSON whose folder holds no candidates: the one level of the CSV's KernelBench rows."""
    levels = {int(match.group(1)) for match in (_run_name(row["solution"]) for row in rows) if match}
    if len(levels) != 1:
        raise ValueError(f"cannot tell the level of {EVAL_RESULTS}: its folder holds no level_<L>_problem_<ID>_"
                         f"sample_<S>_kernel.py and the CSV's KernelBench candidates are of levels {sorted(levels)}")
    return levels.pop()


def read_verdicts(path: Path, level: int) -> list[KernelBenchVerdict]:
    """KernelBench's verdicts in an eval_results.json, by problem id and sample. Its layouts over time, keyed by
    problem id (a string): a list of entries with their sample_id (today's), a map of sample id to entry, one
    entry per problem. A sample recorded twice keeps its last entry (KernelBench appends re-evaluations)."""
    data = json.loads(path.read_text())
    if not isinstance(data, dict):
        raise ValueError(f"{path}: not KernelBench's {EVAL_RESULTS} (a map of problem ids to verdicts)")
    verdicts = {}
    try:  # one message for any entry that is not shaped like KernelBench's
        for problem_id, value in data.items():
            for sample, entry in _entries(value):
                verdicts[int(problem_id), sample] = _verdict(level, int(problem_id), sample, entry)
    except (AttributeError, TypeError, ValueError) as error:
        raise ValueError(f"{path}: not KernelBench's {EVAL_RESULTS} ({error})") from error
    return [verdicts[key] for key in sorted(verdicts)]


def _entries(value) -> list[tuple[int, dict]]:
    if isinstance(value, list):
        return [(int(entry.get("sample_id", index)), entry) for index, entry in enumerate(value)]
    if isinstance(value, dict) and "compiled" in value:
        return [(int(value.get("sample_id", 0)), value)]
    if isinstance(value, dict):
        return [(int(entry.get("sample_id", sample)), entry) for sample, entry in value.items()]
    raise TypeError(f"a problem's verdicts are a list or a map, not {type(value).__name__}")


def _verdict(level: int, problem_id: int, sample: int, entry: dict) -> KernelBenchVerdict:
    runtime = stats.finite_number(entry.get("runtime"))
    correct = bool(entry.get("correctness"))
    return KernelBenchVerdict(level=level, problem_id=problem_id, sample=sample,
                              compiled=bool(entry.get("compiled")), correct=correct,
                              runtime_ms=runtime if runtime is not None and runtime >= 0 else None,
                              summary=metadata_summary(entry.get("metadata") or {}, correct))


def metadata_summary(metadata: dict, correct: bool) -> str:
    """KernelBench's metadata in one line: the trials passed when correct, else its reason (the first of its
    keys ending in error or issue: compilation_error, runtime_error, cuda_error, correctness_issue, ...; their
    _name and _traceback companions add nothing one line can hold) and the max/avg difference."""
    notes = ["excessive speedup"] if metadata.get("excessive_speedup") else []
    if correct:
        trials = metadata.get("correctness_trials")
        return "; ".join(([f"trials {trials}"] if trials else []) + notes) or "correct"
    reason = next(((key, value) for key, value in metadata.items()
                   if key.endswith(("error", "issue")) and isinstance(value, str)), None)
    text = _reason(*reason) if reason else "no error recorded"
    largest, average = _largest(metadata.get("max_difference")), _largest(metadata.get("avg_difference"))
    if largest is not None:
        text += f" (max difference {largest:.3g}" + (f", avg {average:.3g})" if average is not None else ")")
    return "; ".join([text] + notes)


def _reason(key: str, value: str) -> str:
    label = key.replace("_", " ")
    # A build log's first line is the ninja command; the compiler's first error is what went wrong.
    text = first_error_line(value) if key == "compilation_error" else _first_line(value)
    return text if text.lower().startswith(label) else f"{label}: {text}"


def _largest(value) -> float | None:
    """The largest of KernelBench's per-trial numbers (a list of strings), or of one number."""
    values = value if isinstance(value, list) else [value]
    numbers = [number for number in map(stats.finite_number, values) if number is not None]
    return max(numbers) if numbers else None


def kbench_rows(rows: list[dict], level: int, folder: Path) -> dict[tuple[int, int], dict]:
    """The latest kbench row per candidate of `level`, by (problem id, sample). A CSV may hold two run folders
    of one level (two models' candidates, named alike): a row of a file in `folder` wins over a namesake's."""
    latest = {}
    for row in rows:  # in the order written: a later row replaces an earlier one
        match = _run_name(row["solution"])
        if not match or int(match.group(1)) != level:
            continue
        key = int(match.group(2)), int(match.group(3))
        if key in latest and _inside(latest[key], folder) and not _inside(row, folder):
            continue
        latest[key] = row
    return latest


def join(verdicts: list[KernelBenchVerdict], rows: dict[tuple[int, int], dict], level: int,
         source: str) -> Comparison:
    """Candidates agree when both call them correct or both do not; kbench's NOT_JUDGED rows are set apart."""
    kernelbench = {(verdict.problem_id, verdict.sample): verdict for verdict in verdicts}
    agreements, disagreements, not_judged = 0, [], []
    for key in sorted(kernelbench.keys() & rows.keys()):
        verdict, evidence = kernelbench[key], KbenchEvidence.of_row(rows[key])
        if evidence.status in NOT_JUDGED:
            not_judged.append(key)
        elif evidence.correct == verdict.correct:
            agreements += 1
        else:
            disagreements.append(Disagreement(verdict, evidence))
    return Comparison(source=source, level=level, agreements=agreements, disagreements=tuple(disagreements),
                      only_kernelbench=tuple(sorted(kernelbench.keys() - rows.keys())),
                      only_kbench=tuple(sorted(rows.keys() - kernelbench.keys())), not_judged=tuple(not_judged))


def comparison_renderables(comparison: Comparison, width: int | None = None) -> list:
    """The disagreements as a table (when there are any), the counts, and the candidates in one only."""
    counts = comparison.counts()
    line = (f"kbench vs KernelBench, level {comparison.level}: {counts['agree']} agree, {counts['disagree']} "
            f"disagree, {counts['only_kernelbench']} only in KernelBench's {EVAL_RESULTS}, "
            f"{counts['only_kbench']} only in kbench's CSV")
    if comparison.not_judged:
        line += f", {counts['not_judged_by_kbench']} not judged by kbench (e.g. skipped without a GPU)"
    notes = [Text(f"{label}: {_labels(keys)}", style="dim") for label, keys in (
        (f"only in {EVAL_RESULTS}", comparison.only_kernelbench), ("only in the CSV", comparison.only_kbench),
        ("not judged by kbench", comparison.not_judged)) if keys]
    table = [disagreements_table(comparison, width)] if comparison.disagreements else []
    return table + [Text(line)] + notes


def disagreements_table(comparison: Comparison, width: int | None = None):
    rows = comparison.disagreements
    columns = [
        Column("id", [str(row.kernelbench.problem_id) for row in rows], "right"),
        Column("sample", [str(row.kernelbench.sample) for row in rows], "right"),
        Column("KernelBench", [_kernelbench_cell(row.kernelbench) for row in rows], wrap=True, least=24),
        Column("kbench", [format_status(row.kbench.status) + Text("\n" + _shortened(row.kbench.line()))
                          for row in rows], wrap=True, least=34),
    ]
    return fitted_table(columns, width, title=f"kbench vs KernelBench (level {comparison.level})")


def _kernelbench_cell(verdict: KernelBenchVerdict) -> Text:
    runtime = f"; {verdict.runtime_ms:g} ms" if verdict.runtime_ms is not None else ""
    return Text(verdict.status, style=KERNELBENCH_STYLE[verdict.status]) + Text(
        "\n" + _shortened(verdict.summary + runtime))


def _labels(keys: tuple[tuple[int, int], ...]) -> str:
    return ", ".join(str(problem_id) if sample == 0 else f"{problem_id} (sample {sample})"
                     for problem_id, sample in keys)


def _shortened(text: str) -> str:
    return textwrap.shorten(text, REASON_CHARACTERS, placeholder=" …")  # --format json has all of it


def _run_name(path: Path | str):
    return KERNELBENCH_RUN_NAME.search(Path(path).name)


def _inside(row: dict, folder: Path) -> bool:
    return Path(row["solution"]).resolve().parent == folder.resolve()


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


