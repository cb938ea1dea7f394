"""The README's CPU quick start, run as written (in a copy of examples/, with a short timing budget)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

from kbench.results_csv import read_rows

from conftest import REPO


def quickstart_commands() -> list[str]:
    """The commands of the README's code block that follows the `<!-- quickstart` marker."""
    block = (REPO / "README.md").read_text().split("<!-- quickstart", 1)[1].split("```")[1]
    return [line.strip() for line in block.strip().splitlines() if line.strip()]


def run(command: str, cwd, cache_dir) -> subprocess.CompletedProcess:
    assert command.startswith("kbench ")
    shell = f"{sys.executable} -m {command}"
    if command.startswith("kbench eval"):
        shell += " --time-budget 0.5"  # the verdicts, not the times, are under test
    environment = dict(os.environ, PYTHONPATH=str(REPO), KBENCH_CACHE_DIR=str(cache_dir), COLUMNS="80")
    return subprocess.run(["bash", "-c", shell], cwd=cwd, env=environment, capture_output=True, text=True,
                          timeout=600)


def test_readme_quickstart_runs_as_written(tmp_path, cache_dir):
    commands = quickstart_commands()
    assert [command.split()[:2] for command in commands] == [["kbench", "eval"], ["kbench", "report"]]
    shutil.copytree(REPO / "examples", tmp_path / "examples")
    evaluated = run(commands[0], tmp_path, cache_dir)
    assert evaluated.returncode == 1, evaluated.stderr  # hardswish.py is not correct
    statuses = {row["solution"].rsplit("/", 1)[-1]: row["status"]
                for row in read_rows(tmp_path / "results" / "results.csv")}
    assert statuses == {"cpp.py": "correct", "silu.py": "correct", "hardswish.py": "incorrect"}
    assert "output[" in evaluated.stdout  # the mismatch is shown
    reported = run(commands[1], tmp_path, cache_dir)
    assert reported.returncode == 0, reported.stderr
    for expected in ("swish", "hardswish.py", "failures", "trusted", "KernelBench"):
        assert expected in reported.stdout


def test_the_install_block_gets_the_cpu_build_before_anything_else():
    """A bare `pip install torch` first would fetch gigabytes of CUDA packages on a machine without a GPU."""
    install = (REPO / "README.md").read_text().split("## Install", 1)[1].split("```")[1]
    torch_lines = [line for line in install.splitlines() if "pip install torch" in line]
    assert torch_lines and "whl/cpu" in torch_lines[0], install
    assert install.index("whl/cpu") < install.index("pip install -e")
