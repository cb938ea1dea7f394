"""The pairing rules of kbench/solution.py on folders laid out as KernelBench's and kbench's are: which problem a
solution file belongs to, which files are solutions at all, and what a file that pairs with nothing is told."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from kbench.solution import (PairingError, Solution, default_problem_dirs, find_pairs, folder_level, level_folders,
                             pair_problem, problem_files)


def _write(path: Path, text: str = "") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture
def kernelbench(tmp_path) -> Path:
    """KernelBench's root: level1/, level2/ and level10/, two problems with the same id in two levels."""
    root = tmp_path / "KernelBench"
    _write(root / "level1" / "12_Diag_matmul.py")
    _write(root / "level1" / "3_Batched_matmul.py")
    _write(root / "level2" / "12_Gemm_Multiply.py")
    _write(root / "level10" / "1_Future.py")
    _write(root / "README.md")
    return root


def run_file(tmp_path: Path, level: int, problem_id: int) -> Path:
    return _write(tmp_path / "run" / f"level_{level}_problem_{problem_id}_sample_0_kernel.py")


def test_a_kernelbench_run_name_pairs_by_level_and_id_under_its_root(tmp_path, kernelbench):
    assert pair_problem(run_file(tmp_path, 1, 12), [kernelbench]) == kernelbench / "level1" / "12_Diag_matmul.py"
    assert pair_problem(run_file(tmp_path, 2, 12), [kernelbench]) == kernelbench / "level2" / "12_Gemm_Multiply.py"


def test_a_level_folder_itself_pairs_its_own_level_and_refuses_another(tmp_path, kernelbench):
    assert pair_problem(run_file(tmp_path, 1, 3), [kernelbench / "level1"]) == kernelbench / "level1" / "3_Batched_matmul.py"
    with pytest.raises(PairingError, match="level-2 file but .*level1 holds level-1 problems: pass KernelBench's "
                                           "level2/ folder or its root"):
        pair_problem(run_file(tmp_path, 2, 12), [kernelbench / "level1"])


def test_a_level_folder_s_name_outweighs_the_level_a_file_declares(tmp_path, kernelbench):
    declared = _write(kernelbench / "level1" / "21_Sigmoid.py", "KERNELBENCH_LEVEL = 2\n")
    assert pair_problem(run_file(tmp_path, 1, 21), [kernelbench]) == declared


def test_a_missing_id_says_where_it_looked(tmp_path, kernelbench):
    with pytest.raises(PairingError) as error:
        pair_problem(run_file(tmp_path, 1, 99), [kernelbench])
    assert f"{kernelbench / 'level1'}/99_*.py" in str(error.value)
    assert str(run_file(tmp_path, 1, 99)) in str(error.value)


def test_a_flat_folder_pairs_by_id_or_by_declared_id_skipping_files_of_another_level(tmp_path):
    flat = tmp_path / "problems"
    _write(flat / "7_first.py", "KERNELBENCH_LEVEL = 2\n")      # the right id, another level: skipped
    _write(flat / "7_second.py", "KERNELBENCH_LEVEL = 1\n")     # found after it
    _write(flat / "conv.py", "KERNELBENCH_ID = 8\n")
    _write(flat / "bytes.py").write_bytes(b"\xff\xfe not utf-8\n")  # read without raising
    assert pair_problem(run_file(tmp_path, 1, 7), [flat]) == flat / "7_second.py"
    assert pair_problem(run_file(tmp_path, 2, 7), [flat]) == flat / "7_first.py"
    assert pair_problem(run_file(tmp_path, 1, 8), [flat]) == flat / "conv.py"
    with pytest.raises(PairingError, match=f"{flat}/9_\\*.py"):
        pair_problem(run_file(tmp_path, 1, 9), [flat])


def test_the_next_problem_folder_is_tried_when_the_first_lacks_the_file(tmp_path, kernelbench):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert pair_problem(run_file(tmp_path, 1, 12), [empty, kernelbench]) == kernelbench / "level1" / "12_Diag_matmul.py"
    with pytest.raises(PairingError) as error:
        pair_problem(run_file(tmp_path, 1, 99), [empty, kernelbench])
    assert f"(looked for {empty}/99_*.py, {kernelbench / 'level1'}/99_*.py)" in str(error.value)
    solution = _write(tmp_path / "solutions" / "gelu" / "fast.py")
    problems = tmp_path / "problems"
    _write(problems / "gelu.py")
    assert pair_problem(solution, [empty, problems]) == problems / "gelu.py"


def test_kbench_layouts_pair_by_folder_then_by_file_name_never_with_themselves(tmp_path):
    problems = tmp_path / "problems"
    _write(problems / "gelu.py")
    _write(problems / "softmax.py")
    assert pair_problem(_write(tmp_path / "solutions" / "gelu" / "v2.py"), [problems]) == problems / "gelu.py"
    assert pair_problem(_write(tmp_path / "solutions" / "softmax.py"), [problems]) == problems / "softmax.py"
    with pytest.raises(PairingError, match="looked for"):
        pair_problem(problems / "gelu.py", [problems])  # a problem file is not its own solution


def test_folder_level_reads_the_folder_s_own_name(tmp_path):
    assert folder_level(tmp_path / "level3") == 3
    assert folder_level(tmp_path / "level3" / "..") is None  # the resolved name: tmp_path's
    assert folder_level(tmp_path / "x" / ".." / "level12") == 12
    assert folder_level(tmp_path / "levels") is None


def test_level_folders_are_listed_in_level_order_and_none_for_a_missing_folder(tmp_path, kernelbench):
    assert [path.name for path in level_folders(kernelbench)] == ["level1", "level2", "level10"]
    assert level_folders(tmp_path / "nowhere") == []
    _write(tmp_path / "level5")  # a file, not a folder
    assert level_folders(tmp_path) == []


def test_problem_files_are_every_level_s_under_the_root_else_the_folder_s_own(tmp_path, kernelbench):
    assert [path.relative_to(kernelbench).as_posix() for path in problem_files(kernelbench)] == [
        "level1/12_Diag_matmul.py", "level1/3_Batched_matmul.py", "level2/12_Gemm_Multiply.py", "level10/1_Future.py"]
    flat = tmp_path / "flat"
    _write(flat / "b.py")
    _write(flat / "a.py")
    _write(flat / "notes.txt")
    assert problem_files(flat) == [flat / "a.py", flat / "b.py"]


def test_find_pairs_skips_private_files_and_keeps_why_the_others_did_not_pair(tmp_path):
    problems, solutions = tmp_path / "problems", tmp_path / "solutions"
    _write(problems / "gelu.py")
    fast = _write(solutions / "gelu" / "fast.py")
    top = _write(solutions / "gelu.py")
    for private in ("_helpers/gelu.py", ".cache/gelu.py", "gelu/_common.py", "gelu/.hidden.py"):
        _write(solutions / private)
    orphan = _write(solutions / "mystery.py")
    pairs, unpaired = find_pairs(problems, solutions)
    assert pairs == [(problems / "gelu.py", fast), (problems / "gelu.py", top)]
    assert [item.solution for item in unpaired] == [orphan]
    assert unpaired[0].reason.startswith(f"no problem found for {orphan} (looked for")


def test_default_problem_dirs_are_problems_beside_solutions_then_the_working_folder_s(tmp_path, monkeypatch):
    solution = _write(tmp_path / "project" / "solutions" / "gelu" / "solutions" / "v1.py")
    monkeypatch.chdir(tmp_path)
    assert default_problem_dirs(solution) == [tmp_path / "project" / "solutions" / "gelu" / "problems",
                                              tmp_path / "problems"]
    monkeypatch.chdir(tmp_path / "project" / "solutions" / "gelu")
    assert default_problem_dirs(solution) == [tmp_path / "project" / "solutions" / "gelu" / "problems"]
    loose = _write(tmp_path / "loose.py")
    assert default_problem_dirs(loose) == [Path(os.getcwd()) / "problems"]


def test_a_solution_is_read_as_its_bytes_hash_and_text_whatever_its_encoding(tmp_path):
    path = tmp_path / "odd.py"
    data = b"x = 1  # \xff\n"
    path.write_bytes(data)
    solution = Solution.read(path)
    assert solution.path == path and solution.sha256 == hashlib.sha256(data).hexdigest()[:16]
    assert solution.source == "x = 1  # \ufffd\n"
