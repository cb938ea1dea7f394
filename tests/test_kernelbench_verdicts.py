"""KernelBench's verdicts beside kbench's: eval_results.json read into records, joined with a results CSV, the
disagreements with kbench's evidence, and `kbench report --kernelbench`. No builds: a hand-made run folder
(entries shaped like the corpus's) and a CSV of Result records."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from rich.console import Console

from kbench.report.kernelbench_verdicts import compare, comparison_renderables, read_verdicts, run_folder_level
from kbench.results import CheckResult, Identity, Outcome, Result, Timing
from kbench.results_csv import append_row

from conftest import REPO
from test_cli import kbench

HARDWARE = {"hardware": "NVIDIA GeForce RTX 4090", "device": "cuda:0"}
STATS = {"mean": 21.8, "std": 0.195, "min": 21.7, "max": 23.1, "num_trials": 100, **HARDWARE}
BUILD_LOG = ("Error building extension 'max_pool3d_custom': [1/3] /usr/bin/nvcc --generate-dependencies-with-compile "
             "-c /workspace/cache/43/0/max_pool3d_custom/cuda.cu -o cuda.cuda.o \n"
             "/workspace/cache/43/0/max_pool3d_custom/cuda.cu(37): error: expected a \";\"\n"
             "1 error detected in the compilation of \"/workspace/cache/43/0/max_pool3d_custom/cuda.cu\".\n"
             "ninja: build stopped: subcommand failed.\n")


def correct(sample: int = 0, runtime: float = 21.8) -> dict:
    return {"sample_id": sample, "compiled": True, "correctness": True,
            "metadata": {**HARDWARE, "correctness_trials": "(5 / 5)"}, "runtime": runtime, "runtime_stats": STATS}


def failed(sample: int = 0, compiled: bool = True, **metadata) -> dict:
    return {"sample_id": sample, "compiled": compiled, "correctness": False, "metadata": metadata,
            "runtime": -1.0, "runtime_stats": {}}


# KernelBench's verdicts, as its eval_results.json lists them today: problem id (a string) -> list of samples.
EVAL_RESULTS = {
    "1": [correct()],
    "2": [correct(runtime=23.1), failed(1, compiled=False, **HARDWARE, compilation_error_name="RuntimeError",
                                        compilation_error=BUILD_LOG)],
    "4": [correct(runtime=9.19)],
    "17": [failed(compiled=False, error="Kernel not found for problem 17 sample 0")],
    "43": [failed(compiled=False, **HARDWARE, compilation_error_name="RuntimeError", compilation_error=BUILD_LOG)],
    "50": [failed(**HARDWARE, max_difference=["0.000522", "0.000567", "0.000547"],
                  avg_difference=["0.000076", "0.000076", "0.000075"], correctness_issue="Output mismatch",
                  correctness_trials="(0 / 5)")],
    "51": [failed(**HARDWARE, runtime_error="mean(): could not infer output dtype. Got: Long",
                  runtime_error_name="builtins.RuntimeError",
                  runtime_error_traceback="Traceback (most recent call last):\n  File \"eval.py\"\nRuntimeError")],
    "54": [correct(runtime=5.0)],
}


def candidate(folder: Path, problem_id: int, sample: int = 0, level: int = 1) -> Path:
    path = folder / f"level_{level}_problem_{problem_id}_sample_{sample}_kernel.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("# candidate\n")
    return path


def record(csv: Path, solution: Path, outcome: Outcome) -> None:
    identity = Identity(problem=f"{solution.name.split('_')[3]}_problem", solution=str(solution), run_id="r")
    append_row(csv, Result.of(identity, outcome, time="2026-11-25T10:00:00").to_row())


INCORRECT = Outcome("incorrect", message="trial 0: output[0, 3] = 0.5, expected 1.22898 (outside atol=0.0001 "
                    "rtol=0.0001; 4096 of 65536 elements)",
                    check=CheckResult(0, 5, max_abs_err=0.73, max_rel_err=0.6, norm_err=0.02,
                                      first_mismatch="trial 0: output[0, 3] = 0.5, expected 1.22898 (outside "
                                                     "atol=0.0001 rtol=0.0001; 4096 of 65536 elements)"))
# Off the float32 reference by more than the tolerance, but nearer the float64 truth than the reference is.
TRUTH_CORRECT = Outcome("correct", message="float64 truth decided 5 trial(s) the float32 reference failed",
                        check=CheckResult(5, 5, max_abs_err=5.4e-4, max_rel_err=1e-3, norm_err=2e-6, truth_trials=5,
                                          truth_candidate_err=3e-7, truth_reference_err=2e-6),
                        reference_timing=Timing((2.0, 2.1), "cuda-events"),
                        candidate_timing=Timing((1.0, 1.1), "cuda-events"))
CORRECT = Outcome("correct", check=CheckResult(5, 5, 1e-6, 1e-6, 1e-7), reference_timing=Timing((2.0,), "cuda-events"),
                  candidate_timing=Timing((1.0,), "cuda-events"))


@pytest.fixture
def run(tmp_path) -> tuple[Path, Path]:
    """A level-1 run folder and a kbench CSV that re-judged it: disagreements both ways, agreements, one
    candidate only KernelBench judged (17), one only kbench judged (99), one kbench skipped (4)."""
    folder = tmp_path / "run_l1"
    for problem_id, entries in EVAL_RESULTS.items():
        for entry in entries:
            candidate(folder, int(problem_id), entry["sample_id"])
    (folder / "eval_results.json").write_text(json.dumps(EVAL_RESULTS, indent=2))
    csv = tmp_path / "results.csv"
    record(csv, candidate(folder, 1), CORRECT)  # replaced by the later row below
    record(csv, candidate(folder, 1), INCORRECT)  # KernelBench: correct
    record(csv, candidate(folder, 2), CORRECT)
    record(csv, candidate(folder, 2, 1), Outcome("compile_error", message="extension 'max_pool3d_custom' failed to "
                                                 "build: cuda.cu(37): error: expected a \";\""))
    record(csv, candidate(folder, 4), Outcome("skipped", message="a CUDA solution needs a GPU"))
    record(csv, candidate(folder, 43), Outcome("compile_error", message="extension 'x' failed to build: cuda.cu(37): "
                                               "error: expected a \";\""))
    record(csv, candidate(folder, 50), TRUTH_CORRECT)  # KernelBench: output mismatch
    record(csv, candidate(tmp_path / "other_l1", 50), INCORRECT)  # a namesake in another run: not this folder's
    record(csv, candidate(folder, 51), Outcome("runtime_error", message="failed while checking: RuntimeError: mean(): "
                                               "could not infer output dtype"))
    record(csv, candidate(folder, 54), Outcome("crashed", message="the runner was killed by SIGSEGV while timing"))
    record(csv, candidate(folder, 99), CORRECT)  # not in eval_results.json
    record(csv, candidate(tmp_path / "run_l2", 17, level=2), CORRECT)  # another level: another folder's JSON
    return folder, csv


def test_reads_eval_results_into_records_with_a_one_line_summary(run):
    folder, _ = run
    read = read_verdicts(folder / "eval_results.json", run_folder_level(folder))
    verdicts = {(v.problem_id, v.sample): v for v in read}
    assert len(verdicts) == 9 and {v.level for v in verdicts.values()} == {1}
    assert verdicts[1, 0].status == "correct" and verdicts[1, 0].runtime_ms == 21.8
    assert verdicts[1, 0].summary == "trials (5 / 5)"
    assert verdicts[2, 1].status == "not compiled" and verdicts[2, 1].runtime_ms is None
    assert verdicts[43, 0].summary == 'compilation error: cuda.cu(37): error: expected a ";"'
    assert verdicts[50, 0].status == "incorrect"
    assert verdicts[50, 0].summary == "correctness issue: Output mismatch (max difference 0.000567, avg 7.6e-05)"
    assert verdicts[51, 0].summary == "runtime error: mean(): could not infer output dtype. Got: Long"
    assert verdicts[17, 0].summary == "error: Kernel not found for problem 17 sample 0"


def test_older_layouts_read_alike(tmp_path):
    """Older KernelBench wrote a map of sample ids to entries, or one entry per problem."""
    by_sample = {"1": {"0": correct(), "1": failed(1, compiled=False, error="Evaluation timed out")}}
    one_entry = {"1": correct()}
    for name, data in (("by_sample.json", by_sample), ("one_entry.json", one_entry)):
        (tmp_path / name).write_text(json.dumps(data))
    samples = [(v.sample, v.status) for v in read_verdicts(tmp_path / "by_sample.json", 1)]
    assert samples == [(0, "correct"), (1, "not compiled")]
    assert [(v.problem_id, v.status) for v in read_verdicts(tmp_path / "one_entry.json", 1)] == [(1, "correct")]
    (tmp_path / "bad.json").write_text(json.dumps({"one": [correct()]}))
    with pytest.raises(ValueError, match="not KernelBench's eval_results.json"):
        read_verdicts(tmp_path / "bad.json", 1)


def test_disagreements_both_ways_with_kbench_evidence(run):
    folder, csv = run
    comparison = compare(folder, csv)
    found = {(d.kernelbench.problem_id, d.kernelbench.sample): d for d in comparison.disagreements}
    assert sorted(found) == [(1, 0), (50, 0), (54, 0)]
    incorrect = found[1, 0]  # KernelBench correct, kbench incorrect: the latest row, not the earlier correct one
    assert incorrect.kernelbench.status == "correct" and incorrect.kbench.status == "incorrect"
    assert incorrect.kbench.max_abs_err == 0.73 and incorrect.kbench.norm_err == 0.02
    assert incorrect.kbench.line() == ("max abs err 7.30e-01, norm err 2.00e-02; trial 0: output[0, 3] = 0.5, "
                                       "expected 1.22898 (outside atol=0.0001 rtol=0.0001; 4096 of 65536 elements)")
    truth = found[50, 0]  # kbench correct: nearer the float64 truth than KernelBench's float32 reference
    assert truth.kernelbench.status == "incorrect" and truth.kbench.status == "correct"
    assert (truth.kbench.truth_candidate_err, truth.kbench.truth_reference_err) == (3e-7, 2e-6)
    assert "vs float64 truth: candidate 3.00e-07, float32 reference 2.00e-06" in truth.kbench.line()
    assert found[54, 0].kbench.line() == "the runner was killed by SIGSEGV while timing"  # names the phase
    # Both not correct (compile errors, KernelBench's runtime error as incorrect) and both correct: agreements.
    assert comparison.agreements == 4 and comparison.level == 1


def test_candidates_in_one_only_and_not_judged_are_counted_apart(run):
    folder, csv = run
    comparison = compare(folder / "eval_results.json", csv)
    assert comparison.only_kernelbench == ((17, 0),)
    assert comparison.only_kbench == ((99, 0),)
    assert comparison.not_judged == ((4, 0),)
    assert comparison.counts() == {"agree": 4, "disagree": 3, "only_kernelbench": 1, "only_kbench": 1,
                                   "not_judged_by_kbench": 1}


def test_level_comes_from_the_csv_when_the_folder_holds_no_candidates(run, tmp_path):
    folder, csv = run
    alone = tmp_path / "alone" / "eval_results.json"
    alone.parent.mkdir()
    alone.write_text((folder / "eval_results.json").read_text())
    with pytest.raises(ValueError, match="levels \\[1, 2\\]"):  # the CSV holds levels 1 and 2
        compare(alone, csv)
    level1 = tmp_path / "level1.csv"
    record(level1, folder / "level_1_problem_50_sample_0_kernel.py", TRUTH_CORRECT)
    assert compare(alone, level1).counts()["disagree"] == 1


def render(renderables, width: int) -> str:
    console = Console(width=width, record=True, color_system=None)
    for renderable in renderables:
        console.print(renderable)
    return console.export_text()


def test_table_fits_80_columns_with_both_verdicts(run):
    text = render(comparison_renderables(compare(*run), width=80), 80)
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "kbench vs KernelBench (level 1)" in text
    assert all(words in text for words in ("Output", "max difference", "0.000567", "SIGSEGV", "truth:"))
    flowing = " ".join(text.split())  # the counts fold onto more lines
    assert "4 agree, 3 disagree, 1 only in KernelBench's eval_results.json, 1 only in kbench's CSV" in flowing
    assert "only in eval_results.json: 17" in text


def test_cli_prints_the_table_after_the_report(run):
    folder, csv = run
    completed = kbench("report", csv, "--kernelbench", folder)
    assert completed.returncode == 0, completed.stderr
    report, _, comparison = completed.stdout.partition("kbench vs KernelBench (level 1)")
    assert "best correct solution per problem" in report
    assert "SIGSEGV" in comparison and "3 disagree" in comparison


def test_cli_puts_the_counts_and_the_lists_of_ids_on_lines_of_their_own(run):
    folder, csv = run
    completed = kbench("report", csv, "--kernelbench", folder, COLUMNS="200")
    assert completed.returncode == 0, completed.stderr
    lines = completed.stdout.splitlines()
    counts = next(line for line in lines if line.startswith("kbench vs KernelBench, level 1:"))
    assert counts.rstrip().endswith("only in kbench's CSV, 1 not judged by kbench (e.g. skipped without a GPU)")
    assert "only in eval_results.json: 17" in lines, lines


def test_cli_json_holds_the_records(run):
    folder, csv = run
    completed = kbench("report", csv, "--kernelbench", folder / "eval_results.json", "--format", "json")
    assert completed.returncode == 0, completed.stderr
    output = json.loads(completed.stdout)
    assert "fast_p" in output  # the usual report, with the comparison beside it
    records = output["kernelbench"]["disagreements"]
    assert [(r["problem_id"], r["kernelbench"]["status"], r["kbench"]["status"]) for r in records] == [
        (1, "correct", "incorrect"), (50, "incorrect", "correct"), (54, "correct", "crashed")]
    assert records[1]["kbench"]["truth_reference_err"] == 2e-6 and records[0]["kbench"]["evidence"]
    assert output["kernelbench"]["only_kernelbench"] == [{"problem_id": 17, "sample": 0}]


def test_cli_says_in_one_line_what_it_cannot_compare(run, tmp_path):
    _, csv = run
    completed = kbench("report", csv, "--kernelbench", tmp_path / "run_l2")
    assert completed.returncode == 2 and "holds no eval_results.json" in completed.stderr
    completed = kbench("report", csv, "--kernelbench", tmp_path / "run_l1", "--format", "csv")
    assert completed.returncode == 2 and "--format table or json" in completed.stderr


CORPUS_L1 = REPO.parent / "shared" / "corpus" / "deepseek_v4_pro_l1"


@pytest.mark.skipif(not (CORPUS_L1 / "eval_results.json").is_file(), reason="needs the corpus's l1 run folder")
def test_real_level1_run_matches_its_readme():
    """54 files: 24 correct, 10 compiled but not correct, 20 not compiled or missing."""
    verdicts = read_verdicts(CORPUS_L1 / "eval_results.json", run_folder_level(CORPUS_L1))
    assert len(verdicts) == 54 and {v.level for v in verdicts} == {1}
    assert Counter(v.status for v in verdicts) == {"correct": 24, "incorrect": 10, "not compiled": 20}
    assert all(v.summary and "\n" not in v.summary for v in verdicts)
