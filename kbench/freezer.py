"""A cgroup that holds the candidate's runner and everything it starts, so that the judge can stop all of it.

While the reference is timed the judge stops the candidate's runner (judge/remote_process.RunnerProcess.pause). A
signal to its process group misses what the candidate moved to a group or session of its own: a neighbour
that spins while the runner is stopped slows the reference and fakes a speedup. A cgroup does not: a child
stays in its parent's cgroup, and leaving it means writing the cgroup file system, which the runner may not
(runner/limits.confine). The judge makes one cgroup per candidate runner (cgroup v2's `cgroup.freeze`, else v1's
freezer), moves the runner into it before any candidate code runs, freezes and thaws it around everything
that is not the candidate, and at the end kills whatever is left in it and removes it; the worker pool removes
what a killed judge left (remove_left_by). Imports nothing of kbench: the parent uses it too.

Where no cgroup can be made (no writable cgroup file system: not root, a read-only mount), there is no
freezer and the runner's log says so; the process-group signal still stops what stays in the group.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

_V2 = Path("/sys/fs/cgroup")
_V2_HYBRID = Path("/sys/fs/cgroup/unified")
_V1 = Path("/sys/fs/cgroup/freezer")


class Freezer:
    """One cgroup, named `name`, that can be frozen."""

    def __init__(self, folder: Path, version: int):
        self.folder = folder
        self.version = version

    @classmethod
    def create(cls, name: str) -> "Freezer | None":
        """A new, empty cgroup for freezing, below this process's own (whose limits it keeps); None where none
        can be made here."""
        for parent, version in _parents():
            try:
                (parent / f"kbench-{name}").mkdir()
            except OSError:
                continue
            return cls(parent / f"kbench-{name}", version)
        return None

    def add(self, pid: int) -> bool:
        """Move process `pid` (all its threads) into the cgroup; its children will be born in it."""
        try:
            (self.folder / "cgroup.procs").write_text(str(pid))
            return True
        except OSError:
            return False

    def freeze(self) -> None:
        self._write_state(frozen=True)

    def thaw(self) -> None:
        self._write_state(frozen=False)

    def members(self) -> list[int]:
        try:
            return [int(pid) for pid in (self.folder / "cgroup.procs").read_text().split()]
        except OSError:
            return []

    def kill(self) -> None:
        """SIGKILL every process in the cgroup, thawed first (a frozen process does not die)."""
        self.thaw()
        for pid in self.members():
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def remove(self, wait_s: float = 2.0) -> bool:
        """Kill what is left in the cgroup and remove it, once its processes are gone (a dead child of a living
        parent stays until reaped); False when that took longer than `wait_s`."""
        deadline = time.monotonic() + wait_s
        while True:
            self.kill()
            try:
                self.folder.rmdir()
                return True
            except FileNotFoundError:
                return True
            except OSError:
                if time.monotonic() > deadline:
                    return False
                time.sleep(0.01)

    def _write_state(self, frozen: bool) -> None:
        try:
            if self.version == 2:
                (self.folder / "cgroup.freeze").write_text("1" if frozen else "0")
            else:
                (self.folder / "freezer.state").write_text("FROZEN" if frozen else "THAWED")
        except OSError:
            pass


def _parents() -> list[tuple[Path, int]]:
    """This process's own cgroup in each mounted hierarchy that can freeze (v2, v2 beside v1, v1's freezer), with
    the hierarchy's version: where this module makes its cgroups."""
    found = []
    for root, version in ((_V2, 2), (_V2_HYBRID, 2), (_V1, 1)):
        own = _own_cgroup(version)
        if own is not None and (root / ("cgroup.controllers" if version == 2 else "tasks")).exists():
            found.append((root / own.lstrip("/"), version))
    return found


def _own_cgroup(version: int) -> str | None:
    """This process's cgroup path in the v2 hierarchy, or in v1's freezer hierarchy (/proc/self/cgroup)."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        number, controllers, path = line.split(":", 2)
        if (version == 2 and number == "0" and controllers == "") or \
                (version == 1 and "freezer" in controllers.split(",")):
            return path
    return None


def remove_left_by(prefix: str) -> None:
    """Kill what is in, and remove, every cgroup this module made whose name starts with `prefix` (a killed
    judge's: the worker pool knows its worker's name)."""
    for parent, version in _parents():
        for folder in parent.glob(f"kbench-{prefix}*"):
            Freezer(folder, version).remove()


def names() -> set[str]:
    """The names of the cgroups this module made that are still there (below this process's own cgroups)."""
    return {folder.name.removeprefix("kbench-") for parent, _ in _parents() for folder in parent.glob("kbench-*")}
