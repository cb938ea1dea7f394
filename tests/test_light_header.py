"""The light torch/extension.h for CUDA files (kbench/extensions/light.py), through kbench's real nvcc wrapper
and the real nvcc, on a small stand-in for torch's include tree."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from kbench.extensions import light, slots

NVCC = shutil.which("nvcc")
pytestmark = pytest.mark.skipif(NVCC is None, reason="needs nvcc")

# torch/extension.h's stand-in: types.h and more, which a light compile does not see
FULL = "#pragma once\n#include <torch/types.h>\ninline int everything() { return 2; }\n"
TYPES = "#pragma once\ninline int tensor_basics() { return 1; }\n"
KERNEL = "__global__ void scale(float* x, float by) { x[threadIdx.x] *= by; }\n"


@pytest.fixture
def tree(tmp_path):
    """The stand-in include tree, the judge's light header and an nvcc wrapper that knows it."""
    include = tmp_path / "include" / "torch"
    include.mkdir(parents=True)
    (include / "extension.h").write_text(FULL)
    (include / "types.h").write_text(TYPES)
    light.write_light_header(tmp_path / "light", include / "extension.h")
    package_parent = str(Path(light.__file__).resolve().parents[2])
    slots.write_wrapper(tmp_path / "nvcc", "nvcc", NVCC, package_parent,
                        {slots.LIGHT_VARIABLE: str(tmp_path / light.FOLDER)})
    return tmp_path


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


def test_a_file_that_needs_only_torch_types_is_compiled_with_the_light_header(tree):
    completed = compile_cuda(tree, "#include <torch/extension.h>\n" + KERNEL + "int f() { return tensor_basics(); }\n")
    assert completed.returncode == 0, completed.stderr
    read = headers_read(tree)
    assert str(tree / "light" / light.HEADER) in read and str(tree / "include" / "torch" / "extension.h") not in read
    assert "kbench:" not in completed.stderr


def test_a_file_that_needs_more_is_compiled_with_torch_s_own_header_and_says_so(tree):
    completed = compile_cuda(tree, "#include <torch/extension.h>\n" + KERNEL + "int f() { return everything(); }\n")
    assert completed.returncode == 0, completed.stderr
    read = headers_read(tree)
    assert str(tree / "include" / "torch" / "extension.h") in read and str(tree / "light" / light.HEADER) not in read
    assert "uses more of torch than torch/types.h" in completed.stderr
    assert "error" not in completed.stderr  # the light compile's complaints are not shown


def test_a_file_that_fails_either_way_shows_one_compile_s_errors(tree):
    completed = compile_cuda(tree, "#include <torch/extension.h>\nint f() { return missing_name(); }\n")
    assert completed.returncode != 0
    assert completed.stderr.count("error detected") == 1, completed.stderr


def test_the_light_compile_writes_the_code_torch_s_compile_writes(tree):
    source = "#include <torch/extension.h>\n" + KERNEL + "int f() { return tensor_basics(); }\n"
    assert compile_cuda(tree, source, "light.o").returncode == 0
    assert compile_cuda(tree, source, "plain.o", wrapper=False).returncode == 0
    assert str(tree / "light" / light.HEADER) in headers_read(tree, "light.o")
    listings = [subprocess.run(["objdump", "-d", str(tree / name)], capture_output=True, text=True,
                               check=True).stdout.splitlines()[2:] for name in ("light.o", "plain.o")]
    assert listings[0] == listings[1]


@pytest.mark.parametrize("source_text", ["int f() { return 3; }\n", '#include "cuda_runtime.h"\n' + KERNEL])
def test_a_file_without_torch_s_header_is_compiled_once_as_it_is(tree, source_text):
    source = tree / "plain.cu"
    source.write_text(source_text)
    arguments = ["-c", str(source), "-o", str(tree / "plain.o")]
    assert not light.compiled_light(NVCC, arguments, tree / "light")
    assert not (tree / "plain.o").exists()


def test_the_judge_s_wrappers_carry_the_light_header_dated_as_torch_s(tmp_path, monkeypatch):
    """compiler_wrappers writes the light header beside the nvcc wrapper, which names it."""
    monkeypatch.setenv("PYTORCH_NVCC", NVCC)
    environment = slots.compiler_wrappers(tmp_path / "compilers", tmp_path / "pch")
    wrapper = Path(environment["PYTORCH_NVCC"])
    header = wrapper.parent / "light" / light.HEADER
    assert header.read_text() == light.LIGHT_TEXT
    assert f"{slots.LIGHT_VARIABLE}={wrapper.parent / 'light'}" in wrapper.read_text()
    from kbench.extensions import import_extension_builder
    torch_header = Path(import_extension_builder().include_paths()[0]) / light.HEADER
    assert header.stat().st_mtime_ns == torch_header.stat().st_mtime_ns
