"""Compiler wrappers: the scripts through which torch starts every compiler of a build, so that a sweep's
compiles wait for a compile slot (slots.py), and a compile gets the light torch header (light.py) or torch's
precompiled headers (pch.py).

Every runner points torch at wrapper scripts for the host compiler (CXX) and nvcc (PYTORCH_NVCC), torch's own
hooks for compiler wrappers such as ccache (compiler_wrappers: the judge writes them). In a sweep's build worker, a
wrapper asked to compile (`-c`) connects to the run's slot server, waits for its turn, and then execs the real
compiler with the same arguments, keeping the connection open: the slot is freed when the compiler and everything
it started have exited, however they end. Anything else (linking, version queries), and any compile outside a build
phase, runs at once. The compiled code is what torch alone would build; only when is decided here.

This module imports no torch: every compiler start runs it.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import socket
import sys
from pathlib import Path

from kbench.extensions import light, pch
from kbench.extensions.slots import SLOTS_VARIABLE

PCH_VARIABLE = "KBENCH_PCH_ROOT"         # in the c++ wrapper: where precompiled torch headers are kept (pch.py)
LIGHT_VARIABLE = "KBENCH_LIGHT_HEADER"   # in a wrapper: the folder of its light torch/extension.h (light.py)


def install_compiler_wrappers(folder: Path, headers: Path) -> None:
    """Have torch start this process's compilers through kbench's wrappers (compiler_wrappers): kbench's own
    primer.py, and tests that build in-process."""
    os.environ.update(compiler_wrappers(folder, headers))


def compiler_wrappers(folder: Path, headers: Path) -> dict[str, str]:
    """Write the wrappers in `folder` (of the build cache) through which torch starts its compilers, each with its
    light torch/extension.h beside it (light.py), the c++ one with torch's headers precompiled under `headers`
    (pch.py; the runner may not write there: a compile finds them or compiles without); the
    environment that points torch at them ({} where they cannot be written: the compilers then run as torch
    starts them). The judge writes them and hands the environment to the candidate's runner, which then only
    sets it.

    Every runner does, builds and evaluations alike, with the same wrapper paths, so that an extension
    built in a sweep's build phase is up to date for the evaluation that loads it (ninja rebuilds when a
    command line changes). The wrapper folder is named by what the wrappers run (this Python, kbench, the
    real compilers), so changing a real compiler still rebuilds. It lies outside the folders a confined
    runner may write: no candidate can change what every later build runs. Outside a sweep's build phase
    there is no slot server and a wrapper runs its compiler at once.
    """
    if os.name != "posix":
        return {}  # the wrappers are sh scripts
    from kbench.extensions import import_extension_builder  # only here: the wrappers must not load torch

    builder = import_extension_builder()
    cuda_home = builder.CUDA_HOME

    real = {"c++": os.environ.get("CXX", "c++")}
    nvcc = os.environ.get("PYTORCH_NVCC") or (os.path.join(cuda_home, "bin", "nvcc") if cuda_home else "")
    if nvcc:
        real["nvcc"] = nvcc
    package_parent = str(Path(__file__).resolve().parents[2])
    digest = hashlib.sha256(repr((sys.executable, package_parent, sorted(real.items()))).encode()).hexdigest()[:12]
    wrappers = folder / digest
    light_root = wrappers / light.FOLDER
    variables = {kind: {LIGHT_VARIABLE: str(light.folder_for(light_root, kind))} for kind in real}
    variables["c++"][PCH_VARIABLE] = str(headers)
    try:
        torch_headers = [Path(include) / light.HEADER for include in builder.include_paths()]
        light.write_light_headers(light_root, next((path for path in torch_headers if path.is_file()), None))
        for kind, compiler in real.items():
            write_wrapper(wrappers / kind, kind, compiler, package_parent, variables[kind])
    except OSError:
        return {}  # an unwritable cache: compilers run as torch starts them (a build in it fails on its own)
    return {"CXX": str(wrappers / "c++"), **({"PYTORCH_NVCC": str(wrappers / "nvcc")} if "nvcc" in real else {})}


def write_wrapper(path: Path, kind: str, compiler: str, package_parent: str,
                  variables: dict[str, str] | None = None) -> None:
    """A script that runs `compiler` (a `kind` compiler: c++ or nvcc) when a slot is free, with `variables`
    set (where the precompiled headers or the light header are)."""
    settings = "".join(f"{name}={shlex.quote(value)} " for name, value in (variables or {}).items())
    text = (f'#!/bin/sh\n# kbench: run {compiler} when a compile slot is free (kbench/extensions/wrappers.py)\n'
            f'case " $* " in *" -c "*) ;; *) exec {shlex.quote(compiler)} "$@" ;; esac  # no compile: no Python\n'
            f'{settings}PYTHONPATH={shlex.quote(package_parent)}${{PYTHONPATH:+:$PYTHONPATH}} '
            f'exec {shlex.quote(sys.executable)} -m kbench.extensions.wrappers {kind} {shlex.quote(compiler)} "$@"\n')
    if path.is_file() and path.read_text() == text:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    temporary.write_text(text)
    temporary.chmod(0o755)
    os.replace(temporary, path)  # whole or absent, even with workers writing it at once


def run_compiler(kind: str, compiler: str, arguments: list[str]) -> None:
    """The wrappers' entry point: in a build worker of a sweep, a compile (`-c`) waits for a slot; then a file
    that includes torch/extension.h is first compiled with the light header (light.py); where that does not
    apply or fails, this process becomes the real compiler, with the same arguments. A C++ compile of a file
    that starts with torch's header gets that header precompiled (pch.py), light or whole."""
    if "-c" in arguments and SLOTS_VARIABLE in os.environ:
        slot = _wait_for_slot(kind, kind == "nvcc" or _reads_all_of_torch(compiler, arguments))
        if slot is not None:
            os.set_inheritable(slot.fileno(), True)  # held by the compiler and its children until they exit
    precompiled = _with_precompiled_header(compiler) if "-c" in arguments else (lambda arguments: arguments)
    if "-c" in arguments and os.environ.get(LIGHT_VARIABLE):
        if light.compiled_light(kind, compiler, arguments, Path(os.environ[LIGHT_VARIABLE]), precompiled):
            sys.exit(0)
    arguments = precompiled(arguments)
    os.execvp(compiler, [compiler, *arguments])


def _with_precompiled_header(compiler: str):
    """What puts a precompiled torch header on a C++ compile's include path (pch.py), where this wrapper has one."""
    root = os.environ.get(PCH_VARIABLE)
    if not root:
        return lambda arguments: arguments
    return lambda arguments: pch.arguments_with_header(compiler, arguments, Path(root))


def _reads_all_of_torch(compiler: str, arguments: list[str]) -> bool:
    """Whether a C++ compile will parse all of torch/extension.h (not light, no precompiled header for it): as long
    as a device compile's steps, so it is served as early."""
    light_folder = os.environ.get(LIGHT_VARIABLE)
    if light_folder and light.applies("c++", arguments, Path(light_folder)):
        return False
    root = os.environ.get(PCH_VARIABLE)
    return pch.precompiled(compiler, arguments, Path(root) if root else None) is False


def _wait_for_slot(kind: str, long: bool) -> socket.socket | None:
    """Block until the server grants a slot (`long`: served as a long compile); None (compile at once) when there
    is no server to ask."""
    try:
        connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        connection.connect(os.environ[SLOTS_VARIABLE])
        connection.sendall(f"{kind} {'long' if long else 'short'}\n".encode())
        if connection.recv(1) == b"1":
            return connection
    except (OSError, ValueError):
        pass
    return None


if __name__ == "__main__":
    run_compiler(sys.argv[1], sys.argv[2], sys.argv[3:])
