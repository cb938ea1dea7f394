"""Compile slots: one per core, shared by every build of a sweep, handed out in an order that finishes the
sweep early.

A CUDA extension's build is two compiler processes: its host file (20-40 s on torch's headers, H200
host) and its device file (50-75 s). Builds that each run both at once, in build order, end with a
tail: the device files of the last builds start late, and the cores idle while they finish. So the
sweep's builds queue every compiler for a slot, and a device compile is served as if its build came
`lookahead` places earlier: long compiles start ahead and the short ones fill in behind them, while the
first builds still end first and give the GPUs work early. (A simulation of 23-400 builds on 16
cores put this order's wall time 5-10% above the CPU floor where plain build order is 6-29% above.)

How: in a build worker, `use_compile_slots()` points torch at wrapper scripts for the host compiler
(CXX) and nvcc (PYTORCH_NVCC), torch's own hooks for compiler wrappers such as ccache. A wrapper asked to
compile (`-c`) connects to kbench's slot server, waits for its turn, and then execs the real compiler
with the same arguments, keeping the connection open: the slot is freed when the compiler and
everything it started have exited, however they end. Anything else (linking, version queries) runs at
once. The compiled code is what torch alone would build; only when is decided here.

This module imports no torch: every compiler start runs it.
"""

from __future__ import annotations

import atexit
import heapq
import itertools
import os
import select
import shutil
import socket
import sys
import tempfile
import threading
from pathlib import Path

SLOTS_VARIABLE = "KBENCH_COMPILE_SLOTS"  # the slot server's socket, in a build worker's environment
RANK_VARIABLE = "KBENCH_BUILD_RANK"      # the build's place in the sweep's build order (0 first)
REAL_COMPILERS = {"c++": "KBENCH_REAL_CXX", "nvcc": "KBENCH_REAL_NVCC"}  # wrapper name -> variable


class SlotServer:
    """Hands out `slots` compile slots: lowest key first, where a device compile's key is its build's rank
    minus `lookahead` and a host compile's is its rank (ties: device compiles first, then first come)."""

    def __init__(self, slots: int, lookahead: int):
        self.slots = slots
        self.lookahead = lookahead
        self.folder = Path(tempfile.mkdtemp(prefix="kbench-slots-"))
        self.address = str(self.folder / "slots.sock")
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(self.address)
        self.listener.listen(1024)
        self.granted = 0  # slots handed out so far
        self._write_wrappers()
        self._arrivals = itertools.count()
        self._new: set[socket.socket] = set()          # connected, request not read yet
        self._queue: list[tuple] = []                  # heap of (key, device last, arrival, connection)
        self._holding: set[socket.socket] = set()      # granted, compiler running
        self.lock = threading.Lock()
        threading.Thread(target=self._serve, daemon=True, name="kbench-compile-slots").start()

    def waiting(self) -> int:
        with self.lock:
            return len(self._queue)

    def environment(self, rank: int) -> dict:
        return {SLOTS_VARIABLE: self.address, RANK_VARIABLE: str(rank)}

    def _write_wrappers(self) -> None:
        folder = self.folder / "bin"
        folder.mkdir()
        for name in REAL_COMPILERS:
            wrapper = folder / name  # named like the compiler: torch checks the host compiler's name
            wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m kbench.slots "$0" "$@"\n')
            wrapper.chmod(0o755)

    def _serve(self) -> None:
        while True:
            with self.lock:
                watched = [self.listener, *self._new, *(entry[3] for entry in self._queue), *self._holding]
            readable, _, _ = select.select(watched, [], [])
            with self.lock:
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
            rank, kind = data.decode().split()
            device = kind == "nvcc"
            key = int(rank) - (self.lookahead if device else 0)
            heapq.heappush(self._queue, (key, not device, next(self._arrivals), connection))
            return
        # End of file: a compiler ended (its slot is free) or a waiting wrapper was killed.
        self._new.discard(connection)
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
            self.granted += 1

    def close(self) -> None:
        self.listener.close()
        shutil.rmtree(self.folder, ignore_errors=True)


_server: SlotServer | None = None
_server_lock = threading.Lock()


def server() -> SlotServer:
    """This process's slot server (started on first use): one slot per core."""
    global _server
    with _server_lock:
        if _server is None:
            cores = os.cpu_count() or 1
            _server = SlotServer(slots=cores, lookahead=max(1, cores // 2))
            atexit.register(_server.close)
        return _server


def use_compile_slots() -> None:
    """In a build worker whose environment names a slot server: have torch start its compilers through the
    wrappers. The real compilers are what torch would have used."""
    if SLOTS_VARIABLE not in os.environ:
        return
    from torch.utils.cpp_extension import CUDA_HOME as cuda_home  # only here: wrappers must not load torch

    wrappers = Path(os.environ[SLOTS_VARIABLE]).parent / "bin"
    os.environ[REAL_COMPILERS["c++"]] = os.environ.get("CXX", "c++")
    os.environ["CXX"] = str(wrappers / "c++")
    real_nvcc = os.environ.get("PYTORCH_NVCC") or (os.path.join(cuda_home, "bin", "nvcc") if cuda_home else "")
    if real_nvcc:
        os.environ[REAL_COMPILERS["nvcc"]] = real_nvcc
        os.environ["PYTORCH_NVCC"] = str(wrappers / "nvcc")


def run_compiler(wrapper: str, arguments: list[str]) -> None:
    """The wrappers' entry point: wait for a slot if this is a compile, then become the real compiler."""
    name = Path(wrapper).name
    real = os.environ[REAL_COMPILERS[name]]
    if "-c" in arguments:
        slot = _wait_for_slot(name)
        if slot is not None:
            os.set_inheritable(slot.fileno(), True)  # held by the compiler and its children until they exit
    os.execvp(real, [real, *arguments])


def _wait_for_slot(name: str) -> socket.socket | None:
    """Block until the server grants a slot; None (compile at once) when there is no server to ask."""
    try:
        connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        connection.connect(os.environ[SLOTS_VARIABLE])
        connection.sendall(f"{int(os.environ.get(RANK_VARIABLE, '0'))} {name}\n".encode())
        if connection.recv(1) == b"1":
            return connection
    except (OSError, KeyError, ValueError):
        pass
    return None


if __name__ == "__main__":
    run_compiler(sys.argv[1], sys.argv[2:])
