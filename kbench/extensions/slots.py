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

A candidate's code runs in its build and can reach the socket, so the server trusts nothing a request says about
whose it is: kbench registers each build's worker process when it forks it (register()), seconds before the
build's first compile, and a request belongs to the build whose worker is its sender's ancestor (the peer's pid
from the socket, its parents from /proc). A build holds at most its share of slots (its compiler jobs, MAX_JOBS);
a request past that, or one of no build's, is served last and its wait excuses no build's timeout. A candidate
that opens many requests, or claims another build's place, delays only itself.

The compilers reach it through kbench's compiler wrappers (wrappers.py). This module imports no torch: every
compiler start imports it.
"""

from __future__ import annotations

import heapq
import itertools
import os
import select
import shutil
import socket
import struct
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from kbench.processes import parent_of

SLOTS_VARIABLE = "KBENCH_COMPILE_SLOTS"  # the slot server's socket, in a build worker's environment


@dataclass
class Compile:
    """One compiler's turn, in seconds since the slot server started (released: when its wrapper went, after
    running or while still waiting; None before)."""
    rank: int  # of the build it belongs to (LAST_RANK: of none)
    kind: str  # "c++" (host) or "nvcc" (device)
    queued_s: float
    granted_s: float | None = None
    released_s: float | None = None
    within_share: bool = True  # asked while its build held and awaited fewer slots than its share


class SlotServer:
    """Hands out `slots` compile slots: lowest key first, where a long compile's key (a device compile, or a host
    compile that parses all of torch's header) is its build's rank minus `lookahead` and a short one's is its rank
    (ties: long compiles first, then first come); a build never holds more than its share (register())."""

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
        self._builds: dict[int, tuple[int, int]] = {}  # a build worker's pid: (its rank, its share of slots)
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
        """Seconds the build of `rank` has had a compiler waiting for a slot within its share (the union of those
        compilers' waits): time its timeout must not count. A wait ends when it is granted or its wrapper goes."""
        with self.lock:
            now = self._now()
            waits = sorted((entry.queued_s, _first(entry.granted_s, entry.released_s, now))
                           for entry in self.compiles.values() if entry.rank == rank and entry.within_share)
        total, reach = 0.0, 0.0
        for start, end in waits:
            start = max(start, reach)
            if end > start:
                total, reach = total + end - start, end
        return total

    def environment(self) -> dict:
        return {SLOTS_VARIABLE: self.address}

    def register(self, pid: int, rank: int, share: int) -> None:
        """The process `pid` (a build's worker, just forked) and its descendants are the build of `rank`, which
        may hold `share` slots at once."""
        with self.lock:
            self._builds[pid] = (rank, max(1, share))

    def unregister(self, pid: int) -> None:
        with self.lock:
            self._builds.pop(pid, None)

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
            kind, ahead = _request(data)
            rank, share = self._build_of(connection)
            within_share = rank != LAST_RANK and self._in_flight(rank) < share
            ahead = ahead and within_share  # the rest wait last, first come first served
            key = rank - (self.lookahead if ahead else 0) if within_share else LAST_RANK
            heapq.heappush(self._queue, (key, not ahead, next(self._arrivals), connection))
            self.compiles[connection] = Compile(rank, kind, self._now(), within_share=within_share)
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
        passed_over = []  # requests of builds that hold their share already
        while self._queue and len(self._holding) < self.slots:
            entry = heapq.heappop(self._queue)
            connection = entry[3]
            rank = self.compiles[connection].rank
            if self._held(rank) >= self._share(rank):
                passed_over.append(entry)
                continue
            try:
                connection.sendall(b"1")
            except OSError:
                connection.close()
                continue
            self._holding.add(connection)
            self.compiles[connection].granted_s = self._now()
            self.granted += 1
        for entry in passed_over:
            heapq.heappush(self._queue, entry)

    def _build_of(self, connection: socket.socket) -> tuple[int, int]:
        """(rank, share) of the registered build whose worker is the peer or its ancestor; (LAST_RANK, 1) if none:
        the peer is no build's, or has left its build's process tree."""
        try:
            pid = _peer_pid(connection)
        except (OSError, AttributeError):  # AttributeError: no SO_PEERCRED (not Linux; see _share)
            return LAST_RANK, 1
        for _ in range(64):  # a build's compiler is a few generations below its worker
            if pid in self._builds:
                return self._builds[pid]
            pid = parent_of(pid)
            if pid <= 1:
                break
        return LAST_RANK, 1

    def _share(self, rank: int) -> int:
        if rank == LAST_RANK and not hasattr(socket, "SO_PEERCRED"):
            return self.slots  # no build can be known: none is held back, all are served in arrival order
        return next((share for build_rank, share in self._builds.values() if build_rank == rank), 1)

    def _held(self, rank: int) -> int:
        return sum(self.compiles[connection].rank == rank for connection in self._holding)

    def _in_flight(self, rank: int) -> int:
        return self._held(rank) + sum(self.compiles[entry[3]].rank == rank for entry in self._queue)

    def _now(self) -> float:
        # Unrounded: a release and the next grant fall in the same millisecond, and their order is the record.
        return time.monotonic() - self._started

    def close(self) -> None:
        with self.lock:
            self._closed = True
        os.write(self._wake_write, b"x")
        os.close(self._wake_write)
        shutil.rmtree(self.folder, ignore_errors=True)


def _request(data: bytes) -> tuple[str, bool]:
    """(kind, long) of a wrapper's request ("KIND long|short"); anything else reads as a short host compile. What
    it says places only its sender's build's compiles, within that build's share."""
    words = data.decode(errors="replace").split()
    return ("nvcc" if words[:1] == ["nvcc"] else "c++"), words[1:2] == ["long"]


LAST_RANK = 1 << 30  # after every build's: a request of no build's, or past its build's share


def _peer_pid(connection: socket.socket) -> int:
    credentials = connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", credentials)[0]


def _first(*values: float | None) -> float:
    return next(value for value in values if value is not None)
