"""torch's headers, precompiled once per compiler and flag set, for every candidate's C++ bindings file.

Most of a C++ extension's host compile is parsing `torch/extension.h`, the same for every candidate. The
compiler wrapper (wrappers.py) hands each C++ compile here first: for a source whose first line includes
`torch/extension.h`, a precompiled header of it is built once for the command's flags and put on the
include path ahead of torch's own headers (with a one-line header beside it that goes on to torch's own).
g++ then loads it instead of parsing, and the object it writes is the one the plain compile writes
(tests/test_pch.py compares the disassembly). Where the c++ wrapper compiles a file with the light
torch/extension.h first on the include path (light.py), that light header is the one precompiled.

Sound by construction: the header is keyed by the compiler binary, the header file and every flag of the
command except the ones g++ ignores for a precompiled header's validity (the object and dependency file
names) and the extension's name, which torch passes as a macro its headers never read. g++ checks the rest
itself: a precompiled header it cannot use (a macro the headers read defined differently, a different
option) is skipped with no error and the compile parses torch's headers as usual.

Never a wait: the first compile that finds no header for its flags builds it (holding an flock, which the
kernel frees if the builder dies) and then uses it; one that finds another compile building it compiles
without. A header that fails to build is remembered and never tried again for those flags.

This module imports no torch: every compiler start runs it.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import subprocess
from pathlib import Path

HEADER = "torch/extension.h"
PRECOMPILED = HEADER + ".gch"  # where g++ looks first when it searches a folder for HEADER
FAILED = "failed.log"  # in a key's folder: its header did not build; compile without
MIN_FREE_BYTES = 4 << 30  # a precompiled torch header is most of a gigabyte
SOURCE_SUFFIXES = (".cpp", ".cc", ".cxx", ".C", ".c++")  # a C++ source
_FIRST_INCLUDE = re.compile(rb'\s*(?:(?://[^\n]*\n|/\*.*?\*/)\s*)*#\s*include\s*[<"]torch/extension\.h[>"]', re.DOTALL)
_NAME_MACRO = "-DTORCH_EXTENSION_NAME="
_OUTPUT_OPTIONS = ("-o", "-MF", "-MT", "-MQ")  # take the next argument: names of files, not meaning


def arguments_with_header(compiler: str, arguments: list[str], root: Path) -> list[str]:
    """`arguments` with the precompiled header's folder first on the include path, building it if no
    compile is building it now; `arguments` unchanged when the compile is not one it serves."""
    served = _served(compiler, arguments)
    if served is None:
        return arguments
    header, key = served
    folder = root / key
    if not (folder / PRECOMPILED).is_file() and not _build(compiler, header, arguments, folder):
        return arguments
    return ["-I", str(folder), *arguments]


def precompiled(compiler: str, arguments: list[str], root: Path | None) -> bool | None:
    """Whether torch's header is precompiled for this compile under `root` (None: the compile does not start with
    torch's header, so none would serve it)."""
    served = _served(compiler, arguments)
    if served is None:
        return None
    return root is not None and (root / served[1] / PRECOMPILED).is_file()


def _served(compiler: str, arguments: list[str]) -> tuple[Path, str] | None:
    """(torch's header as the compile finds it, its precompiled header's key) for a compile whose source starts
    with torch's header; None for any other."""
    source = compiled_source(arguments)
    if source is None or not _includes_torch_first(source):
        return None
    header = _torch_header(arguments)
    return None if header is None else (header, _key(compiler, header, arguments))


def compiled_source(arguments: list[str], suffixes: tuple[str, ...] = SOURCE_SUFFIXES) -> Path | None:
    """The one source (a file named with one of `suffixes`) of a compile-only command (`-c`), or None: a link, a
    query, preprocessing alone, several sources, or a language chosen with -x."""
    if "-c" not in arguments or any(argument.startswith("-x") or argument in ("-E", "-S") for argument in arguments):
        return None
    sources = [argument for argument in _operands(arguments) if argument.endswith(suffixes)]
    return Path(sources[0]) if len(sources) == 1 else None


def _operands(arguments: list[str]) -> list[str]:
    """Arguments that are not options nor the file names options take."""
    operands, skip = [], False
    for argument in arguments:
        if skip:
            skip = False
        elif argument in _OUTPUT_OPTIONS or argument in ("-isystem", "-I", "-include", "-iquote", "-idirafter"):
            skip = True
        elif not argument.startswith("-"):
            operands.append(argument)
    return operands


def _includes_torch_first(source: Path) -> bool:
    """Whether the source's first directive includes torch/extension.h: only then can g++ use the header."""
    try:
        with source.open("rb") as handle:
            return bool(_FIRST_INCLUDE.match(handle.read(1 << 16)))
    except OSError:
        return False


def _torch_header(arguments: list[str]) -> Path | None:
    """torch/extension.h as this command's include path finds it."""
    folders, take = [], False
    for argument in arguments:
        if take:
            folders.append(argument)
            take = False
        elif argument in ("-I", "-isystem"):
            take = True
        elif argument.startswith(("-I", "-isystem")) and argument not in ("-I", "-isystem"):
            folders.append(argument[2:] if argument.startswith("-I") else argument[len("-isystem"):])
    for folder in folders:
        if (Path(folder) / HEADER).is_file():
            return Path(folder) / HEADER
    return None


def _key_flags(arguments: list[str]) -> list[str]:
    """The flags that decide the header: every argument but the source, the output and dependency file
    names and the extension's name."""
    source = str(compiled_source(arguments))
    flags, skip = [], False
    for argument in arguments:
        if skip:
            skip = False
        elif argument in _OUTPUT_OPTIONS:
            skip = True
        elif argument == source or argument == "-c" or argument.startswith(_NAME_MACRO):
            continue
        elif argument.startswith(("-MF", "-o")) or argument in ("-MMD", "-MD"):
            continue
        else:
            flags.append(argument)
    return flags


def _key(compiler: str, header: Path, arguments: list[str]) -> str:
    """A folder name for what the header depends on: the compiler binary, the header file, the flags."""
    identity = []
    for path in (shutil.which(compiler) or compiler, header):
        resolved = os.path.realpath(path)
        try:
            stat = os.stat(resolved)
            identity.append(f"{resolved}:{stat.st_size}:{stat.st_mtime_ns}")
        except OSError:
            identity.append(resolved)
    digest = hashlib.sha256(repr((identity, _key_flags(arguments))).encode()).hexdigest()
    return digest[:20]


def _build(compiler: str, header: Path, arguments: list[str], folder: Path) -> bool:
    """Build the precompiled header into `folder`; False (compile without it) when another compile is
    building it, when it failed before, or when it cannot be built now."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        if (folder / FAILED).exists() or shutil.disk_usage(folder).free < MIN_FREE_BYTES:
            return False
        lock = (folder / "lock").open("w")
    except OSError:
        return False
    with lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False  # being built by another compile: this one does not wait for it
        target = folder / PRECOMPILED
        if target.is_file():
            return True
        target.parent.mkdir(parents=True, exist_ok=True)
        for left in target.parent.glob("*.partial"):  # a builder killed mid-way; the lock is ours now
            left.unlink(missing_ok=True)
        partial = target.with_name(f"extension.h.gch.{os.getpid()}.partial")
        command = [compiler, *_key_flags(arguments), "-x", "c++-header", str(header), "-o", str(partial)]
        completed = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        if completed.returncode != 0:
            partial.unlink(missing_ok=True)
            (folder / FAILED).write_bytes(b" ".join(part.encode() for part in command) + b"\n" + completed.stdout)
            return False
        # A source that includes the header again finds this file beside the precompiled one and reaches
        # torch's own through it; so does a compile for which g++ finds the precompiled header unusable.
        stub = folder / HEADER
        stub.write_text(f"#pragma once\n#include_next <{HEADER}>\n")
        # Dated as torch's header: a compile's dependency list names this file, and ninja would rebuild an
        # object whose input is newer than the object's command (this compile's own, too).
        os.utime(stub, ns=(header.stat().st_atime_ns, header.stat().st_mtime_ns))
        os.replace(partial, target)  # whole or absent for every other compile
        return True
