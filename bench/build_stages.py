"""Where a candidate's build spends CPU time, stage by stage, torch's way and kbench's; and whether kbench's way
writes the same code.

    PYTHONPATH=$PWD python3 bench/build_stages.py PROBLEMS SOLUTION... [--cache-dir DIR] [--device cuda] [--jobs N]

kbench's primer precompiles torch's headers into a cold cache, then every solution is built through kbench
(`--jobs` at once), so that its build folders exist. Then every command of each extension's build is run again,
one at a time per extension (`--jobs` extensions at once), timed as CPU seconds (user + system of the command
and its children):
- the C++ bindings file with torch's headers parsed (torch's way) and through kbench's c++ wrapper (the light
  header, precompiled: light.py, pch.py);
- the CUDA file with torch/extension.h (torch's way) and with the light header (kbench's: light.py), nvcc's
  steps one by one (from `nvcc --dryrun`: the preprocessor passes, cicc, ptxas, fatbinary, cudafe++ and the host
  compile); where the light compile fails, what it cost before the file was compiled torch's way;
- the link.
Both CUDA objects are compared: every kernel's SASS (cuobjdump) and every host function both define (objdump,
addresses blanked); so are both bindings objects' functions. Prints one row per stage (files, median and total
CPU seconds), each build's total both ways, and the comparisons.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from kbench.config import RunConfig
from kbench.extensions import light
from kbench.extensions.cache import versions_tag
from kbench.extensions.primer import arguments as primer_arguments
from kbench.schedule.executor import LocalExecutor
from kbench.solution import PairingError, pair_problem

TORCH_WAY, KBENCH_WAY = "torch's way", "kbench's way"


class StepFailed(RuntimeError):
    def __init__(self, message: str, seconds: float):
        super().__init__(message)
        self.seconds = seconds


@dataclass
class Extension:
    """One extension's build, timed both ways."""
    name: str
    stages: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    totals: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    light_failed: bool = False
    same_sass: bool | None = None
    host_functions: tuple[int, int, int] = (0, 0, 0)  # same, different, defined by one object only
    bindings_functions: tuple[int, int, int] = (0, 0, 0)  # the same, of the bindings objects
    different: list[str] = field(default_factory=list)  # functions both define that differ (mangled)
    note: str = ""


def cpu_seconds(command: str | list[str], folder: Path, environment: dict | None = None) -> float:
    """CPU time of a command and everything it started; raises StepFailed (with the time) when it fails."""
    arguments = ["bash", "-c", command] if isinstance(command, str) else command
    process = subprocess.Popen(arguments, cwd=folder, env=environment, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    seconds = usage.ru_utime + usage.ru_stime
    if os.waitstatus_to_exitcode(status) != 0:
        shown = command if isinstance(command, str) else shlex.join(command)
        raise StepFailed(f"{shown[:120]}...: {process.stderr.read()[-400:]!r}", seconds)
    return seconds


def build_commands(folder: Path) -> list[str]:
    """The build's commands as ninja would run them (in dependency order)."""
    return subprocess.run(["ninja", "-t", "commands"], cwd=folder, capture_output=True, text=True,
                          check=True).stdout.splitlines()


def nvcc_stages(arguments: list[str], folder: Path, scratch: Path) -> dict[str, float]:
    """nvcc's compile split into its steps (`--dryrun` lists them with the variables they need); raises
    StepFailed, with the CPU time of the steps run, at the first that fails."""
    listing = subprocess.run([*arguments, "--dryrun", "--keep", "--keep-dir", str(scratch)], cwd=folder,
                             capture_output=True, text=True).stderr
    environment, stages = dict(os.environ), defaultdict(float)
    for line in listing.splitlines():
        if not line.startswith("#$ "):
            continue
        step = line[3:].strip()
        name, _, value = step.partition("=")
        if _ and " " not in name:  # an assignment nvcc makes for the steps after it
            environment[name] = os.path.expandvars(value)
            continue
        if step.startswith("--"):  # nvcc's own work between steps ("-- Filter Dependencies --")
            continue
        program = Path(shlex.split(step)[0]).name
        if program in ("gcc", "g++", "c++", "cc"):
            stage = "preprocess (gcc -E)" if " -E " in f" {step} " else "host compile (gcc)"
        else:
            stage = program
        try:
            stages[stage] += cpu_seconds(step, scratch, environment)
        except StepFailed as failed:
            raise StepFailed(f"{stage}: {failed}", sum(stages.values()) + failed.seconds) from None
    return stages


def with_output(arguments: list[str], output: Path) -> list[str]:
    index = arguments.index("-o")
    return [*arguments[:index + 1], str(output), *arguments[index + 2:]]


def real_nvcc(wrapper: str) -> str:
    """The compiler kbench's nvcc wrapper runs (the last word of its first `exec`)."""
    text = Path(wrapper).read_text()
    return shlex.split(re.search(r"exec (\S+) \"\$@\"", text).group(1))[0]


def sass(path: Path) -> str | None:
    if shutil.which("cuobjdump") is None:
        return None
    listing = subprocess.run(["cuobjdump", "-sass", str(path)], capture_output=True, text=True).stdout
    return "\n".join(line for line in listing.splitlines() if str(path) not in line and "Fatbin" not in line)


def host_functions(path: Path) -> dict[str, str]:
    """Each host function's instructions, addresses blanked (the two objects lay their functions out apart)."""
    listing = subprocess.run(["objdump", "-d", "-r", "--no-show-raw-insn", str(path)], capture_output=True,
                             text=True, check=True).stdout
    functions, name = {}, None
    for line in listing.splitlines():
        header = re.match(r"^[0-9a-f]+ <(.+)>:$", line)
        if header:
            name = header.group(1)
            functions[name] = []
        elif name and line.strip() and not line.startswith("Disassembly of section"):
            instruction = re.sub(r"^\s*[0-9a-f]+:\s*", "", line)
            instruction = re.sub(r"\b[0-9a-f]+ <", "# <", instruction)  # a call's or jump's target address
            # A target outside this function is a relocation's (the next line names it); objdump annotates the
            # unrelocated address with whatever symbol lies nearest, which the two objects place apart.
            instruction = re.sub(r"<(?!" + re.escape(name) + r"[+>])[^>]*>", "<#>", instruction)
            # where in a section a relocation points (strings, local functions): laid out apart
            functions[name].append(re.sub(r"(\s\.[\w.$]*)[+-]0x[0-9a-f]+", r"\1+#", instruction))
    return {name: "\n".join(lines) for name, lines in functions.items()}


def compare(extension: Extension, full: Path, lighter: Path) -> None:
    full_sass, light_sass = sass(full), sass(lighter)
    extension.same_sass = None if full_sass is None else full_sass == light_sass
    extension.host_functions = compare_functions(extension, full, lighter)


def compare_functions(extension: Extension, full: Path, lighter: Path) -> tuple[int, int, int]:
    """(functions both objects define alike, differently, functions one defines); the differing ones noted."""
    full_host, light_host = host_functions(full), host_functions(lighter)
    common = full_host.keys() & light_host.keys()
    different = sorted(name for name in common if full_host[name] != light_host[name])
    extension.different += different
    return len(common) - len(different), len(different), len(full_host.keys() ^ light_host.keys())


def time_cuda_compile(extension: Extension, command: str, folder: Path, scratch: Path) -> None:
    words = shlex.split(command)
    nvcc = real_nvcc(words[0])
    torch_way = [nvcc, *words[1:]]
    kbench_way = [nvcc, "-I", str(light.folder_for(Path(words[0]).parent / light.FOLDER, "nvcc")), *words[1:]]
    objects = {}
    for way, arguments in ((TORCH_WAY, torch_way), (KBENCH_WAY, kbench_way)):
        keep = scratch / way.split("'")[0]
        keep.mkdir()
        objects[way] = keep / "cuda.o"
        try:
            for stage, seconds in nvcc_stages(with_output(arguments, objects[way]), folder, keep).items():
                extension.stages[f"nvcc {way}: {stage}"] += seconds
                extension.totals[way] += seconds
        except StepFailed as failed:
            if way == TORCH_WAY:
                raise
            extension.light_failed = True
            extension.note = str(failed)[:160]
            extension.stages["nvcc kbench's way: light compile that failed"] += failed.seconds
            extension.totals[way] += failed.seconds + extension.totals[TORCH_WAY]
    if not extension.light_failed:
        compare(extension, objects[TORCH_WAY], objects[KBENCH_WAY])


def time_extension(folder: Path, real_cxx: str) -> Extension:
    extension = Extension(folder.name)
    with tempfile.TemporaryDirectory(prefix="kbench-stages-") as scratch:
        for command in build_commands(folder):
            if " -c " not in command:
                seconds = cpu_seconds(command, folder)
                extension.stages["link"] += seconds
                for way in (TORCH_WAY, KBENCH_WAY):
                    extension.totals[way] += seconds
            elif Path(shlex.split(command)[0]).name == "nvcc":
                time_cuda_compile(extension, command, folder, Path(scratch))
            else:
                time_bindings_compile(extension, command, folder, Path(scratch), real_cxx)
    return extension


def time_bindings_compile(extension: Extension, command: str, folder: Path, scratch: Path, real_cxx: str) -> None:
    """The C++ bindings file torch's way (the real compiler) and kbench's (its wrapper: light header, precompiled),
    each object kept apart and the two compared."""
    words = shlex.split(command)
    objects = {way: scratch / f"bindings-{index}.o" for index, way in enumerate((TORCH_WAY, KBENCH_WAY))}
    parsed = cpu_seconds(with_output([real_cxx, *words[1:]], objects[TORCH_WAY]), folder)
    lighter = cpu_seconds(with_output(words, objects[KBENCH_WAY]), folder)
    extension.stages["c++ bindings, torch's headers parsed"] += parsed
    extension.stages["c++ bindings, light header precompiled (kbench)"] += lighter
    extension.totals[TORCH_WAY] += parsed
    extension.totals[KBENCH_WAY] += lighter
    extension.bindings_functions = compare_functions(extension, objects[TORCH_WAY], objects[KBENCH_WAY])


def build_all(solutions: list[Path], problems: Path, config: RunConfig, jobs: int) -> list[Path]:
    """Build every solution through kbench; the extension folders made."""
    extensions = Path(config.cache_dir, "extensions", versions_tag())

    def build(solution: Path) -> str:
        try:
            problem = pair_problem(solution, [problems])
        except PairingError as error:
            return f"{solution.name}: {error}"
        result = LocalExecutor().build((problem, solution), config, config.device, "", 2)
        return f"{solution.name}: {result.status} in {result.build_s or 0:.1f} s {result.message[:80]}"

    with ThreadPoolExecutor(jobs) as pool:
        for line in pool.map(build, solutions):
            print(line, flush=True)
    return sorted(path.parent for path in extensions.glob("*/*/build.ninja"))


def report(timed: list[Extension]) -> None:
    per_stage: dict[str, list[float]] = defaultdict(list)
    for extension in timed:
        for stage, seconds in extension.stages.items():
            per_stage[stage].append(seconds)
    print(f"\n{'stage (CPU seconds)':58}{'files':>6}{'median':>8}{'total':>8}")
    for stage, values in sorted(per_stage.items()):
        print(f"{stage:58}{len(values):6d}{statistics.median(values):8.1f}{sum(values):8.1f}")
    print(f"\n{'extension':34}{'torch s':>8}{'kbench s':>9}{'ratio':>7}  light  SASS  host functions same/diff/one"
          "  bindings' functions")
    for extension in timed:
        torch_s, kbench_s = extension.totals[TORCH_WAY], extension.totals[KBENCH_WAY]
        sass_text = {None: "-", True: "same", False: "DIFF"}[extension.same_sass]
        same, different, one_only = extension.host_functions
        bindings = "/".join(str(count) for count in extension.bindings_functions)
        print(f"{extension.name[:33]:34}{torch_s:8.1f}{kbench_s:9.1f}{kbench_s / torch_s:7.2f}  "
              f"{'no' if extension.light_failed else 'yes':5}  {sass_text:4}  {same}/{different}/{one_only}"
              f"  {bindings}{'  ' + extension.note if extension.note else ''}")
    different = sorted({name for extension in timed for name in extension.different})
    if different:
        names = subprocess.run(["c++filt"], input="\n".join(different), capture_output=True, text=True).stdout
        print("functions that differ:", *(f"  {name[:110]}" for name in names.splitlines()), sep="\n")
    if timed:
        torch_total = sum(extension.totals[TORCH_WAY] for extension in timed)
        kbench_total = sum(extension.totals[KBENCH_WAY] for extension in timed)
        print(f"{'all':34}{torch_total:8.1f}{kbench_total:9.1f}{kbench_total / torch_total:7.2f}  "
              f"{sum(not extension.light_failed for extension in timed)}/{len(timed)} light")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("problems", type=Path)
    parser.add_argument("solutions", type=Path, nargs="+")
    parser.add_argument("--cache-dir", type=Path, default=None, help="default: a new folder (cold builds)")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2) // 2),
                        help="builds, then extensions timed, at once [default: half the cores]")
    arguments = parser.parse_args()
    arguments.cache_dir = arguments.cache_dir or Path(tempfile.mkdtemp(prefix="kbench-build-stages-"))
    config = RunConfig(device=arguments.device, cache_dir=arguments.cache_dir)
    cuda = arguments.device.startswith("cuda")
    subprocess.run([sys.executable, "-m", "kbench.extensions.primer", *primer_arguments(config.cache_dir, cuda)],
                   check=True)
    folders = build_all(arguments.solutions, arguments.problems, config, arguments.jobs)
    real_cxx = os.environ.get("CXX", "c++")
    with ThreadPoolExecutor(arguments.jobs) as pool:
        timed = [extension for extension in pool.map(lambda folder: _timed(folder, real_cxx), folders) if extension]
    report(timed)


def _timed(folder: Path, real_cxx: str) -> Extension | None:
    try:
        return time_extension(folder, real_cxx)
    except (StepFailed, subprocess.CalledProcessError) as error:
        print(f"{folder.name}: not timed: {error}", flush=True)
        return None


if __name__ == "__main__":
    main()
