"""Start workers by forking a process that has already imported torch and kbench: kbench's end of the fork server
(the server, a process of its own: judge/forkserver.py).

A spawned worker spends seconds of CPU importing torch and priming the dispatcher before it can
evaluate or build, often more than the evaluation itself. During a sweep that CPU is taken from the
builds, and with many GPUs the warm-ups alone would need many cores. A fork server pays it once per kbench
process (ForkServers keeps one for evaluation workers and one for builds). Each worker it forks does exactly what a
spawned worker with the same arguments does.

Protocol, over a SOCK_SEQPACKET socket pair: kbench sends the worker's arguments and environment (JSON)
with two file descriptors (its stdin and stdout), the server answers "forked PID"; when a worker exits
the server reaps it and sends "exit PID CODE" (CODE as subprocess reports it: negative for a signal).

On Linux the server is a subreaper: what an ended worker leaves (its runners, killed as it wrote its verdict,
and whatever they started) becomes the server's child, so a worker need not wait for its runners' exits before
its own; kbench kills and waits for all of that (ForkServer.end_adopted) before the device counts as free.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
import time
from functools import partial
from typing import Callable

from kbench.processes import children_of

# Seconds a request waits for its worker: the server's own start (importing torch) comes first.
START_TIMEOUT_S = 300
ADOPTED_STEP_S = 0.002  # between looks at what the server adopted, while it ends


def server_key(environment: dict) -> tuple:
    """Environments one server can fork workers for: equal in what Python reads at start and the loader
    reads when torch loads. A worker applies the rest of its environment itself, before it starts CUDA or
    builds anything (CUDA_VISIBLE_DEVICES, MAX_JOBS, ...); only a variable torch reads when it is
    imported keeps the value it had when the server started."""
    return tuple(sorted((name, value) for name, value in environment.items()
                        if name.startswith(("PYTHON", "LD_")) or name == "PATH"))


class ForkServer:
    """kbench's end: starts the server, asks it for workers, learns how they exit."""

    def __init__(self, start: Callable[..., subprocess.Popen], environment: dict, prime: bool):
        """`start(arguments, pass_fds=..., env=...)` starts `python -m kbench.judge.forkserver ARGUMENTS`. With
        `prime`, the server imports what op recording needs before it forks (for waiting workers, which record ops
        first thing)."""
        self.socket, server_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            arguments = [str(server_end.fileno())] + (["--prime"] if prime else [])
            self.process = start(arguments, pass_fds=(server_end.fileno(),), env=environment)
        finally:
            server_end.close()
        self.changed = threading.Condition()
        self.forked: list[int] = []
        self.exit_codes: dict[int, int] = {}
        self.workers: set[int] = set()  # forked and not known to have exited; any other child was adopted
        self.alive = True
        self.ever_forked = False
        self.request_lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True, name="kbench-forkserver").start()

    def fork_worker(self, arguments: list[str], environment: dict, stdout: int | None = None) -> ForkedWorker | None:
        """A new worker, as `python -m kbench.judge.worker ARGUMENTS` with `environment` and its output to the file
        descriptor `stdout` (None: discarded) would be; None when the server cannot fork one."""
        request = json.dumps({"arguments": arguments, "environment": environment}).encode()
        stdin_read, stdin_write = os.pipe()
        output = os.open(os.devnull, os.O_WRONLY) if stdout is None else os.dup(stdout)
        with self.request_lock:
            try:
                socket.send_fds(self.socket, [request], [stdin_read, output])
            except OSError:
                pid = None
            else:
                with self.changed:
                    self.changed.wait_for(lambda: self.forked or not self.alive, timeout=START_TIMEOUT_S)
                    pid = self.forked.pop(0) if self.forked else None
            finally:
                os.close(stdin_read)
                os.close(output)
        if pid is None:
            os.close(stdin_write)
            return None
        self.ever_forked = True
        return ForkedWorker(self, pid, os.fdopen(stdin_write, "wb"))

    def end_adopted(self, limit_s: float) -> bool:
        """Kill every process the server adopted (what ended workers left behind) and wait until each has exited,
        its CUDA context torn down with it, and been reaped; False when something was still there after `limit_s`."""
        deadline = time.monotonic() + limit_s
        while True:
            with self.request_lock:  # no fork under way: a child that is not a known worker was adopted
                with self.changed:
                    workers = set(self.workers)
                adopted = [pid for pid in children_of(self.process.pid, zombies=True) if pid not in workers]
            if not adopted:
                return True
            if time.monotonic() > deadline:
                return False
            for pid in adopted:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(ADOPTED_STEP_S)

    def stop(self) -> None:
        self.socket.close()  # the server exits at end of file; its workers die with it
        self.process.kill()
        self.process.wait()

    def _read(self) -> None:
        while True:
            try:
                message = self.socket.recv(256).decode()
            except OSError:
                message = ""
            if not message:
                break
            kind, pid, *code = message.split()
            with self.changed:
                if kind == "forked":
                    self.forked.append(int(pid))
                    self.workers.add(int(pid))
                elif kind == "exit" and int(pid) in self.workers:  # not an adopted process's
                    self.workers.discard(int(pid))
                    self.exit_codes[int(pid)] = int(code[0])
                self.changed.notify_all()
        with self.changed:
            self.alive = False
            self.changed.notify_all()


class ForkServers:
    """A kbench process's fork servers, one per environment (server_key) and kind: one primed for waiting workers
    (evaluations), one for builds, which starts forking sooner."""

    def __init__(self, start_python: Callable[..., subprocess.Popen]):
        """`start_python(module, arguments, pass_fds=..., env=...)` starts `python -m module ARGUMENTS`."""
        self._start = partial(start_python, "kbench.judge.forkserver")
        self._lock = threading.Lock()
        self._servers: dict[tuple[tuple, bool], ForkServer] = {}

    def get(self, environment: dict, waiting: bool) -> ForkServer | None:
        """The server for `environment`'s workers of that kind, as it is (None before one started)."""
        with self._lock:
            return self._servers.get((server_key(environment), waiting))

    def serving(self, environment: dict, waiting: bool) -> ForkServer | None:
        """The living server for `environment`'s workers of that kind, started if need be; None when one died
        before it forked anything (it cannot work here: spawn instead)."""
        key = server_key(environment), waiting
        with self._lock:
            server = self._servers.get(key)
            if server is None or not server.alive:
                if server is not None and not server.ever_forked:
                    return None
                server = self._servers[key] = ForkServer(self._start, environment, prime=waiting)
        return server

    def stop(self) -> None:
        with self._lock:
            servers = list(self._servers.values())
            self._servers.clear()
        for server in servers:
            server.stop()


class ForkedWorker:
    """A forked worker, with the part of subprocess.Popen's interface the runner uses."""

    def __init__(self, server: ForkServer, pid: int, stdin):
        self.server = server
        self.pid = pid
        self.stdin = stdin
        self.returncode: int | None = None

    def poll(self) -> int | None:
        with self.server.changed:
            self._update()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        with self.server.changed:
            if not self.server.changed.wait_for(self._update, timeout=timeout):
                raise subprocess.TimeoutExpired(f"forked worker {self.pid}", timeout)
        return self.returncode

    def _update(self) -> bool:
        """True once the worker's exit is known (call holding server.changed)."""
        if self.returncode is None:
            if self.pid in self.server.exit_codes:
                self.returncode = self.server.exit_codes.pop(self.pid)
            elif not self.server.alive:
                # Its server is gone, and a worker dies with its server (worker.main: die_with_parent).
                self.returncode = -signal.SIGKILL
        return self.returncode is not None
