"""A CUDA file's `torch/extension.h`, cut to `torch/types.h` where the file needs no more.

nvcc reads a .cu file's headers three times (cicc for the device code, cudafe++ and the host compiler for the
host code), and `torch/extension.h` is all of libtorch's C++ API and pybind11: most of a generated CUDA file's
build. A device file rarely uses more than `torch/types.h` (tensors, ATen's ops, TORCH_CHECK, AT_DISPATCH),
which torch's own documentation names for CUDA files; the Python bindings that load_inline writes are in the
C++ file, which keeps the whole header (precompiled: pch.py).

So the nvcc wrapper (slots.py) first compiles a .cu file that includes `torch/extension.h` with a folder ahead
on the include path whose `torch/extension.h` includes `torch/types.h` alone. Everything the file uses is then
declared by the same headers of torch as before, and the code nvcc writes for it is the same
(bench/build_stages.py compares each kernel's SASS and each host function both ways). A file that uses more
fails that compile; it is then compiled as torch starts it, and only that compile's output is shown. The one
way the two can part: a file whose own names clash with names only the whole header declares (say, a global
`save` called unqualified under `using namespace torch`) compiles light where torch's own compile would fail;
kbench judges what it built.

The folder is written by the judge beside the wrappers (slots.compiler_wrappers), where no runner may write.
This module imports no torch: every compiler start runs it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

HEADER = "torch/extension.h"
FOLDER = "light"  # beside the wrappers: the light header's include folder
LIGHT_TEXT = ("#pragma once\n"
              "// kbench (kbench/extensions/light.py): torch/extension.h for a CUDA file that needs torch/types.h\n"
              "// alone. A file that needs more is compiled again, with torch's own.\n"
              "#include <torch/types.h>\n")
_INCLUDES_HEADER = re.compile(rb'^[ \t]*#[ \t]*include[ \t]*[<"]torch/extension\.h[>"]', re.MULTILINE)


def write_light_header(folder: Path, torch_header: Path | None) -> None:
    """The light `torch/extension.h` under `folder`, dated as torch's own (`torch_header`): a compile's
    dependency list may name it, and ninja rebuilds an object whose inputs are newer than it."""
    path = folder / HEADER
    if not (path.is_file() and path.read_text() == LIGHT_TEXT):
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".extension.h.{os.getpid()}")
        temporary.write_text(LIGHT_TEXT)
        os.replace(temporary, path)  # whole or absent, even with judges writing it at once
    if torch_header is not None and torch_header.is_file():
        times = torch_header.stat()
        os.utime(path, ns=(times.st_atime_ns, times.st_mtime_ns))


def compiled_light(compiler: str, arguments: list[str], folder: Path) -> bool:
    """Compile with the light header first; True when that compile succeeded (its output shown), False when
    it does not apply or failed (its output dropped: the caller compiles as torch would)."""
    source = _cuda_source(arguments)
    if source is None or not (folder / HEADER).is_file() or not _includes_header(source):
        return False
    completed = subprocess.run([compiler, "-I", str(folder), *arguments], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    if completed.returncode != 0:
        print(f"kbench: {source.name} uses more of torch than torch/types.h: compiling it with {HEADER}",
              file=sys.stderr, flush=True)
        return False
    sys.stdout.buffer.write(completed.stdout)
    sys.stderr.buffer.write(completed.stderr)
    return True


def _cuda_source(arguments: list[str]) -> Path | None:
    """The one .cu file a compile-only (`-c`) nvcc command compiles; None for anything else."""
    if "-c" not in arguments:
        return None
    sources = [Path(argument) for argument in arguments if argument.endswith(".cu") and Path(argument).is_file()]
    return sources[0] if len(sources) == 1 else None


def _includes_header(source: Path) -> bool:
    try:
        return bool(_INCLUDES_HEADER.search(source.read_bytes()))
    except OSError:
        return False
