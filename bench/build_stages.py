"""Where a candidate's build spends CPU time, stage by stage, with and without kbench's precompiled header.

    PYTHONPATH=$PWD python3 bench/build_stages.py PROBLEMS SOLUTION... [--cache-dir DIR] [--device cuda]

Each solution is built once through kbench, in order, into one cold cache (so its build folders and the
cache's precompiled header exist; the first solution's build makes the header). Then every command of each
extension's build is run again, one at a time, timed as CPU seconds (user + system of the command and its
children): the C++ bindings file with torch's headers parsed (torch's way) and precompiled (kbench's), nvcc's
steps one by one (from `nvcc --dryrun`: the preprocessor passes, cicc, ptxas, fatbinary, cudafe++ and the host
compile), and the link. Prints one row per stage: files, median and total CPU seconds.
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import subprocess
import tempfile
from collections import defaultdict
from pathlib import Path

from kbench.extensions.cache import versions_tag
from kbench.config import RunConfig
from kbench.schedule.scheduler import LocalExecutor
from kbench.solution import PairingError, pair_problem


def cpu_seconds(command: str, folder: Path, environment: dict | None = None) -> float:
    """CPU time of a shell command and everything it started; raises when it fails."""
    process = subprocess.Popen(["bash", "-c", command], cwd=folder, env=environment, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise RuntimeError(f"{command[:120]}...: exit {process.returncode}: {process.stderr.read()[-400:]!r}")
    return usage.ru_utime + usage.ru_stime


def build_commands(folder: Path) -> list[str]:
    """The build's commands as ninja would run them (in dependency order)."""
    return subprocess.run(["ninja", "-t", "commands"], cwd=folder, capture_output=True, text=True,
                          check=True).stdout.splitlines()


def nvcc_stages(command: str, folder: Path, scratch: Path) -> dict[str, float]:
    """nvcc's compile split into its steps (`--dryrun` lists them with the variables they need)."""
    listing = subprocess.run(f"{command} --dryrun --keep --keep-dir {shlex.quote(str(scratch))}", shell=True,
                             cwd=folder, capture_output=True, text=True, executable="/bin/bash").stderr
    environment, stages = dict(os.environ), defaultdict(float)
    for line in listing.splitlines():
        if not line.startswith("#$ "):
            continue
        step = line[3:].strip()
        name, _, value = step.partition("=")
        if _ and " " not in name:  # an assignment nvcc makes for the steps after it
            environment[name] = os.path.expandvars(value)
            continue
        program = Path(shlex.split(step)[0]).name
        if program in ("gcc", "g++", "c++", "cc"):
            stage = "nvcc: preprocess (gcc -E)" if " -E " in f" {step} " else "nvcc: host compile (gcc)"
        else:
            stage = f"nvcc: {program}"
        stages[stage] += cpu_seconds(step, scratch, environment)
    return stages


def stages_of(folder: Path, real_cxx: str) -> dict[str, float]:
    stages: dict[str, float] = defaultdict(float)
    with tempfile.TemporaryDirectory(prefix="kbench-stages-") as scratch:
        for command in build_commands(folder):
            if "nvcc" in command.split()[0] and " -c " in command:
                for stage, seconds in nvcc_stages(command, folder, Path(scratch)).items():
                    stages[stage] += seconds
            elif " -c " in command:
                stages["c++ bindings, precompiled torch headers"] += cpu_seconds(command, folder)
                wrapper = command.split()[0]
                stages["c++ bindings, torch headers parsed"] += cpu_seconds(
                    command.replace(wrapper, shlex.quote(real_cxx), 1), folder)
            else:
                stages["link"] += cpu_seconds(command, folder)
    return stages


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("problems", type=Path)
    parser.add_argument("solutions", type=Path, nargs="+")
    parser.add_argument("--cache-dir", type=Path, default=None, help="default: a new folder (cold builds)")
    parser.add_argument("--device", default="cuda")
    arguments = parser.parse_args()
    arguments.cache_dir = arguments.cache_dir or Path(tempfile.mkdtemp(prefix="kbench-build-stages-"))
    config = RunConfig(device=arguments.device, cache_dir=arguments.cache_dir)
    per_stage: dict[str, list[float]] = defaultdict(list)
    real_cxx = os.environ.get("CXX", "c++")
    for solution in arguments.solutions:
        try:
            problem = pair_problem(solution, [arguments.problems])
        except PairingError as error:
            print(f"{solution.name}: {error}")
            continue
        extensions = Path(arguments.cache_dir, "extensions", versions_tag())
        before = set(extensions.glob("*/*/build.ninja"))  # <solution>/<extension>/
        result = LocalExecutor().build((problem, solution), config, arguments.device, "", 2)
        if result.status != "built":
            print(f"{solution.name}: {result.status}: {result.message[:60]}")
            continue
        folders = [path.parent for path in sorted(set(extensions.glob("*/*/build.ninja")) - before)]
        for folder in folders:
            for stage, seconds in stages_of(folder, real_cxx).items():
                per_stage[stage].append(seconds)
        print(f"{solution.name}: {len(folders)} extension(s) timed", flush=True)
    print(f"\n{'stage':44}{'files':>6}{'median s':>10}{'total s':>10}")
    for stage, values in sorted(per_stage.items()):
        print(f"{stage:44}{len(values):6d}{statistics.median(values):10.1f}{sum(values):10.1f}")


if __name__ == "__main__":
    main()
