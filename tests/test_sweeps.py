"""Random parameter sweeps, reduced CPU sizes and `kbench list` (issue: sweeps, small sizes, suite)."""

from __future__ import annotations

import itertools
import json
from dataclasses import replace

import pytest

from kbench import flags, params
from kbench.problem import load_module
from kbench.results import Status
from kbench.schedule.child import evaluate

from conftest import PROBLEMS, REPO, SOLUTIONS
from test_cli import kbench

AXPY = PROBLEMS / "axpy.py"

KERNELBENCH_STYLE = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, groups=1, bias=False):
        super().__init__()
        self.conv = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride=stride, padding=padding,
                                       groups=groups, bias=bias)

    def forward(self, x):
        return self.conv(x)

batch_size = 16
in_channels = 32
out_channels = 64
kernel_size = (3, 5)
height = 128
width = 256
stride = (2, 3)
padding = (1, 2)
groups = 4

def get_inputs():
    return [torch.rand(batch_size, in_channels, height, width)]

def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, groups]
'''


@pytest.fixture
def kernelbench_module(tmp_path):
    path = tmp_path / "75_like.py"
    path.write_text(KERNELBENCH_STYLE)
    return load_module(path, "test_problem")


def test_undeclared_problem_gets_a_derived_space_from_the_globals_it_reads(kernelbench_module):
    space, declared = params.sweep_space(kernelbench_module)
    assert not declared
    assert set(space) == {"batch_size", "in_channels", "out_channels", "kernel_size", "height", "width",
                          "stride", "padding", "groups"}
    assert space["stride"][0] == (2, 3) and (1, 1) in space["stride"]
    assert set(space["groups"]) == {1, 2, 4}
    assert 1 in space["height"] and 129 in space["height"]  # edge and odd sizes


def test_draws_are_deterministic_distinct_and_small(kernelbench_module):
    first = list(itertools.islice(params.iter_configurations(kernelbench_module, seed=7), 8))
    again = list(itertools.islice(params.iter_configurations(kernelbench_module, seed=7), 8))
    other = list(itertools.islice(params.iter_configurations(kernelbench_module, seed=8), 8))
    assert first == again and first != other
    assert len({repr(sorted(c.items())) for c in first}) == 8
    for configuration in first:
        assert params.input_bytes(kernelbench_module, configuration) <= params.SWEEP_INPUT_BYTES


def test_first_configuration_moves_every_size_off_the_official_one(kernelbench_module):
    first = next(params.iter_configurations(kernelbench_module, seed=0, max_input_bytes=1 << 40))
    assert first == {"batch_size": 17, "in_channels": 33, "out_channels": 65, "height": 129, "width": 257}


def test_small_sizes_declared_or_derived(kernelbench_module):
    assert params.small_overrides(load_module(REPO / "problems" / "convt1d.py", "p")) == {
        "batch_size": 2, "length": 512}
    small = params.small_overrides(kernelbench_module)
    assert small and params.input_bytes(kernelbench_module, small) <= params.SMALL_INPUT_BYTES
    assert set(small) <= {"batch_size", "in_channels", "height", "width"}


def test_hard_coded_size_passes_official_and_fails_the_sweep_reproducibly(cpu_config):
    result = evaluate(AXPY, SOLUTIONS / "axpy/hardcoded_size.py", cpu_config)
    assert result.status == Status.CORRECT and result.check.passed
    assert "sweep_failed" in result.flags
    assert result.sweep.run == 8 and result.sweep.passed < result.sweep.run
    assert result.sweep.first_failure.startswith("n=4097: output[4096] = 0")
    assert result.to_row()["sweep_failure"] == result.sweep.first_failure
    strict = evaluate(AXPY, SOLUTIONS / "axpy/hardcoded_size.py", replace(cpu_config, strict=True))
    assert strict.status == Status.INCORRECT and "sweep failed at n=4097" in strict.message


def test_general_solution_passes_the_sweep(cpu_config):
    result = evaluate(AXPY, SOLUTIONS / "axpy/correct.py", cpu_config)
    # No flag about the candidate; on a busy CPU the judge may warn about its measurement.
    assert result.status == Status.CORRECT and not set(result.flags) - set(flags.MEASUREMENT), result.flags
    assert result.sweep.passed == result.sweep.run == 8


def test_sweep_off(cpu_config):
    result = evaluate(AXPY, SOLUTIONS / "axpy/correct_plain.py", replace(cpu_config, sweep=0))
    assert result.status == Status.CORRECT and result.sweep is None


def test_configurations_the_reference_rejects_are_skipped_not_failed(cpu_config, tmp_path):
    problem = tmp_path / "picky.py"
    problem.write_text(
        "import torch\n"
        "class Model(torch.nn.Module):\n"
        "    def __init__(self, alpha):\n        super().__init__()\n        self.alpha = alpha\n"
        "    def forward(self, x, y):\n"
        "        if x.numel() % 3 == 0:\n            raise ValueError('multiples of 3 are invalid')\n"
        "        return self.alpha * x + y\n"
        "n = 8\nalpha = 0.5\n"
        "KBENCH_SWEEP = {'n': [3, 4, 5, 6, 7, 9, 10, 11, 12, 13, 14, 15]}\n"
        "def get_inputs():\n    return [torch.rand(n), torch.rand(n)]\n"
        "def get_init_inputs():\n    return [alpha]\n")
    result = evaluate(problem, SOLUTIONS / "axpy/correct_plain.py", cpu_config)
    assert result.status == Status.CORRECT and "sweep_failed" not in result.flags
    # Seven values of n are valid (4 5 7 10 11 13 14): all run and pass, the multiples of 3 are skipped.
    assert result.sweep.skipped > 0 and result.sweep.passed == result.sweep.run == 7


def test_cpu_runs_large_problems_at_reduced_sizes_and_full_size_forces_official(cpu_config, tmp_path):
    problem = tmp_path / "big_axpy.py"
    problem.write_text((PROBLEMS / "axpy.py").read_text().replace("n = 4096", "n = 1 << 24"))
    result = evaluate(problem, SOLUTIONS / "axpy/correct_plain.py", replace(cpu_config, sweep=0))
    assert result.status == Status.CORRECT and result.sizes.startswith("n=")
    assert int(result.sizes.split("=")[1]) * 8 <= params.SMALL_INPUT_BYTES
    full = evaluate(problem, SOLUTIONS / "axpy/correct_plain.py", replace(cpu_config, sweep=0, full_size=True,
                                                                           time=False))
    assert full.status == Status.CORRECT and full.sizes == ""


def test_list_shows_problems_sweeps_and_paired_solutions():
    completed = kbench("list", "--problems", PROBLEMS, "--solutions", SOLUTIONS, "--json")
    assert completed.returncode == 0, completed.stderr
    entries = {entry["name"]: entry for entry in json.loads(completed.stdout)}
    assert entries["axpy"]["sizes"] == {"n": 4096}  # alpha is a constructor argument, not a global
    assert "axpy/correct.py" in entries["axpy"]["solutions"]
    assert entries["axpy"]["sweep_declared"] is False and "n" in entries["axpy"]["sweep"]


def test_every_suite_problem_loads_and_runs_small_on_the_cpu():
    """Each file in problems/ runs its reference at reduced size, and its sweep draws are small."""
    import torch

    for path in sorted((REPO / "problems").glob("*.py")):
        module = load_module(path, "suite")
        overrides = params.small_overrides(module)
        with torch.no_grad():
            from kbench.problem import overridden
            with overridden(module, overrides):
                torch.manual_seed(0)
                model = module.Model(*module.get_init_inputs())
                output = model(*module.get_inputs())
        assert torch.isfinite(output).all(), path.name
        for configuration in itertools.islice(params.iter_configurations(module, seed=0), 8):
            assert params.input_bytes(module, configuration) <= params.SWEEP_INPUT_BYTES, (path.name, configuration)
