"""Precompiled torch headers (kbench/extensions/pch.py), with the real g++ on a small stand-in for torch's include tree,
and once through the session's real fixture builds."""

from __future__ import annotations

import fcntl
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from kbench.extensions import pch

pytestmark = pytest.mark.skipif(shutil.which("c++") is None, reason="needs a C++ compiler")

STAND_IN = """#pragma once
#include <vector>
#include <numeric>
template <typename T> T total(const std::vector<T>& values) {
    return std::accumulate(values.begin(), values.end(), T());
}
inline int answer() { return 42; }
"""


@pytest.fixture
def tree(tmp_path):
    """An include folder with torch/extension.h, a source that includes it first, and the compile's arguments."""
    include = tmp_path / "include"
    (include / "torch").mkdir(parents=True)
    (include / "torch" / "extension.h").write_text(STAND_IN)
    source = tmp_path / "main.cpp"
    source.write_text("#include <torch/extension.h>\n\n#include <torch/extension.h>\n"
                      "int f(int x) { return answer() + total(std::vector<int>{x, 1}); }\n")
    return tmp_path, source, include


def compile_arguments(tree, *flags, name="ext_a", output="main.o"):
    folder, source, include = tree
    return ["-MMD", "-MF", str(folder / f"{output}.d"), f"-DTORCH_EXTENSION_NAME={name}", "-isystem", str(include),
            "-fPIC", *flags, "-c", str(source), "-o", str(folder / output)]


def disassembly(path: Path) -> list[str]:
    listing = subprocess.run(["objdump", "-d", str(path)], capture_output=True, text=True, check=True).stdout
    return listing.splitlines()[2:]  # after the file's name


def test_a_compile_uses_the_header_and_writes_the_same_object(tree):
    folder = tree[0]
    root = folder / "pch"
    plain = compile_arguments(tree, output="plain.o")
    served = pch.arguments_with_header("c++", compile_arguments(tree), root)
    assert served[:2] == ["-I", str(next(root.iterdir()))]
    assert (Path(served[1]) / pch.PRECOMPILED).is_file()
    used = subprocess.run(["c++", "-H", *served], capture_output=True, text=True, check=True)
    assert used.stderr.splitlines()[0] == f"! {served[1]}/{pch.PRECOMPILED}"  # "!": g++ loaded it
    subprocess.run(["c++", *plain], check=True)
    assert disassembly(folder / "main.o") == disassembly(folder / "plain.o")


def test_the_extension_name_shares_a_header_and_other_flags_do_not(tree):
    root = tree[0] / "pch"
    first = pch.arguments_with_header("c++", compile_arguments(tree, name="ext_a"), root)
    second = pch.arguments_with_header("c++", compile_arguments(tree, name="ext_b", output="b.o"), root)
    optimised = pch.arguments_with_header("c++", compile_arguments(tree, "-O2"), root)
    assert first[1] == second[1]
    assert optimised[1] != first[1]
    assert len(list(root.iterdir())) == 2


def test_a_changed_header_gets_a_new_precompiled_one(tree):
    root = tree[0] / "pch"
    first = pch.arguments_with_header("c++", compile_arguments(tree), root)
    time.sleep(0.01)
    (tree[2] / "torch" / "extension.h").write_text(STAND_IN + "inline int other() { return 1; }\n")
    assert pch.arguments_with_header("c++", compile_arguments(tree), root)[1] != first[1]


def test_a_compile_does_not_wait_for_a_header_another_compile_is_building(tree):
    root = tree[0] / "pch"
    arguments = compile_arguments(tree)
    folder = root / pch._key("c++", tree[2] / "torch" / "extension.h", arguments)
    folder.mkdir(parents=True)
    with (folder / "lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        assert pch.arguments_with_header("c++", arguments, root) == arguments
    assert not (folder / pch.PRECOMPILED).exists()


def test_a_header_that_failed_to_build_is_not_tried_again(tree):
    (tree[2] / "torch" / "extension.h").write_text("#pragma once\nthis is not C++\n")
    root = tree[0] / "pch"
    arguments = compile_arguments(tree)
    assert pch.arguments_with_header("c++", arguments, root) == arguments
    failed = next(root.iterdir()) / pch.FAILED
    assert "this is not C++" in failed.read_text()
    written = failed.stat().st_mtime_ns
    assert pch.arguments_with_header("c++", arguments, root) == arguments
    assert failed.stat().st_mtime_ns == written


@pytest.mark.parametrize("source_text", ["#include <vector>\n#include <torch/extension.h>\n", "int x;\n"])
def test_sources_that_do_not_start_with_torch_are_left_alone(tree, source_text):
    tree[1].write_text(source_text)
    root = tree[0] / "pch"
    arguments = compile_arguments(tree)
    assert pch.arguments_with_header("c++", arguments, root) == arguments
    assert not root.exists()


@pytest.mark.parametrize("arguments", [["main.o", "-shared", "-o", "ext.so"], ["-v"], ["-dumpfullversion"]])
def test_links_and_queries_are_left_alone(tmp_path, arguments):
    assert pch.arguments_with_header("c++", arguments, tmp_path / "pch") == arguments


def test_real_fixture_builds_precompile_torch_s_light_header(cpu_config):
    """The session's C++ fixtures were built through kbench's compiler wrappers after kbench's primer precompiled
    the light torch/extension.h (light.py) for torch's default flags; only one fixture passes -O3, which is not
    worth a primer (PRIMED_MIN_BUILDS)."""
    from kbench.extensions import primer
    assert primer.marker(cpu_config.cache_dir, False, []).exists()
    assert not primer.marker(cpu_config.cache_dir, False, ["-O3"]).exists()
    built = list(cpu_config.cache_dir.glob(f"pch/*/*/{pch.PRECOMPILED}"))
    assert len(built) == 1
    stub = built[0].with_name("extension.h")  # beside the precompiled header: what it was made of comes next
    assert stub.read_text() == f"#pragma once\n#include_next <{pch.HEADER}>\n"
    logs = list(cpu_config.cache_dir.glob("logs/primer-*.log"))
    assert logs and not any("uses more of torch" in log.read_text() for log in logs)  # it compiled light


@pytest.mark.parametrize("cflags, primed", [
    ([""], []), ([], []), (["-O3"], ["-O3"]), (["-O2", "-DNDEBUG", "-std=c++17", "-Wall", "-ffast-math"],
                                                 ["-O2", "-DNDEBUG", "-std=c++17", "-Wall", "-ffast-math"]),
    (["-O3", "-march=native", " "], ["-O3", "-march=native"]),
    (["-fplugin=./evil.so"], None), (["-Wp,-include,/tmp/evil.h"], None), (["-O3", "-include", "x.h"], None),
    (["@flags.txt"], None), (["-B/tmp/evil/"], None), (["-Wl,--wrap=malloc"], None), (["-specs=x"], None),
    (["-DX=$(touch /tmp/pwned)"], None)])
def test_only_allow_listed_flag_sets_are_primed(cflags, primed):
    """The primer compiles torch's headers unconfined: a candidate's flags reach it only when none of them
    could make the compiler read or run a file of the candidate's."""
    from kbench.extensions import primer
    assert primer.primable(cflags) == primed


def test_a_sweep_primes_the_flag_sets_its_candidates_write(tmp_path):
    """torch's defaults for each kind, then the primable extra_cflags that two or more solutions pass, the most used
    first."""
    from kbench.schedule.executor import flag_sets_to_prime
    from kbench.solution import Solution
    sources = {
        "a.py": 'load_inline(name="a", cpp_sources=s, extra_cflags=["-O3"])\n',
        "b.py": 'load_inline(name="b", cpp_sources=s, extra_cflags=["-O3"], extra_ldflags=[""])\n',
        "c.py": 'load_inline(name="c", cpp_sources=s, extra_cflags=["-O2", "-fplugin=evil.so"])\n',
        "d.py": 'load_inline(name="d", cpp_sources=s, extra_cflags=[""], cuda_sources=k)\n',
        "e.py": 'load_inline(name="e", cpp_sources=s, extra_cflags=["-O2"])\nflags = f(\n',  # does not parse
        "f.py": 'flags = ["-O1"]\nload_inline(name="f", cpp_sources=s, extra_cflags=flags)\n',  # not a literal
        "g.py": 'load_inline(name="g", cpp_sources=s, extra_cflags=("-O2",))\n',
        "h.py": "x = " + "-" * 200000 + "1\nload_inline(extra_cflags=['-O1'])\n",  # too deep for the parser
        "i.py": 'load_inline(name="i", cpp_sources=s, extra_cflags=["-O2"])\n',
        "j.py": 'load_inline(name="j", cpp_sources=s, extra_cflags=["-O3"])\n',
        "k.py": 'load_inline(name="k", cpp_sources=s, extra_cflags=["-Ofast"])\n',  # one build: not worth a primer
    }
    solutions = []
    for name, text in sources.items():
        (tmp_path / name).write_text(text)
        solutions.append(Solution.read(tmp_path / name))
    assert flag_sets_to_prime(solutions) == [(False, []), (False, ["-O3"]), (False, ["-O2"]), (True, [])]
