"""The runner process as the judge holds it.

RunnerProcess starts the runner (kbench.runner.serve: a fork of the judge before it touches CUDA, else a fresh
interpreter; runner_start.py) in a session of its own, speaks to it through a socket and a pipe (runner/wire.py;
the socket also carries the descriptor of the job's log, which a runner confined before its job cannot open),
stops it while the judge times the reference, and kills its session and everything it left behind when the evaluation ends,
before the judge writes its verdict. Runners holds an evaluation's two: the candidate's, and the reference's
(the problem's own Model, timed under the candidate's protocol; no candidate code ever runs in it).
"""

from __future__ import annotations

import math
import os
import secrets
import select
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch

import kbench
from kbench.extensions.cache import BUILT_MODULE, FAILED_BUILD_LOG
from kbench.freezer import Freezer
from kbench.judge.runner_lost import RunnerDied, RunnerSilent
from kbench.processes import WORK_VARIABLE, children_of, is_subreaper, kill_session, stat_fields
from kbench.runner import wire
from kbench.runner.arenas import JudgeArenas
from kbench.runner.landlock import OWN_FOLDERS_VARIABLE, READABLE_VARIABLE, READS_VARIABLE, SHM_VARIABLE
from kbench.runner.limits import private_shm
from kbench.judge.runner_start import PROFILER_TEARDOWN, runner_environment, start_runner


# Descriptors handed over in one message at most (Linux's SCM_MAX_FD is 253): a ring of many input sets has more.
DESCRIPTORS_PER_MESSAGE = 200

# The judge's runners not yet stopped: a runner's stop() kills what the judge (a subreaper) inherited, but not these.
_LIVE: set[int] = set()


class RunnerProcess:
    """One runner: started (warming up) as early as the judge can, used by one evaluation, then killed.
    `protected`: the reference's runner, which the candidate's must not be able to trace (limits.protect).
    `build_only`: it will only import the candidate (building its extensions), and creates no CUDA context."""

    def __init__(self, device: str, protected: bool = False, build_only: bool = False, private_shm: bool = False):
        self.device = torch.device(device)
        # In the worker's own folder (schedule/worker_folders.py removes it when the worker ends, however it ends);
        # not in /dev/shm, which outlives an evaluation where it is not the judge's own (limits.private_shm).
        base = os.environ.get(WORK_VARIABLE) or None
        self.scratch = Path(tempfile.mkdtemp(prefix="kbench-scratch-", dir=base))
        self.inputs = Path(tempfile.mkdtemp(prefix="kbench-inputs-", dir=base))
        (self.inputs / "python").mkdir()
        # kbench's package, where a Python the runner starts (a compiler wrapper's) finds it: reads of the folder it was
        # found through (a checkout holding solutions and results) are not the runner's.
        (self.inputs / "python" / "kbench").symlink_to(Path(kbench.__file__).resolve().parent)
        judge_end, runner_end = socket.socketpair()
        self.commands, commands_read = judge_end.detach(), runner_end.detach()
        self.replies, replies_write = os.pipe()
        environment = runner_environment(dict(os.environ), self.scratch, {
            "PYTHONPATH": os.pathsep.join(filter(None, [str(self.inputs / "python"), os.environ.get("PYTHONPATH")])),
            OWN_FOLDERS_VARIABLE: os.pathsep.join(map(str, self.own_folders())), READABLE_VARIABLE: str(self.inputs),
            SHM_VARIABLE: "private" if private_shm else "shared",
            READS_VARIABLE: os.environ.get(READS_VARIABLE) or "confined", **PROFILER_TEARDOWN})
        arguments = [str(commands_read), str(replies_write), device] + (["protected"] if protected else []) + (
            ["build"] if build_only else [])
        self.process = start_runner(arguments, environment, keep=(commands_read, replies_write))
        _LIVE.add(self.process.pid)
        os.close(commands_read)
        os.close(replies_write)
        self.arenas = JudgeArenas(self.device)
        self.ready = False  # the runner said it started
        # How long it may take to answer a request, and why (progress.answer_limit; None: as long as the run limit
        # lets it); the deadline of the request sent last.
        self.answer_limit: Callable[[dict], tuple[float, str]] | None = None
        self._answer_by: tuple[float, float, str] | None = None
        # The candidate's runner, in a cgroup of its own before any candidate code runs: pause() stops all it
        # starts, whatever its process group or session (freezer.py). Not for the reference's, nor for a build.
        self.freezer = None if protected or build_only else _freezer_for(self.process.pid)

    def own_folders(self) -> list[Path]:
        """What the candidate's runner may write whatever its job: its scratch folder (and the device files, its
        /dev/shm: limits.confine). It confines itself to them before its job comes (runner/serve.py)."""
        return [self.scratch]

    def lend(self, path: str | Path, kind: str) -> Path:
        """The job's file `path` (kind: "problem", "solution") as the runner reads it: in its inputs folder, which
        it may read but not write, linked where the file system allows, else copied. No other file of the folder
        `path` is in is the runner's to read (other solutions, results)."""
        folder = self.inputs / kind
        folder.mkdir(exist_ok=True)
        return _linked(Path(path), folder / Path(path).name)

    def lend_builds(self, extensions: Path) -> Path:
        """What an evaluation's runner loads of its solution's builds (the build phase left them in `extensions`, of
        the build cache): each build folder's record (kbench_built.json, the failed build's log) and libraries, in
        its inputs folder."""
        lent = self.inputs / "extensions"
        lent.mkdir(exist_ok=True)
        for build in (extensions.iterdir() if extensions.is_dir() else ()):
            if not build.is_dir() or build.is_symlink():
                continue
            for item in build.iterdir():
                if item.name in (BUILT_MODULE, FAILED_BUILD_LOG) or item.suffix == ".so":
                    (lent / build.name).mkdir(exist_ok=True)
                    _linked(item, lent / build.name / item.name)
        return lent

    def request(self, message: dict, on_progress=None) -> dict:
        """Send a command and wait for its reply; progress messages on the way go to `on_progress`."""
        self.send(message)
        return self.reply(on_progress)

    def send(self, message: dict) -> None:
        """Send a command; reply() waits for its answer (the judge may work meanwhile)."""
        arenas, descriptors = self.arenas.take_unsent()
        if self.answer_limit is not None:
            limit_s, basis = self.answer_limit(message)
            self._answer_by = (time.monotonic() + limit_s, limit_s, basis)
        try:
            wire.send(self.commands, dict(message, arenas=arenas))
            if descriptors:  # new arenas' shared memory, which the runner maps before it reads the message
                self.send_descriptor(*descriptors)
        except (wire.ChannelClosed, BrokenPipeError):
            raise RunnerDied(self._returncode(), self, self.ready) from None
        finally:
            for descriptor in descriptors:
                os.close(descriptor)

    def send_descriptor(self, *fds: int) -> None:
        """Hand the runner open files (the job's log, arenas) right after a command that says they follow."""
        channel = socket.socket(fileno=self.commands)
        try:
            for first in range(0, len(fds), DESCRIPTORS_PER_MESSAGE):  # the kernel takes at most 253 in one
                socket.send_fds(channel, [b"F"], list(fds[first:first + DESCRIPTORS_PER_MESSAGE]))
        except OSError:
            raise RunnerDied(self._returncode(), self, self.ready) from None
        finally:
            channel.detach()

    def reply(self, on_progress=None) -> dict:
        """The reply to the command sent last; progress messages on the way go to `on_progress`."""
        try:
            while True:
                self._wait_for_reply()
                reply = wire.receive(self.replies)
                if reply.get("event") == "ready":  # sent before any command: it is read with the first reply
                    self.ready = True
                    continue
                if reply.get("event") == "building":
                    self._pause_deadline(bool(reply.get("building")))
                    if on_progress is not None:
                        on_progress(wire.Progress(str(reply.get("building") or "")[:200], _number(reply.get("since"))))
                    continue
                return reply
        except (wire.ChannelClosed, BrokenPipeError):
            raise RunnerDied(self._returncode(), self, self.ready) from None

    def _pause_deadline(self, building: bool) -> None:
        """A build the runner reports (an extension its ModelNew builds when made, say) runs under the build limit
        (the parent's, from the progress it is told), not the request's: the deadline stops while it runs and starts
        afresh once it ends."""
        if self._answer_by is None:
            return
        _, limit_s, basis = self._answer_by
        self._answer_by = (math.inf if building else time.monotonic() + limit_s, limit_s, basis)

    def _wait_for_reply(self) -> None:
        """Until the runner has something to say, or its deadline passed: then it is killed (RunnerSilent)."""
        if self._answer_by is None:
            return
        deadline, limit_s, basis = self._answer_by
        wait_s = None if deadline == math.inf else max(0.0, deadline - time.monotonic())
        while not select.select([self.replies], [], [], wait_s)[0]:
            if time.monotonic() >= deadline:
                self.kill()
                raise RunnerSilent(limit_s, basis, self)

    def new_instance(self) -> str:
        """A name for a new instance in the runner: a random token, which says nothing of how many came before."""
        return secrets.token_hex(8)

    def _returncode(self) -> int | None:
        try:
            return self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return None

    def pause(self) -> None:
        """Stop the runner while the judge times the reference: nothing of the candidate's runs beside it on the
        CPU, nor launches GPU work. Its process group, and through its cgroup (where one could be made) every
        process it started, in whatever group or session."""
        if self.freezer is not None:  # first: no process of the candidate's runs while its runner is stopped
            self.freezer.freeze()
        _signal_group(self.process.pid, signal.SIGSTOP)

    def resume(self) -> None:
        _signal_group(self.process.pid, signal.SIGCONT)
        if self.freezer is not None:
            self.freezer.thaw()

    def kill(self) -> None:
        """SIGKILL the runner's process group, and (its cgroup) whatever it started wherever it went, and go on
        (stop() waits): two runners' exits, CUDA teardown and all, then overlap."""
        if self.freezer is not None:
            self.freezer.kill()  # thawed first: a frozen process does not die
        _signal_group(self.process.pid, signal.SIGKILL)

    def processes(self) -> list[int]:
        """The runner's process id and those of the processes in its cgroup (what it started, wherever they went)."""
        members = self.freezer.members() if self.freezer is not None else []
        return [self.process.pid, *(pid for pid in members if pid != self.process.pid)]

    def cpu_seconds(self) -> float:
        """CPU time of the runner and of the children it reaped, until now (0 once it is reaped)."""
        fields = stat_fields(self.process.pid)
        # utime, stime, cutime, cstime: fields 14-17 of proc(5), the 12th-15th after the command's name
        return sum(int(value) for value in fields[11:15]) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        """Kill the runner's session and whatever left it and was reparented to the judge (a subreaper:
        limits.py); remove its folders."""
        if self.freezer is not None:
            self.freezer.kill()  # thawed, and whatever it started killed, wherever it went
        kill_session(self.process.pid)
        self.process.wait()
        _LIVE.discard(self.process.pid)
        # A judge (a subreaper) has no children but its runners: what is left is what they left behind.
        for _ in range(10 if is_subreaper() else 0):
            orphans = [pid for pid in children_of(os.getpid()) if pid not in _LIVE]
            if not orphans:
                break
            for pid in orphans:
                try:
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                except (ProcessLookupError, ChildProcessError):
                    pass
        if self.freezer is not None:
            self.freezer.remove()  # its processes are dead and reaped (the orphans above) or soon will be
        for fd in (self.commands, self.replies):
            try:
                os.close(fd)
            except OSError:
                pass
        self.arenas.close()
        for folder in (self.scratch, self.inputs):
            shutil.rmtree(folder, ignore_errors=True)


def _linked(original: Path, copy: Path) -> Path:
    """`copy`, a hard link to the regular file `original` (a copy across file systems)."""
    if not original.is_file():
        raise FileNotFoundError(f"{original} is not a file")
    try:
        os.link(original, copy, follow_symlinks=True)
    except OSError:
        shutil.copyfile(original, copy)
    return copy


def _freezer_for(pid: int) -> Freezer | None:
    """A cgroup holding the runner `pid`, named after the worker's folder (the pool removes what a killed judge
    left: freezer.remove_left_by); None where none can be made (the runner's notes say so)."""
    work = os.environ.get(WORK_VARIABLE)
    freezer = Freezer.create(f"{Path(work).name if work else os.getpid()}-{pid}")
    if freezer is not None and not freezer.add(pid):
        freezer.remove()
        return None
    return freezer


@dataclass
class Runners:
    """An evaluation's two runners, both started before the judge touches CUDA."""

    candidate: RunnerProcess
    reference: RunnerProcess

    @classmethod
    def start(cls, device: str, build_only: bool = False) -> "Runners":
        """build_only: for a job that only builds the candidate, runners without a CUDA context."""
        private = private_shm()  # the judge's and its runners' own /dev/shm, gone with them (root only)
        return cls(RunnerProcess(device, build_only=build_only, private_shm=private),
                   RunnerProcess(device, protected=True, build_only=build_only, private_shm=private))

    @property
    def sessions(self) -> tuple[int, ...]:
        return self.candidate.process.pid, self.reference.process.pid

    def cpu_seconds(self) -> float:
        """CPU time of both runners and of the children they reaped (the compilers among them), until now."""
        return self.candidate.cpu_seconds() + self.reference.cpu_seconds()

    def kill(self) -> None:
        """Both runners killed, with whatever the candidate's started, not waited for (stop() waits)."""
        self.candidate.kill()
        self.reference.kill()

    def stop(self) -> None:
        self.kill()
        self.candidate.stop()
        self.reference.stop()


def _number(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) else None


def _signal_group(pid: int, signum: int) -> None:
    try:
        os.killpg(pid, signum)
    except (ProcessLookupError, PermissionError):
        pass

