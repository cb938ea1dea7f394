"""Worker folders: a folder per worker in the system's temporary folder (its runners' folders, and the cgroups named
after it: freezer.py), named after the kbench process that made it, removed when the worker ends, and by the next
pool on the machine when that process is gone (one killed outright, a lost Ray worker or kill -9, cannot)."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from kbench.freezer import names as freezer_names, remove_left_by
from kbench.processes import alive

PREFIX = "kbench-worker-"


def make(kind: str = "") -> Path:
    """A new folder of this process's (kbench-worker-PID-KIND...)."""
    return Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-{kind}"))


def remove(folder: Path) -> None:
    """A worker's folder and its runners' cgroups, even when its judge was killed before removing them."""
    shutil.rmtree(folder, ignore_errors=True)
    remove_left_by(folder.name)


def remove_stale() -> None:
    """The folders and runner cgroups of kbench processes that are gone."""
    for folder in Path(tempfile.gettempdir()).glob(f"{PREFIX}*-*"):
        if _owner_gone(folder.name):
            shutil.rmtree(folder, ignore_errors=True)
    for name in freezer_names():  # a runner's cgroup is named after its worker's folder
        if name.startswith(PREFIX) and _owner_gone(name):
            remove_left_by(name)


def _owner_gone(name: str) -> bool:
    """Whether the kbench process that made `name` (kbench-worker-PID-...) is gone."""
    owner = name.split("-")[2]
    return owner.isdigit() and not alive(int(owner))

