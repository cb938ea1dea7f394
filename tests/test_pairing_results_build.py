"""Pairing rules, the results CSV, and build-log parsing."""

import csv
import json
from pathlib import Path

import pytest

from kbench.extensions.cache import first_error_line
from kbench.results import CheckResult, ClockRecord, Identity, Outcome, Result, SweepResult, Timing
from kbench.results_csv import append_row, read_rows
from kbench.schedule.child import identify
from kbench.solution import PairingError, Solution, pair_problem


@pytest.fixture
def tree(tmp_path):
    problems = tmp_path / "problems"
    solutions = tmp_path / "solutions"
    (solutions / "convt1d").mkdir(parents=True)
    problems.mkdir()
    for name in ("convt1d.py", "64_conv_transposed_1D.py", "declared.py"):
        (problems / name).write_text("# problem\n")
    (problems / "declared.py").write_text("KERNELBENCH_ID = 74\n")
    return tmp_path


def test_pairs_by_stem_by_folder_and_by_kernelbench_id(tree):
    problems = [tree / "problems"]
    assert pair_problem(tree / "solutions" / "convt1d.py", problems).name == "convt1d.py"
    assert pair_problem(tree / "solutions" / "convt1d" / "seed000_x.py", problems).name == "convt1d.py"
    run_file = tree / "runs" / "level_1_problem_64_sample_0_kernel.py"
    assert pair_problem(run_file, problems).name == "64_conv_transposed_1D.py"
    declared = tree / "runs" / "level_1_problem_74_sample_3_kernel.py"
    assert pair_problem(declared, problems).name == "declared.py"


def test_unpaired_solution_says_what_was_tried(tree):
    """It names the paths it looked for (the CLI adds the option to pass: `--problem` for eval, `--problems` for sweep)."""
    with pytest.raises(PairingError, match="looked for .*problems"):
        pair_problem(tree / "solutions" / "nothing.py", [tree / "problems"])


def test_needs_cuda_detection():
    assert Solution(Path("a.py"), "load_inline(name='x', cpp_sources=s, cuda_sources=c)", "0").needs_cuda
    assert Solution(Path("a.py"), "import triton\n", "0").needs_cuda
    assert not Solution(Path("a.py"), "load_inline(name='x', cpp_sources=s)", "0").needs_cuda


def sample_result(**changes) -> Result:
    fields = dict(problem="axpy", solution="s.py", status="correct",
                  check=CheckResult(5, 5, 0.0, 0.0, 0.0, None),
                  reference_timing=Timing((2.0, 2.0, 4.0), "host-clock"),
                  candidate_timing=Timing((1.0, 1.0, 1.0), "host-clock"))
    fields.update(changes)
    return Result.from_fields(**fields)


def test_result_round_trips_and_derives_speedup():
    result = sample_result(sweep=SweepResult(passed=7, run=8, skipped=1, first_failure="n=3: values differ"),
                           baselines=(("default", Timing((3.0, 3.0), "host-clock")),),
                           reference_alone=Timing((1.5, 1.5, 1.7), "cuda-events"),
                           clocks=ClockRecord(sm_mhz_start=1980.0, sm_mhz_end=1900.0), flags=("sweep_failed",))
    assert result.speedup == 2.0
    assert Result.from_dict(json.loads(json.dumps(result.to_dict()))) == result
    assert result.to_row()["ref_alone_median_ms"] == 1.5


def test_outcome_round_trips_and_joins_its_identity_in_a_result():
    outcome = Outcome(status="correct", check=CheckResult(5, 5, 0.0, 0.0, 0.0, None),
                      sweep=SweepResult(passed=8, run=8, skipped=0),
                      candidate_timing=Timing((1.0,), "host-clock"), reference_alone=Timing((0.5,), "cuda-events"),
                      flags=("weak_check",), cpu_s=1.5)
    assert Outcome.from_dict(json.loads(json.dumps(outcome.to_dict()))) == outcome
    identity = Identity(problem="axpy", solution="s.py", solution_hash="ab", device="cpu", run_id="r")
    result = Result.of(identity, outcome, time="t", wall_s=2.0)
    assert result.identity == identity and result.status == "correct" and result.sweep == outcome.sweep
    assert result.wall_s == 2.0 and result.cpu_s == 1.5


def test_csv_appends_rows_and_keeps_raw_samples(tmp_path):
    path = tmp_path / "out" / "results.csv"
    append_row(path, sample_result().to_row())
    append_row(path, sample_result(status="incorrect", check=None, candidate_timing=None).to_row())
    rows = read_rows(path)
    assert [row["status"] for row in rows] == ["correct", "incorrect"]
    assert rows[0]["ref_samples_ms"] == "[2.0, 2.0, 4.0]"
    assert rows[1]["speedup"] == "" and rows[1]["trials_total"] == ""


def test_csv_with_other_columns_is_rewritten_with_their_union(tmp_path):
    path = tmp_path / "results.csv"
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=["status", "legacy"])
        writer.writeheader()
        writer.writerow({"status": "old", "legacy": "kept"})
    append_row(path, sample_result().to_row())
    rows = read_rows(path)
    assert rows[0]["legacy"] == "kept" and rows[0]["status"] == "old"
    assert rows[1]["status"] == "correct" and rows[1]["problem"] == "axpy"


def test_first_error_line_finds_gcc_and_nvcc_errors():
    gcc = ("[1/2] c++ -c main.cpp\nFAILED: main.o\n/root/.cache/kbench/ext/x/main.cpp:15:17: error: "
           "'undeclared_thing' was not declared in this scope\nninja: build stopped")
    assert first_error_line(gcc) == "main.cpp:15:17: error: 'undeclared_thing' was not declared in this scope"
    nvcc = ('/tmp/b/cuda.cu(45): error: "threadsPerBlock" has already been declared in the current scope\n'
            "1 error detected in the compilation of cuda.cu.")
    assert first_error_line(nvcc).startswith('cuda.cu(45): error: "threadsPerBlock"')
    assert first_error_line("RuntimeError: Error building extension 'x'\nsomething") == "something"


KERNELBENCH = Path(__file__).resolve().parents[2] / "shared" / "kernelbench"
needs_kernelbench = pytest.mark.skipif(not KERNELBENCH.is_dir(), reason="needs ../shared/kernelbench")


@needs_kernelbench
def test_kernelbench_run_files_pair_by_level_and_id_under_its_root():
    level1 = Path("runs/level_1_problem_12_sample_0_kernel.py")
    level2 = Path("runs/level_2_problem_12_sample_0_kernel.py")
    assert pair_problem(level1, [KERNELBENCH]) == KERNELBENCH / "level1" / "12_Matmul_with_diagonal_matrices_.py"
    assert pair_problem(level2, [KERNELBENCH]).parent.name == "level2"
    assert pair_problem(level2, [KERNELBENCH / "level2"]).name.startswith("12_")


@needs_kernelbench
def test_a_run_file_given_another_level_s_folder_is_never_judged_against_it():
    with pytest.raises(PairingError, match="level-2 file but .*level-1 problems"):
        pair_problem(Path("runs/level_2_problem_12_sample_0_kernel.py"), [KERNELBENCH / "level1"])


def test_a_declared_level_keeps_a_problem_from_another_level(tmp_path):
    (tmp_path / "12_relu.py").write_text("KERNELBENCH_ID = 12\nKERNELBENCH_LEVEL = 1\n")
    with pytest.raises(PairingError):
        pair_problem(tmp_path / "level_2_problem_12_sample_0_kernel.py", [tmp_path])
    assert pair_problem(tmp_path / "level_1_problem_12_sample_0_kernel.py", [tmp_path]).name == "12_relu.py"


def test_the_solution_s_folder_names_its_problem_before_its_file_name(tree):
    (tree / "problems" / "gelu.py").write_text("# problem\n")
    assert pair_problem(tree / "solutions" / "convt1d" / "gelu.py", [tree / "problems"]).name == "convt1d.py"


def test_resume_runs_again_what_only_an_infra_error_recorded(tmp_path, tree):
    from kbench.config import RunConfig
    from kbench.schedule.sweep import select_pairs

    solution = tree / "solutions" / "convt1d.py"
    solution.write_text("# candidate\n")
    config = RunConfig(device="cpu", cache_dir=tmp_path / "cache")
    pairs, _, _ = select_pairs(tree / "problems", tree / "solutions", (), None, None, config, "cpu")
    assert any(found == solution for _, found in pairs)
    problem = next(problem for problem, found in pairs if found == solution)

    def recorded(status: str) -> Path:
        csv_path = tmp_path / f"{status}.csv"
        result = Result.of(identify(problem, solution, config, "cpu"), Outcome(status=status))
        append_row(csv_path, result.to_row())
        return csv_path
    for status, runs_again in (("infra_error", True), ("crashed", False), ("correct", False)):
        pairs, _, skipped = select_pairs(tree / "problems", tree / "solutions", (), None, recorded(status), config,
                                         "cpu")
        assert any(found == solution for _, found in pairs) == runs_again, status
        assert skipped == (0 if runs_again else 1), status


def test_flags_survive_the_csv_both_ways(tmp_path):
    import kbench
    from kbench.report import summary

    result = Result.from_fields(problem="p", solution="s.py", status="correct", flags=("sweep_failed", "calls_reference_op"))
    append_row(tmp_path / "r.csv", result.to_row())
    assert kbench.read_results(tmp_path / "r.csv")["flags"][0] == ["sweep_failed", "calls_reference_op"]
    row = summary.load(tmp_path / "r.csv").iloc[0]
    assert summary.disqualifying_flags(row) == ["sweep_failed", "calls_reference_op"]
