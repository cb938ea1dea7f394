"""Compile slots: one per core, shared by every build of a sweep, handed out in an order that finishes the
sweep early.

A CUDA extension's build is two compiler processes: its host file (torch's headers) and its device
file, which takes longer (docs/benchmarks.md has measured times). Builds that each run both at once, in
build order, end with a tail: the device files of the last builds start late, and the cores idle while
they finish. So the sweep's builds queue every compiler for a slot, and a long compile (a device file, or a
host file that will parse all of torch's header: optimised, so not light, with no precompiled header) is
served as if its build came `lookahead` places earlier: long compiles start ahead and the short ones fill in
behind them, while the first builds still end first and give the GPUs work early (bench/slot_order_sim.py
compares the orders).

How: every runner points torch at wrapper scripts for the host compiler (CXX) and nvcc (PYTORCH_NVCC),
torch's own hooks for compiler wrappers such as ccache (compiler_wrappers: the judge writes them). In a sweep's build
worker, a wrapper asked to compile (`-c`) connects to the run's slot server, waits for its turn, and
then execs the real compiler with the same arguments, keeping the connection open: the slot is freed
when the compiler and everything it started have exited, however they end. Anything else (linking,
version queries), and any compile outside a build phase, runs at once. The compiled code is what torch
alone would build; only when is decided here.

This module imports no torch: every compiler start runs it.
"""

from __future__ import annotations

import hashlib
import heapq
import itertools
import os
import select
import shlex
import shutil
import socket
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from kbench.extensions import light, pch

SLOTS_VARIABLE = "KBENCH_COMPILE_SLOTS"  # the slot server's socket, in a build worker's environment
RANK_VARIABLE = "KBENCH_BUILD_RANK"      # the build's place in the sweep's build order (0 first)
PCH_VARIABLE = "KBENCH_PCH_ROOT"         # in the c++ wrapper: where precompiled torch headers are kept (pch.py)
LIGHT_VARIABLE = "KBENCH_LIGHT_HEADER"   # in a wrapper: the folder of its light torch/extension.h (light.py)


@dataclass
class Compile:
    """One compiler's turn, in seconds since the slot server started (released: when its wrapper went, after
    running or while still waiting; None before)."""
    rank: int
    kind: str  # "c++" (host) or "nvcc" (device)
    queued_s: float
    granted_s: float | None = None
    released_s: float | None = None


class SlotServer:
    """Hands out `slots` compile slots: lowest key first, where a long compile's key (a device compile, or a host
    compile that parses all of torch's header) is its build's rank minus `lookahead` and a short one's is its rank
    (ties: long compiles first, then first come)."""

    def __init__(self, slots: int, lookahead: int):
        self.slots = slots
        self.lookahead = lookahead
        self.folder = Path(tempfile.mkdtemp(prefix="kbench-slots-"))
        self.address = str(self.folder / "slots.sock")
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(self.address)
        self.listener.listen(1024)
        self.granted = 0  # slots handed out so far
        self.compiles: dict[socket.socket, Compile] = {}  # every request, for benchmarks (history())
        self._started = time.monotonic()
        self._arrivals = itertools.count()
        self._new: set[socket.socket] = set()          # connected, request not read yet
        self._queue: list[tuple] = []                  # heap of (key, device last, arrival, connection)
        self._holding: set[socket.socket] = set()      # granted, compiler running
        self.lock = threading.Lock()
        self._wake_read, self._wake_write = os.pipe()  # close() wakes the server thread through it
        self._closed = False
        threading.Thread(target=self._serve, daemon=True, name="kbench-compile-slots").start()

    def waiting(self) -> int:
        with self.lock:
            return len(self._queue)

    def history(self) -> list[Compile]:
        """Every compile that asked for a slot, in the order they asked."""
        with self.lock:
            return sorted(self.compiles.values(), key=lambda entry: entry.queued_s)

    def waited_s(self, rank: int) -> float:
        """Seconds the build of `rank` has had a compiler waiting for a slot (the union of its compilers'
        waits): time its timeout must not count. A wait ends when it is granted or its wrapper goes."""
        with self.lock:
            now = self._now()
            waits = sorted((entry.queued_s, _first(entry.granted_s, entry.released_s, now))
                           for entry in self.compiles.values() if entry.rank == rank)
        total, reach = 0.0, 0.0
        for start, end in waits:
            start = max(start, reach)
            if end > start:
                total, reach = total + end - start, end
        return total

    def environment(self, rank: int) -> dict:
        return {SLOTS_VARIABLE: self.address, RANK_VARIABLE: str(rank)}

    def _serve(self) -> None:
        while True:
            with self.lock:
                watched = [self._wake_read, self.listener, *self._new, *(entry[3] for entry in self._queue),
                           *self._holding]
            readable, _, _ = select.select(watched, [], [])
            with self.lock:
                if self._closed:
                    # Waiting wrappers see end of file and compile at once; running compilers keep going.
                    for connection in [*self._new, *(entry[3] for entry in self._queue), *self._holding]:
                        connection.close()
                    self.listener.close()
                    os.close(self._wake_read)
                    return
                for connection in readable:
                    if connection is self.listener:
                        self._new.add(self.listener.accept()[0])
                    else:
                        self._on_readable(connection)
                self._grant()

    def _on_readable(self, connection: socket.socket) -> None:
        try:
            data = connection.recv(64)
        except OSError:
            data = b""
        if connection in self._new and data:
            self._new.discard(connection)
            rank, kind, ahead = _request(data)
            key = rank - (self.lookahead if ahead else 0)
            heapq.heappush(self._queue, (key, not ahead, next(self._arrivals), connection))
            self.compiles[connection] = Compile(rank, kind, self._now())
            return
        # End of file: a compiler ended (its slot is free) or a waiting wrapper was killed.
        self._new.discard(connection)
        if connection in self.compiles:
            self.compiles[connection].released_s = self._now()
        self._holding.discard(connection)
        self._queue = [entry for entry in self._queue if entry[3] is not connection]
        heapq.heapify(self._queue)
        connection.close()

    def _grant(self) -> None:
        while self._queue and len(self._holding) < self.slots:
            connection = heapq.heappop(self._queue)[3]
            try:
                connection.sendall(b"1")
            except OSError:
                connection.close()
                continue
            self._holding.add(connection)
            self.compiles[connection].granted_s = self._now()
            self.granted += 1

    def _now(self) -> float:
        # Unrounded: a release and the next grant fall in the same millisecond, and their order is the record.
        return time.monotonic() - self._started

    def close(self) -> None:
        with self.lock:
            self._closed = True
        os.write(self._wake_write, b"x")
        os.close(self._wake_write)
        shutil.rmtree(self.folder, ignore_errors=True)


def _request(data: bytes) -> tuple[int, str, bool]:
    """(rank, kind, long) of a wrapper's request ("RANK KIND long|short"). A runner can reach the socket: what it
    sends only places its own compiles, last when it cannot be read."""
    words = data.decode(errors="replace").split()
    rank = int(words[0]) if words and words[0].isascii() and words[0].isdigit() else _LAST_RANK
    kind = "nvcc" if words[1:2] == ["nvcc"] else "c++"
    return min(rank, _LAST_RANK), kind, words[2:3] == ["long"]


_LAST_RANK = 1 << 30  # after every build's: an unreadable request's, or a rank too large to be one


def _first(*values: float | None) -> float:
    return next(value for value in values if value is not None)


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
    text = (f'#!/bin/sh\n# kbench: run {compiler} when a compile slot is free (kbench/extensions/slots.py)\n'
            f'case " $* " in *" -c "*) ;; *) exec {shlex.quote(compiler)} "$@" ;; esac  # no compile: no Python\n'
            f'{settings}PYTHONPATH={shlex.quote(package_parent)}${{PYTHONPATH:+:$PYTHONPATH}} '
            f'exec {shlex.quote(sys.executable)} -m kbench.extensions.slots {kind} {shlex.quote(compiler)} "$@"\n')
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
        rank = int(os.environ.get(RANK_VARIABLE, "0"))
        connection.sendall(f"{rank} {kind} {'long' if long else 'short'}\n".encode())
        if connection.recv(1) == b"1":
            return connection
    except (OSError, ValueError):
        pass
    return None


if __name__ == "__main__":
    run_compiler(sys.argv[1], sys.argv[2], sys.argv[3:])
