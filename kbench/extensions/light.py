"""A cut `torch/extension.h`, for a CUDA file that needs only `torch/types.h` and a C++ file that needs only that and
the Python bindings.

`torch/extension.h` is all of libtorch's C++ API and pybind11, and every generated file includes it: reading it is
most of a build. nvcc reads a .cu file's headers three times (cicc for the device code, cudafe++ and the host
compiler for the host code), and a device file rarely uses more than `torch/types.h` (tensors, ATen's ops,
TORCH_CHECK, AT_DISPATCH), which torch's own documentation names for CUDA files. The C++ file that load_inline
writes (the candidate's `cpp_sources` and the `PYBIND11_MODULE` that binds its functions) mostly needs the same
plus torch's pybind11 casters (`torch/csrc/utils/pybind.h`) and `torch::wrap_pybind_function`.

So the compiler wrappers (wrappers.py) first compile a file that includes `torch/extension.h` with a folder ahead on
the include path whose `torch/extension.h` includes those headers alone (for C++ files, precompiled: pch.py).
Everything the file uses is then declared by the same headers of torch as before, and the code the compiler
writes for it is the same (bench/build_stages.py compares each kernel's SASS and each host function both ways;
tests/test_light_header.py the objects of small files). A file that uses more fails that compile; it is then
compiled as torch starts it, and only that compile's output is shown. The one way the two can part: a file whose
own names clash with names only the whole header declares (say, a global `save` called unqualified under `using
namespace torch`) compiles light where torch's own compile would fail; kbench judges what it built.

Only a compile that does not optimise host code (no -O level but -O0: torch's default for both compilers) is
tried light. From -O1 up, g++ weighs the whole translation unit when it inlines and lays out code, so the same
function compiles differently beside a smaller header (a C++ candidate's own function at -O3 did: the same
instructions, laid out apart), and host code may be the candidate's kernel.

The folders are written by the judge beside the wrappers (wrappers.compiler_wrappers), where no runner may write.
This module imports no torch: every compiler start runs it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Callable

from kbench.extensions import pch

HEADER = "torch/extension.h"
FOLDER = "light"  # beside the wrappers: a folder per compiler (nvcc, c++), each the include folder of its header
# What each compiler's light header includes, and how its note names it.
INCLUDES = {"nvcc": ["torch/types.h"],
            "c++": ["torch/types.h", "torch/csrc/utils/pybind.h", "torch/csrc/Exceptions.h"]}
NAMED = {"nvcc": "torch/types.h", "c++": "torch/types.h and its Python bindings"}
SOURCE_SUFFIXES = {"nvcc": (".cu",), "c++": pch.SOURCE_SUFFIXES}
_INCLUDES_HEADER = re.compile(rb'^[ \t]*#[ \t]*include[ \t]*[<"]torch/extension\.h[>"]', re.MULTILINE)


def light_text(kind: str) -> str:
    return (f"#pragma once\n// kbench (kbench/extensions/light.py): torch/extension.h for a file that needs\n"
            f"// {NAMED[kind]} alone. A file that needs more is compiled again, with torch's own.\n"
            + "".join(f"#include <{header}>\n" for header in INCLUDES[kind]))


def folder_for(light_root: Path, kind: str) -> Path:
    """The include folder of `kind`'s light header (nvcc or c++) under the wrappers' light folder."""
    return light_root / kind


def write_light_headers(light_root: Path, torch_header: Path | None) -> None:
    """Each compiler's light `torch/extension.h` under `light_root`, dated as torch's own (`torch_header`): a
    compile's dependency list may name it, and ninja rebuilds an object whose inputs are newer than it."""
    for kind in INCLUDES:
        _write(folder_for(light_root, kind) / HEADER, light_text(kind), torch_header)


def _write(path: Path, text: str, torch_header: Path | None) -> None:
    if not (path.is_file() and path.read_text() == text):
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".extension.h.{os.getpid()}")
        temporary.write_text(text)
        os.replace(temporary, path)  # whole or absent, even with judges writing it at once
    if torch_header is not None and torch_header.is_file():
        times = torch_header.stat()
        os.utime(path, ns=(times.st_atime_ns, times.st_mtime_ns))


def compiled_light(kind: str, compiler: str, arguments: list[str], folder: Path,
                   prepare: Callable[[list[str]], list[str]] = lambda arguments: arguments) -> bool:
    """Compile with `kind`'s light header (in `folder`) first, its command passed through `prepare` (the
    precompiled header's, for C++); True when that compile succeeded (its output shown), False when it does not
    apply or failed (its output dropped: the caller compiles as torch would)."""
    source = applies(kind, arguments, folder)
    if source is None:
        return False
    completed = subprocess.run([compiler, *prepare(["-I", str(folder), *arguments])], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    if completed.returncode != 0:
        print(f"kbench: {source.name} uses more of torch than {NAMED[kind]}: compiling it with {HEADER}",
              file=sys.stderr, flush=True)
        return False
    sys.stdout.buffer.write(completed.stdout)
    sys.stderr.buffer.write(completed.stderr)
    return True


def applies(kind: str, arguments: list[str], folder: Path) -> Path | None:
    """The source a `kind` compile would first compile with the light header in `folder`; None when it would not."""
    source = pch.compiled_source(arguments, SOURCE_SUFFIXES[kind])
    if source is None or optimises_host_code(kind, arguments) or not (folder / HEADER).is_file() \
            or not _includes_header(source):
        return None
    return source


def optimises_host_code(kind: str, arguments: list[str]) -> bool:
    """Whether the command compiles host code at an -O level other than 0 (the last one given wins): g++'s own
    flags; nvcc's -O/--optimize (its host code's level) and the flags it passes the host compiler
    (-Xcompiler/--compiler-options)."""
    levels = []
    words = iter(arguments)
    for word in words:
        if kind == "nvcc" and word in ("-Xcompiler", "--compiler-options"):
            levels += _levels_in(next(words, ""))
        elif kind == "nvcc" and word.startswith(("-Xcompiler=", "--compiler-options=")):
            levels += _levels_in(word.split("=", 1)[1])
        elif kind == "nvcc" and word == "--optimize":
            levels.append("-O" + next(words, ""))
        elif kind == "nvcc" and word.startswith("--optimize="):
            levels.append("-O" + word.split("=", 1)[1])
        elif word.startswith("-O"):
            levels.append(word)
    return bool(levels) and levels[-1] != "-O0"


def _levels_in(host_flags: str) -> list[str]:
    """The -O flags in what nvcc passes its host compiler (words separated by commas or spaces, maybe quoted)."""
    return re.findall(r"(?:^|[\s,'\"])(-O\w*)", host_flags)


def _includes_header(source: Path) -> bool:
    try:
        return bool(_INCLUDES_HEADER.search(source.read_bytes()))
    except OSError:
        return False
