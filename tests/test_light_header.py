"""The light torch/extension.h (kbench/extensions/light.py) for CUDA files, through kbench's real nvcc wrapper and the
real nvcc, and for C++ files, through the real c++ wrapper and g++, with its precompiled form (pch.py), on a small
stand-in for torch's include tree."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from kbench.extensions import light, pch, wrappers

NVCC = shutil.which("nvcc")
CXX = shutil.which("c++")
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="needs nvcc")
needs_cxx = pytest.mark.skipif(CXX is None, reason="needs a C++ compiler")

# torch/extension.h's stand-in: types.h, the bindings' headers and more, which a light compile does not see
FULL = ("#pragma once\n#include <torch/types.h>\n#include <torch/csrc/utils/pybind.h>\n"
        "#include <torch/csrc/Exceptions.h>\ninline int everything() { return 2; }\n")
TYPES = "#pragma once\n#include <vector>\n#include <numeric>\ninline int tensor_basics() { return 1; }\n"
BINDINGS = "#pragma once\ninline int bind_it(int x) { return x + 1; }\n"
KERNEL = "__global__ void scale(float* x, float by) { x[threadIdx.x] *= by; }\n"
BINDINGS_FILE = ("#include <torch/extension.h>\nint f(int x) { return bind_it(x) + tensor_basics()"
                 " + std::accumulate(std::vector<int>{x, 2}.begin(), std::vector<int>{x, 2}.end(), 0); }\n")


@pytest.fixture
def tree(tmp_path):
    """The stand-in include tree, the judge's light headers and wrappers that know them (the c++ one with a folder
    for precompiled headers)."""
    include = tmp_path / "include" / "torch"
    (include / "csrc" / "utils").mkdir(parents=True)
    (include / "extension.h").write_text(FULL)
    (include / "types.h").write_text(TYPES)
    (include / "csrc" / "utils" / "pybind.h").write_text(BINDINGS)
    (include / "csrc" / "Exceptions.h").write_text("#pragma once\n")
    light.write_light_headers(tmp_path / light.FOLDER, include / "extension.h")
    package_parent = str(Path(light.__file__).resolve().parents[2])
    for kind, compiler in (("nvcc", NVCC), ("c++", CXX)):
        if compiler is not None:
            variables = {wrappers.LIGHT_VARIABLE: str(light.folder_for(tmp_path / light.FOLDER, kind))}
            wrappers.write_wrapper(tmp_path / kind, kind, compiler, package_parent, variables)
            if kind == "c++":
                variables[wrappers.PCH_VARIABLE] = str(tmp_path / "pch")
                wrappers.write_wrapper(tmp_path / "c++pch", kind, compiler, package_parent, variables)
    return tmp_path


def light_header(tree: Path, kind: str) -> str:
    return str(light.folder_for(tree / light.FOLDER, kind) / light.HEADER)


def compile_cuda(tree: Path, source_text: str, output: str = "cuda.o", wrapper: bool = True):
    """Compile a .cu file as torch's ninja file does (its headers as system headers), with a dependency list."""
    source = tree / f"{output}.cu"
    source.write_text(source_text)
    command = [str(tree / "nvcc") if wrapper else NVCC, "-isystem", str(tree / "include"),
               "--generate-dependencies-with-compile", "--dependency-output", str(tree / f"{output}.d"),
               "-c", str(source), "-o", str(tree / output)]
    return subprocess.run(command, capture_output=True, text=True)


def headers_read(tree: Path, output: str = "cuda.o") -> str:
    return (tree / f"{output}.d").read_text()


@needs_nvcc
def test_a_file_that_needs_only_torch_types_is_compiled_with_the_light_header(tree):
    completed = compile_cuda(tree, "#include <torch/extension.h>\n" + KERNEL + "int f() { return tensor_basics(); }\n")
    assert completed.returncode == 0, completed.stderr
    read = headers_read(tree)
    assert light_header(tree, "nvcc") in read and str(tree / "include" / "torch" / "extension.h") not in read
    assert "kbench:" not in completed.stderr


@needs_nvcc
def test_a_file_that_needs_more_is_compiled_with_torch_s_own_header_and_says_so(tree):
    completed = compile_cuda(tree, "#include <torch/extension.h>\n" + KERNEL + "int f() { return everything(); }\n")
    assert completed.returncode == 0, completed.stderr
    read = headers_read(tree)
    assert str(tree / "include" / "torch" / "extension.h") in read and light_header(tree, "nvcc") not in read
    assert "uses more of torch than torch/types.h" in completed.stderr
    assert "error" not in completed.stderr  # the light compile's complaints are not shown


@needs_nvcc
def test_a_cuda_file_s_light_header_leaves_out_the_python_bindings(tree):
    completed = compile_cuda(tree, "#include <torch/extension.h>\n" + KERNEL + "int f() { return bind_it(1); }\n")
    assert completed.returncode == 0, completed.stderr
    assert light_header(tree, "nvcc") not in headers_read(tree)
    assert "uses more of torch than torch/types.h:" in completed.stderr


@needs_nvcc
def test_a_file_that_fails_either_way_shows_one_compile_s_errors(tree):
    completed = compile_cuda(tree, "#include <torch/extension.h>\nint f() { return missing_name(); }\n")
    assert completed.returncode != 0
    assert completed.stderr.count("error detected") == 1, completed.stderr


@needs_nvcc
def test_the_light_compile_writes_the_code_torch_s_compile_writes(tree):
    source = "#include <torch/extension.h>\n" + KERNEL + "int f() { return tensor_basics(); }\n"
    assert compile_cuda(tree, source, "light.o").returncode == 0
    assert compile_cuda(tree, source, "plain.o", wrapper=False).returncode == 0
    assert light_header(tree, "nvcc") in headers_read(tree, "light.o")
    assert disassembly(tree / "light.o") == disassembly(tree / "plain.o")


@pytest.mark.parametrize("kind, suffix, source_text", [
    ("nvcc", ".cu", "int f() { return 3; }\n"), ("nvcc", ".cu", '#include "cuda_runtime.h"\n' + KERNEL),
    ("c++", ".cpp", "#include <vector>\nint f() { return 3; }\n")])
def test_a_file_without_torch_s_header_is_compiled_once_as_it_is(tree, kind, suffix, source_text):
    source = tree / f"plain{suffix}"
    source.write_text(source_text)
    arguments = ["-c", str(source), "-o", str(tree / "plain.o")]
    assert not light.compiled_light(kind, "false", arguments, light.folder_for(tree / light.FOLDER, kind))
    assert not (tree / "plain.o").exists()


def compile_cpp(tree: Path, source_text: str, output: str = "main.o", wrapper: str | None = "c++"):
    """Compile a C++ file as torch's ninja file does, with a dependency list, through `wrapper` (None: g++ itself)."""
    source = tree / f"{output}.cpp"
    source.write_text(source_text)
    command = [str(tree / wrapper) if wrapper else CXX, "-MMD", "-MF", str(tree / f"{output}.d"), "-H",
               "-isystem", str(tree / "include"), "-fPIC", "-c", str(source), "-o", str(tree / output)]
    return subprocess.run(command, capture_output=True, text=True)


def disassembly(path: Path) -> list[str]:
    return subprocess.run(["objdump", "-d", str(path)], capture_output=True, text=True,
                          check=True).stdout.splitlines()[2:]


@needs_cxx
def test_a_cpp_file_that_needs_only_types_and_bindings_is_compiled_light_with_the_header_precompiled(tree):
    completed = compile_cpp(tree, BINDINGS_FILE, "light.o")
    assert completed.returncode == 0, completed.stderr
    read = headers_read(tree, "light.o")
    assert light_header(tree, "c++") in read and str(tree / "include" / "torch" / "extension.h") not in read
    assert "kbench:" not in completed.stderr
    precompiled = compile_cpp(tree, BINDINGS_FILE, "precompiled.o", wrapper="c++pch")
    assert precompiled.returncode == 0, precompiled.stderr
    built = list((tree / "pch").glob(f"*/{pch.PRECOMPILED}"))
    assert len(built) == 1 and precompiled.stderr.startswith(f"! {built[0]}")  # "!": g++ loaded it
    assert "kbench:" not in precompiled.stderr
    assert compile_cpp(tree, BINDINGS_FILE, "plain.o", wrapper=None).returncode == 0
    assert disassembly(tree / "light.o") == disassembly(tree / "plain.o") == disassembly(tree / "precompiled.o")


@needs_cxx
@pytest.mark.parametrize("wrapper", ["c++", "c++pch"])
def test_a_cpp_file_that_needs_more_is_compiled_with_torch_s_own_header_and_says_so(tree, wrapper):
    completed = compile_cpp(tree, BINDINGS_FILE + "int g() { return everything(); }\n", wrapper=wrapper)
    assert completed.returncode == 0, completed.stderr
    read = completed.stderr  # -H: the headers the shown compile read (-MMD leaves out system headers)
    assert light_header(tree, "c++") not in read
    if wrapper == "c++":
        assert f". {tree / 'include' / 'torch' / 'extension.h'}" in read
    else:  # torch's whole header, precompiled by the second compile (nothing confines this test's wrapper)
        assert len(list((tree / "pch").glob(f"*/{pch.PRECOMPILED}"))) == 2 and "\n! " in read
    assert "uses more of torch than torch/types.h and its Python bindings" in completed.stderr
    assert "error" not in completed.stderr


@needs_nvcc
def test_the_judge_s_wrappers_carry_the_light_headers_dated_as_torch_s(tmp_path, monkeypatch):
    """compiler_wrappers writes each compiler's light header beside the wrappers, which name them."""
    monkeypatch.setenv("PYTORCH_NVCC", NVCC)
    environment = wrappers.compiler_wrappers(tmp_path / "compilers", tmp_path / "pch")
    from kbench.extensions import import_extension_builder
    torch_header = Path(import_extension_builder().include_paths()[0]) / light.HEADER
    for kind, wrapper in (("nvcc", Path(environment["PYTORCH_NVCC"])), ("c++", Path(environment["CXX"]))):
        folder = light.folder_for(wrapper.parent / light.FOLDER, kind)
        header = folder / light.HEADER
        assert header.read_text() == light.light_text(kind)
        assert f"{wrappers.LIGHT_VARIABLE}={folder}" in wrapper.read_text()
        assert header.stat().st_mtime_ns == torch_header.stat().st_mtime_ns


@needs_cxx
def test_an_optimised_cpp_compile_reads_torch_s_own_header(tree):
    """From -O1 up g++ weighs the whole translation unit: the light header could change the code it writes."""
    source = tree / "optimised.cpp"
    source.write_text(BINDINGS_FILE)
    command = [str(tree / "c++"), "-H", "-isystem", str(tree / "include"), "-fPIC", "-O2", "-c", str(source),
               "-o", str(tree / "optimised.o")]
    completed = subprocess.run(command, capture_output=True, text=True)
    assert completed.returncode == 0, completed.stderr
    assert f". {tree / 'include' / 'torch' / 'extension.h'}" in completed.stderr
    assert light_header(tree, "c++") not in completed.stderr and "kbench:" not in completed.stderr


@needs_nvcc
def test_an_optimised_cuda_compile_reads_torch_s_own_header(tree):
    source = tree / "optimised.cu"
    source.write_text("#include <torch/extension.h>\n" + KERNEL + "int f() { return tensor_basics(); }\n")
    command = [str(tree / "nvcc"), "-isystem", str(tree / "include"), "-O3", "--generate-dependencies-with-compile",
               "--dependency-output", str(tree / "optimised.d"), "-c", str(source), "-o", str(tree / "optimised.o")]
    completed = subprocess.run(command, capture_output=True, text=True)
    assert completed.returncode == 0, completed.stderr
    read = (tree / "optimised.d").read_text()
    assert str(tree / "include" / "torch" / "extension.h") in read and light_header(tree, "nvcc") not in read


@pytest.mark.parametrize("kind, arguments, optimised", [
    ("c++", [], False), ("c++", ["-O3"], True), ("c++", ["-O3", "-O0"], False), ("c++", ["-O0", "-O2"], True),
    ("c++", ["-Os"], True), ("c++", ["-O"], True), ("nvcc", [], False), ("nvcc", ["-O3"], True), ("nvcc", ["-O0"], False),
    ("nvcc", ["-Xcompiler", "-O2"], True), ("nvcc", ["--compiler-options", "'-fPIC'"], False),
    ("nvcc", ["--compiler-options", "'-fPIC -O2'"], True), ("nvcc", ["-Xcompiler=-fPIC,-O3"], True),
    ("nvcc", ["--optimize", "2"], True), ("nvcc", ["--optimize=0"], False), ("nvcc", ["--use_fast_math"], False)])
def test_which_compiles_optimise_host_code(kind, arguments, optimised):
    assert light.optimises_host_code(kind, ["-c", "x.cu", *arguments]) is optimised
