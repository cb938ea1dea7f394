"""kbench report and list as a newcomer meets them: failures shown, fast_p two ways, tables at 80 columns,
one-line errors, natural order, the plot. No builds: hand-made CSVs and problem files."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from rich.console import Console

from kbench.report import summary
from kbench.names import natural_sorted, short_path, short_problem
from kbench.report.tables import results_table, summary_tables
from kbench.results import CheckResult, Result, Timing

from synthetic_results import synthetic_rows, write_csv
from test_cli import kbench

LONG = "75_conv_transposed_2D_asymmetric_input_asymmetric_kernel_strided__grouped____padded____dilated__"


def rows_csv(tmp_path: Path, rows: list[dict]) -> Path:
    return write_csv(tmp_path / "results.csv", [{"run_id": "r", "device_name": "cpu", **row} for row in rows])


def render(renderables, width: int) -> str:
    console = Console(width=width, record=True, color_system=None)
    for renderable in renderables:
        console.print(renderable)
    return console.export_text()


# fast_p two ways: trusted (no flag but throttled) and KernelBench's (status correct), official sizes only.
FLAGGED = [
    {"problem": "a", "solution": "a1", "status": "correct", "speedup": 3.0},
    {"problem": "b", "solution": "b1", "status": "correct", "speedup": 2.0, "flags": "sweep_failed"},
    {"problem": "b", "solution": "b2", "status": "correct", "speedup": 0.9},
    {"problem": "c", "solution": "c1", "status": "correct", "speedup": 1.5, "flags": "throttled"},
    {"problem": "d", "solution": "d1", "status": "correct", "speedup": 4.0, "flags": "low_precision;throttled"},
    {"problem": "e", "solution": "e1", "status": "correct", "speedup": 5.0, "flags": "some_future_flag"},
    {"problem": "f", "solution": "f1", "status": "rejected", "speedup": 9.0, "flags": "side_stream"},
    {"problem": "g", "solution": "g1", "status": "correct", "speedup": 6.0, "sizes": "n=512"},
]


def test_fast_p_two_ways_exactly(tmp_path):
    result = summary.summarise(summary.load(rows_csv(tmp_path, FLAGGED)))
    # 7 problems. KernelBench: a 3.0, b 2.0, c 1.5, d 4.0, e 5.0 (f rejected, g at reduced sizes).
    assert result.fast_p_kernelbench == {0.0: 5 / 7, 0.5: 5 / 7, 0.8: 5 / 7, 1.0: 5 / 7, 1.5: 4 / 7, 2.0: 3 / 7}
    # Trusted: a 3.0, b 0.9 (its 2.0 is flagged), c 1.5 (throttled is harmless); d and e are flagged.
    assert result.fast_p == {0.0: 3 / 7, 0.5: 3 / 7, 0.8: 3 / 7, 1.0: 2 / 7, 1.5: 1 / 7, 2.0: 1 / 7}
    assert result.reduced_sizes == 1
    as_json = json.loads(kbench("report", tmp_path / "results.csv", "--format", "json").stdout)
    assert as_json["fast_p"]["trusted"]["fast_1"] == pytest.approx(2 / 7)
    assert as_json["fast_p"]["kernelbench"]["fast_1"] == pytest.approx(5 / 7)
    assert as_json["reduced_size_results"] == 1


def test_failures_list_every_failing_and_flagged_solution_with_its_reason(tmp_path):
    rows = FLAGGED + [{"problem": "h", "solution": "h1", "status": "compile_error",
                       "message": "cuda.cu(79): error: \"n\" has already been declared\nmore"}]
    failures = summary.summarise(summary.load(rows_csv(tmp_path, rows))).failures.to_dict("records")
    reasons = {row["solution"]: (row["status"], row["reason"]) for row in failures}
    assert set(reasons) == {"b1", "d1", "e1", "f1", "h1"}  # not a1, b2, c1 (throttled) or g1
    assert reasons["h1"] == ("compile_error", 'cuda.cu(79): error: "n" has already been declared')
    assert reasons["f1"] == ("rejected", "flags: side_stream")
    assert reasons["d1"] == ("correct", "flags: low_precision")
    assert [row["status"] for row in failures][-3:] == ["correct"] * 3  # flagged correct ones last


def test_report_collapses_failures_per_status_and_failures_lists_all(tmp_path):
    rows = [{"problem": f"p{i}", "solution": f"runs/p{i}/wrong_{i}.py", "status": "incorrect",
             "message": f"trial 0: output[{i}] off"} for i in range(5)]
    rows.append({"problem": "p0", "solution": "runs/p0/good.py", "status": "correct", "speedup": 1.05})
    path = rows_csv(tmp_path, rows)
    collapsed = kbench("report", path)
    assert collapsed.returncode == 0, collapsed.stderr
    assert sum(f"wrong_{i}.py" in collapsed.stdout for i in range(5)) == 3
    assert "... 2 more" in collapsed.stdout and "--failures" in collapsed.stdout
    assert "trial 0: output[0] off" in collapsed.stdout
    every = kbench("report", path, "--failures")
    assert sum(f"wrong_{i}.py" in every.stdout for i in range(5)) == 5 and "more" not in every.stdout
    assert "1.05x" in every.stdout


def test_tables_at_80_columns_never_cut_status_or_speedup(tmp_path):
    stems = [LONG, "100_HingeLoss", "2_Standard_matrix_multiplication_"]
    frame = summary.load(write_csv(tmp_path / "s.csv", synthetic_rows(stems * 4, seed=3)))
    result = summary.summarise(frame)
    text = render(summary_tables(result, width=80), 80)
    assert max(len(line) for line in text.splitlines()) <= 80
    for status in set(frame["status"]):
        assert status in text
    for speedup in result.best["best_speedup"].dropna():
        assert f"{speedup:.3g}x" in text
    results = [Result.from_fields(problem=LONG, solution="runs/level1/level_1_problem_75_sample_0_kernel.py",
                      status="compile_error", message="cuda.cu(79): error: " + "x" * 120),
               Result.from_fields(problem="swish", solution="examples/solutions/swish/cpp.py", status="correct",
                      check=CheckResult(5, 5, 1e-7), reference_timing=Timing((0.35, 0.36), "host-clock"),
                      candidate_timing=Timing((1.1, 1.2), "host-clock"))]
    text = render([results_table(results, "kbench eval on cpu", width=80)], 80)
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "compile_error" in text and f"{results[1].speedup:.3g}x" in text
    assert "level_1_problem_75_sample_0_kernel.py" in text.replace("\n", "")


def test_piped_report_follows_columns(tmp_path):
    stems = [LONG, "100_HingeLoss", "2_Standard_matrix_multiplication_"]
    csv_path = write_csv(tmp_path / "s.csv", synthetic_rows(stems * 4, seed=3))
    completed = kbench("report", csv_path, cwd=tmp_path, COLUMNS="80")
    assert completed.returncode == 0, completed.stderr
    assert max(len(line) for line in completed.stdout.splitlines()) <= 80
    wide = kbench("report", csv_path, cwd=tmp_path, COLUMNS="")
    assert max(len(line) for line in wide.stdout.splitlines()) > 80


def test_report_plot_into_a_missing_folder_and_a_bad_extension_is_one_line(tmp_path):
    pytest.importorskip("matplotlib")
    csv_path = write_csv(tmp_path / "s.csv", synthetic_rows(["1_a", "2_b"] * 2, seed=1))
    missing = kbench("report", csv_path, "--plot", tmp_path / "new" / "deeper" / "best.png", cwd=tmp_path)
    assert missing.returncode == 2 and "no folder" in missing.stderr and "Traceback" not in missing.stderr
    assert missing.stderr.strip().count("\n") == 0, missing.stderr
    assert not (tmp_path / "new").exists()  # a mistyped folder is not made
    made = kbench("report", csv_path, "--plot", tmp_path / "best.png", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    assert (tmp_path / "best.png").stat().st_size > 0
    bad = kbench("report", csv_path, "--plot", tmp_path / "best.xyz", cwd=tmp_path)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert bad.stderr.strip().count("\n") == 0 and ".png" in bad.stderr, bad.stderr


def test_a_report_of_skipped_results_says_what_would_run(tmp_path):
    rows = [{"problem": "convt1d", "solution": f"solutions/convt1d/s{i}.py", "status": "skipped",
             "message": "needs a CUDA device"} for i in range(3)]
    text = render(summary_tables(summary.summarise(summary.load(rows_csv(tmp_path, rows))), width=100), 100)
    assert "3 skipped: CUDA solutions need a GPU" in text and "examples/solutions/swish" in text


def test_report_without_a_csv_says_what_to_do_in_one_line(tmp_path):
    completed = kbench("report", cwd=tmp_path)
    assert completed.returncode == 2
    assert completed.stderr.strip().count("\n") == 0, completed.stderr
    assert "kbench eval" in completed.stderr and "kbench sweep" in completed.stderr
    assert "Traceback" not in completed.stderr
    named = kbench("report", tmp_path / "old.csv", cwd=tmp_path)
    assert named.returncode == 2 and "old.csv" in named.stderr and named.stderr.strip().count("\n") == 0


def test_eval_of_a_file_that_is_not_python_is_a_usage_error(tmp_path):
    (tmp_path / "kernel.cu").write_text("__global__ void k() {}\n")
    completed = kbench("eval", "kernel.cu", "--device", "cpu", cwd=tmp_path)
    assert completed.returncode == 2 and "not a Python file: kernel.cu" in completed.stderr
    assert "Traceback" not in completed.stderr
    assert not (tmp_path / "results").exists()  # no load_error row


PROBLEM = "import torch\nn = 4\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x\n\n" \
          "def get_inputs():\n    return [torch.rand(n)]\n\ndef get_init_inputs():\n    return []\n"


def test_list_sorts_problems_naturally(tmp_path):
    names = ["100_HingeLoss", "10_3D_tensor_matrix_multiplication", "2_Standard_matrix_multiplication_",
             "1_Square_matrix_multiplication_", "axpy"]
    (tmp_path / "problems").mkdir()
    for name in names:
        (tmp_path / "problems" / f"{name}.py").write_text(PROBLEM)
    completed = kbench("list", "--json", cwd=tmp_path)
    assert completed.returncode == 0, completed.stderr
    assert [entry["name"] for entry in json.loads(completed.stdout)] == [
        "1_Square_matrix_multiplication_", "2_Standard_matrix_multiplication_",
        "10_3D_tensor_matrix_multiplication", "100_HingeLoss", "axpy"]


def test_names_fit():
    assert natural_sorted(["b10", "b9", "a100", "a20"]) == ["a20", "a100", "b9", "b10"]
    assert short_problem(LONG).startswith("75 convT 2D asym in asym") and len(short_problem(LONG)) == 36
    assert short_problem("convt1d_dilated") == "convt1d_dilated"
    assert short_problem("19_ReLU") == "19 ReLU"
    assert short_path("runs/level1/level_1_problem_75_sample_0_kernel.py") == "level_1_problem_75_sample_0_kernel.py"
    assert short_path("solutions/convt1d/seed000.py") == "convt1d/seed000.py"


def png_size(path: Path) -> tuple[int, int]:
    return struct.unpack(">II", path.read_bytes()[16:24])


def test_plot_grows_with_the_problems_and_labels_speedups_exactly(tmp_path):
    pytest.importorskip("matplotlib")
    from kbench.report.plot import plot_best, plot_title, speedup_label

    assert [speedup_label(value) for value in (1.05, 0.336, 12.08)] == ["1.05x", "0.336x", "12.1x"]
    sizes = []
    for count in (5, 100):
        stems = [f"{index}_{LONG[3:]}" for index in range(1, count + 1)]
        result = summary.summarise(summary.load(write_csv(tmp_path / f"{count}.csv", synthetic_rows(stems))))
        assert plot_title(result).startswith("kbench: best speedup per problem, run 20261122")
        plot_best(result.best, tmp_path / f"{count}.png", plot_title(result))
        sizes.append(png_size(tmp_path / f"{count}.png"))
    assert sizes[0][0] == sizes[1][0] and sizes[1][1] > 5 * sizes[0][1]


def test_list_names_kernelbench_files_level_id_and_family(tmp_path):
    from kbench.report.catalog import describe_problems

    problem = ("import torch\nimport torch.nn as nn\nn = 8\n\nclass Model(nn.Module):\n    def forward(self, x):\n"
               "        return torch.relu(x)\n\ndef get_inputs():\n    return [torch.rand(n)]\n\n"
               "def get_init_inputs():\n    return []\n")
    for folder, name in (("level1", "19_ReLU.py"), ("level2", "12_Gemm_Multiply_LeakyReLU.py")):
        (tmp_path / "kb" / folder).mkdir(parents=True)
        (tmp_path / "kb" / folder / name).write_text(problem)
    entries = {entry.name: entry for entry in describe_problems(tmp_path / "kb", tmp_path / "none")}
    assert (entries["19_ReLU"].kernelbench, entries["19_ReLU"].family) == ("L1 #19", "activation")
    assert (entries["12_Gemm_Multiply_LeakyReLU"].kernelbench,
            entries["12_Gemm_Multiply_LeakyReLU"].family) == ("L2 #12", "fusion")


def test_a_noisy_row_is_never_the_best_solution_nor_trusted(tmp_path):
    rows = [{"problem": "a", "solution": "a_noisy.py", "status": "correct", "speedup": 9.0, "flags": "noisy_timing"},
            {"problem": "a", "solution": "a_quiet.py", "status": "correct", "speedup": 1.2}]
    result = summary.summarise(summary.load(rows_csv(tmp_path, rows)))
    best = result.best.iloc[0]
    assert best["best_solution"] == "a_quiet.py" and best["best_speedup"] == 1.2
    frame = summary.load(rows_csv(tmp_path, rows[:1]))
    assert summary.fast_p_trusted(frame)[1.0] == 0.0


def test_noisy_timing_needs_a_spread_past_half_the_median():
    from kbench import flags
    from kbench.verdicts import noisy_timing

    quiet = [1.0, 1.01, 0.99, 1.02, 1.0, 0.98]
    busy = [1.0, 28.0, 0.2, 15.0, 40.0, 3.0]
    assert noisy_timing(quiet, quiet) is None
    flag, why = noisy_timing(busy, quiet)
    assert flag == flags.NOISY_TIMING and "reference" in why and "quiet" in why
    assert noisy_timing(quiet, busy)[0] == flags.NOISY_TIMING


def test_the_terminal_says_to_rerun_noisy_results_on_a_quiet_machine(capsys):
    from kbench.report.terminal import warn_if_noisy

    warn_if_noisy([Result.from_fields(problem="a", solution="a.py", status="correct", flags=("noisy_timing",)),
                   Result.from_fields(problem="b", solution="b.py", status="correct")])
    assert "1 result(s)" in capsys.readouterr().err
    warn_if_noisy([Result.from_fields(problem="b", solution="b.py", status="correct")])
    assert capsys.readouterr().err == ""


def test_list_keeps_solution_names_whole_at_80_columns(tmp_path):
    from kbench.report.catalog import describe_problems
    from kbench.report.tables import problems_table

    (tmp_path / "kb" / "level1").mkdir(parents=True)
    (tmp_path / "kb" / "level1" / f"{LONG}.py").write_text("import torch\nbatch_size = 16\n")
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "level_1_problem_75_sample_0_kernel.py").write_text("# candidate\n")
    text = render([problems_table(describe_problems(tmp_path / "kb", tmp_path / "runs"), width=80)], 80)
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "level_1_problem_75_sample_0_kernel.py" in text and "75 convT 2D" in text


def test_two_levels_problem_12_get_labels_that_tell_them_apart(tmp_path):
    from kbench.names import problem_label

    rows = [{"problem": "12_Matmul_with_diagonal_matrices_", "solution": "a.py", "status": "correct", "speedup": 1.5,
             "problem_path": "/kb/level1/12_Matmul_with_diagonal_matrices_.py"},
            {"problem": "12_Gemm_Multiply_LeakyReLU", "solution": "b.py", "status": "correct", "speedup": 2.0,
             "problem_path": "/kb/level2/12_Gemm_Multiply_LeakyReLU.py"},
            {"problem": "convt1d", "solution": "c.py", "status": "correct", "speedup": 1.1,
             "problem_path": "problems/convt1d.py"}]
    best = summary.summarise(summary.load(rows_csv(tmp_path, rows))).best
    labels = [problem_label(row["problem"], row["level"], 30) for row in best.to_dict("records")]
    assert {label[:12] for label in labels} == {"L1 12 Matmul", "L2 12 Gemm M", "convt1d"}
    assert all(len(label) <= 30 for label in labels)
    text = render(summary_tables(summary.summarise(summary.load(rows_csv(tmp_path, rows))), width=80), 80)
    assert "L1 12 Matmul" in text and "L2 12 Gemm" in text


def test_best_solution_is_only_a_trusted_one(tmp_path):
    """README: unverified_time and noisy_timing (and every noting flag) keep a row out of "best solution"; the rule
    is trusted_mask's, the one trusted fast_p counts by."""
    rows = [{"problem": "a", "solution": "a_unverified.py", "status": "correct", "speedup": 9.0,
             "flags": "unverified_time"},
            {"problem": "a", "solution": "a_swept.py", "status": "correct", "speedup": 7.0, "flags": "sweep_failed"},
            {"problem": "a", "solution": "a_plain.py", "status": "correct", "speedup": 1.2, "flags": "throttled"},
            {"problem": "b", "solution": "b_unverified.py", "status": "correct", "speedup": 3.0,
             "flags": "unverified_time"},
            {"problem": "b", "solution": "b_wrong.py", "status": "incorrect"}]
    best = {row["problem"]: row for row in summary.summarise(summary.load(rows_csv(tmp_path, rows))).best
            .to_dict("records")}
    assert (best["a"]["best_solution"], best["a"]["best_speedup"], best["a"]["outcome"]) == ("a_plain.py", 1.2,
                                                                                               "faster")
    assert best["b"]["best_solution"] is None and best["b"]["best_speedup"] is None
    assert (best["b"]["outcome"], best["b"]["best_flags"], best["b"]["correct"]) == ("flagged", "unverified_time", 1)


def test_a_file_that_is_not_a_results_csv_is_named_in_one_line_without_pandas_text(tmp_path):
    other = tmp_path / "other.csv"
    other.write_text("name,value\nx,1\n")
    completed = kbench("report", other, cwd=tmp_path)
    assert completed.returncode == 2 and "Traceback" not in completed.stderr
    assert "not a kbench results CSV (no problem, solution, status columns)" in completed.stderr, completed.stderr
    assert "Index(" not in completed.stderr and "dtype" not in completed.stderr


def test_plot_title_names_one_run_or_counts_runs(tmp_path):
    from kbench.report.plot import plot_title

    rows = [{"problem": "a", "solution": "a1.py", "status": "correct", "speedup": 2.0}]
    one = plot_title(summary.summarise(summary.load(rows_csv(tmp_path, rows))))
    assert "best speedup per problem, run r on cpu" in one
    two = rows + [{"problem": "b", "solution": "b1.py", "status": "correct", "speedup": 2.0, "run_id": "s"}]
    path = write_csv(tmp_path / "two.csv", [{"run_id": "r", "device_name": "cpu", **row} for row in two])
    title = plot_title(summary.summarise(summary.load(path)))
    assert "best speedup per problem, 2 runs on cpu" in title and "run 2 runs" not in title


def test_report_csv_writes_levels_as_whole_numbers(tmp_path):
    rows = [{"problem": "12_Gemm", "solution": "a.py", "status": "correct", "speedup": 1.5,
             "problem_path": "/kb/level2/12_Gemm.py"},
            {"problem": "convt1d", "solution": "c.py", "status": "correct", "speedup": 1.1,
             "problem_path": "problems/convt1d.py"}]
    completed = kbench("report", rows_csv(tmp_path, rows), "--format", "csv", cwd=tmp_path)
    assert completed.returncode == 0, completed.stderr
    levels = {line.split(",")[0]: line.split(",")[-1] for line in completed.stdout.splitlines()[1:]}
    assert levels == {"12_Gemm": "2", "convt1d": ""}, completed.stdout


def test_list_of_kernelbench_root_shows_levels_and_names_unpaired_files(tmp_path):
    for folder in ("level1", "level2"):
        (tmp_path / "kb" / folder).mkdir(parents=True)
        (tmp_path / "kb" / folder / f"12_{folder}_problem.py").write_text(PROBLEM)
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "level_1_problem_12_sample_0_kernel.py").write_text("# candidate\n")
    (tmp_path / "runs" / "level_3_problem_12_sample_0_kernel.py").write_text("# candidate\n")
    listed = kbench("list", "--problems", tmp_path / "kb", "--solutions", tmp_path / "runs", cwd=tmp_path,
                    COLUMNS="200")
    assert listed.returncode == 0, listed.stderr
    assert "L1 12 level1 problem" in listed.stdout and "L2 12 level2 problem" in listed.stdout, listed.stdout
    assert "level_3_problem_12_sample_0_kernel.py" in listed.stderr and "1 solution(s) paired with no problem" \
        in listed.stderr, listed.stderr
    assert "--problem PATH" not in listed.stderr  # an option of eval's, not list's or sweep's
    (tmp_path / "empty").mkdir()
    empty = kbench("list", "--problems", tmp_path / "empty", cwd=tmp_path)
    assert empty.returncode == 2 and "no problem files under" in empty.stderr, empty.stderr
    assert empty.stderr.strip().count("\n") == 0 and not empty.stdout.strip()
