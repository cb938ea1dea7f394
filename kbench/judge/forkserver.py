"""The fork server: a process that has imported torch and the judge once, and forks a judge worker for each of
kbench's requests (kbench's end, and why: schedule/forkserver.py). Each worker it forks is still a new process, in a
session of its own, that has run no candidate code and creates its own CUDA context; it then does exactly what a
spawned worker with the same arguments does (worker.main): wait for an evaluation, or run a build job.

Fork safety: the server never initialises CUDA (a forked child could not use it) and never runs a
parallel CPU op (the child would not have the server's OpenMP threads, and would hang in its first
parallel op). It has one thread.

On Linux the server is a subreaper: what an ended worker leaves (its runners, killed as it wrote its verdict,
and whatever they started) becomes the server's child, which kbench kills and waits for (ForkServer.end_adopted).
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import sys
import traceback

from kbench.extensions import import_extension_builder
from kbench.judge import worker
from kbench.op_recording import import_op_recording
from kbench.processes import PARENT_REAPS_VARIABLE, become_subreaper, die_with_parent

MAX_REQUEST_BYTES = 1 << 20  # arguments and an environment


def serve(connection: socket.socket, prime: bool) -> None:
    if "KBENCH_PARENT_PID" in os.environ:  # started by kbench's worker pool: it goes when kbench goes
        die_with_parent(int(os.environ["KBENCH_PARENT_PID"]))
    reaps = become_subreaper()  # a worker's runners, left to exit beside it, become this server's to reap
    if prime:
        import_op_recording()  # what a worker's first op recording imports, before any fork
        import_extension_builder()  # each judge writes the compiler wrappers with it
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # a child's exit wakes the select below
    while True:
        readable, _, _ = select.select([connection, wake_read], [], [])
        if wake_read in readable:
            os.read(wake_read, 4096)
        if connection in readable:
            message, fds, _, _ = socket.recv_fds(connection, MAX_REQUEST_BYTES, 2)
            if not message:
                return  # kbench closed its end
            pid = os.fork()
            if pid == 0:
                _run_worker(json.loads(message), fds, closing=(connection.fileno(), wake_read, wake_write),
                            parent_reaps=reaps)
            for fd in fds:
                os.close(fd)
            connection.send(f"forked {pid}".encode())
        _reap(connection)


def _reap(connection: socket.socket) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        connection.send(f"exit {pid} {os.waitstatus_to_exitcode(status)}".encode())


def _run_worker(request: dict, fds: list[int], closing: tuple[int, ...], parent_reaps: bool) -> None:
    """In the forked child: become a worker as if spawned with the request's arguments and environment (and told
    whether this server reaps what it leaves); never returns."""
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for fd in closing:
            os.close(fd)
        os.setsid()  # the runner kills a worker's whole session
        stdin, stdout = fds
        os.dup2(stdin, 0)
        os.dup2(stdout, 1)
        os.dup2(stdout, 2)
        os.close(stdin)
        os.close(stdout)
        os.environ.clear()
        os.environ.update(request["environment"])
        os.environ["KBENCH_PARENT_PID"] = str(os.getppid())  # it dies with the server, as the server with kbench
        if parent_reaps:
            os.environ[PARENT_REAPS_VARIABLE] = "1"
        arguments = request["arguments"]
        sys.argv = [worker.__file__, *arguments]
        code = worker.main(arguments)
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else 1
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


if __name__ == "__main__":
    serve(socket.socket(fileno=int(sys.argv[1])), prime="--prime" in sys.argv[2:])
