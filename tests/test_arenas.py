"""The arenas (kbench/runner/arenas.py, kbench/judge/remote.py): the runner sees the problem's arguments laid out as
get_inputs made them, and cannot make the judge write where it chose nor allocate more than the reference needs.
Each fixture is described in tests/fixtures/arenas/README.md."""

from __future__ import annotations

import os
from dataclasses import replace

import pytest
import torch

from kbench import flags
from kbench.config import RunConfig
from kbench.results import Status
from kbench.layouts import copied_with_layout
from kbench.schedule.child import evaluate

from conftest import FIXTURES, PROBLEMS

ARENAS = FIXTURES / "arenas"
LAYOUTS = ["transposed.py", "sliced.py", "shared.py"]
ALL_LAYOUTS = [*LAYOUTS, "expanded.py"]  # an expanded view: reading it densely runs off its storage (an error)


@pytest.fixture(scope="module")
def config(cache_dir) -> RunConfig:
    return RunConfig(device="cpu", cache_dir=cache_dir, timeout_s=300, time_budget_s=0.3, min_samples=5,
                     sweep=0)


def test_a_copy_keeps_strides_offsets_and_shared_storage():
    base = torch.rand(6, 9)
    values = [base.t(), base[:, 2:], 3, base]
    copies = copied_with_layout(values)
    for value, copy in zip(values, copies):
        if isinstance(value, torch.Tensor):
            assert (copy.stride(), copy.storage_offset()) == (value.stride(), value.storage_offset())
            assert torch.equal(copy, value) and copy.untyped_storage().data_ptr() != base.untyped_storage().data_ptr()
    assert len({copy.untyped_storage().data_ptr() for copy in (copies[0], copies[1], copies[3])}) == 1
    copies[3].fill_(0)
    assert not copies[0].any() and base.all()
    conjugate = torch.rand(3, dtype=torch.complex64).conj()  # a bit its bytes do not hold: applied in the copy
    assert torch.equal(copied_with_layout([conjugate])[0], conjugate)


@pytest.mark.parametrize("problem", ALL_LAYOUTS)
def test_the_reference_s_own_code_is_correct_on_the_problem_s_layout(config, problem):
    result = evaluate(ARENAS / "problems" / problem, ARENAS / "reference_code.py", replace(config, time=False))
    assert result.status == Status.CORRECT, (result.status, result.message)
    assert flags.MUTATED_INPUTS not in result.flags, result.message


@pytest.mark.parametrize("problem", ALL_LAYOUTS)
def test_timed_rounds_reload_the_arguments_with_their_layout(config, problem):
    """Each round's contents are loaded into both runners' arenas, laid out as the problem's (an expanded view
    cannot be written element by element), and the timed outputs are checked against the reference's (stale_output
    otherwise)."""
    result = evaluate(ARENAS / "problems" / problem, ARENAS / "reference_code.py", config)
    assert result.status == Status.CORRECT and result.candidate_timing is not None, (result.status, result.message)
    assert not set(result.flags) & set(flags.REJECTING), (result.flags, result.message)


@pytest.mark.parametrize("problem", LAYOUTS)
def test_a_candidate_that_ignores_strides_is_incorrect(config, problem):
    result = evaluate(ARENAS / "problems" / problem, ARENAS / "ignores_strides.py", replace(config, time=False))
    assert result.status == Status.INCORRECT, (result.status, result.message)


def test_links_planted_where_arenas_were_lead_the_judge_nowhere(config, tmp_path):
    """The judge's arenas have no path: links the candidate plants in any folder it can write, at any name, are
    never followed, and asking for room for one output more than it returns is refused."""
    existing, missing = tmp_path / "existing", tmp_path / "missing"
    existing.write_bytes(b"untouched")
    missing.mkdir()
    targets = {"existing": str(existing), "missing": str(missing)}  # in its source: it reads no file beside it
    (tmp_path / "plant_links.py").write_text((ARENAS / "plant_links.py").read_text().replace(
        'TARGETS = {"existing": "", "missing": ""}', f"TARGETS = {targets!r}"))
    result = evaluate(PROBLEMS / "axpy.py", tmp_path / "plant_links.py", config)
    assert result.status == Status.INCORRECT, (result.status, result.message)
    assert "no more room" in result.message, result.message
    assert existing.read_bytes() == b"untouched" and os.stat(existing).st_size == len(b"untouched")
    assert not list(missing.iterdir())


def test_an_output_far_larger_than_the_reference_s_is_refused_room(config):
    result = evaluate(PROBLEMS / "axpy.py", ARENAS / "huge_output.py", config)
    assert result.status == Status.INCORRECT, (result.status, result.message)
    assert "no more room" in result.message, result.message


@pytest.mark.gpu
def test_an_output_far_larger_than_the_reference_s_is_the_candidate_s_failure_on_a_gpu(gpu_cache_dir):
    """On a card, room for 60% of its memory made the judge run out of its own and blame itself (infra_error)."""
    config = RunConfig(device="cuda", cache_dir=gpu_cache_dir, time_budget_s=0.5, sweep=0)
    result = evaluate(PROBLEMS / "axpy.py", ARENAS / "huge_output.py", config)
    assert result.status in (Status.INCORRECT, Status.RUNTIME_ERROR), (result.status, result.message)


@pytest.mark.gpu
@pytest.mark.parametrize("problem", ALL_LAYOUTS)
def test_layouts_cross_to_the_runners_on_a_gpu(gpu_cache_dir, problem):
    config = RunConfig(device="cuda", cache_dir=gpu_cache_dir, time_budget_s=0.5, sweep=0)
    honest = evaluate(ARENAS / "problems" / problem, ARENAS / "reference_code.py", config)
    assert honest.status == Status.CORRECT, (honest.status, honest.message)
    assert flags.MUTATED_INPUTS not in honest.flags and flags.STALE_OUTPUT not in honest.flags, honest.message
    if problem in LAYOUTS:
        ignorer = evaluate(ARENAS / "problems" / problem, ARENAS / "ignores_strides.py", replace(config, time=False))
        assert ignorer.status == Status.INCORRECT, (ignorer.status, ignorer.message)
