"""Problems: load a reference file and instantiate it, optionally with some globals overridden.

A problem's sizes and settings are its module-level globals, read by get_init_inputs() and
get_inputs() at call time; overriding them is how kbench runs a problem at other sizes.
"""

from __future__ import annotations

import contextlib
import importlib.util
import itertools
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Iterator

_module_counter = itertools.count()


@dataclass(frozen=True)
class Problem:
    name: str     # file stem, e.g. "convt1d"
    path: Path    # the reference file

    @classmethod
    def from_path(cls, path: Path) -> "Problem":
        return cls(name=path.stem, path=path)


def load_module(path: Path, prefix: str) -> ModuleType:
    """Execute a Python file as a fresh module with a unique name (files may share stems)."""
    name = f"{prefix}_{next(_module_counter)}_{''.join(c if c.isalnum() else '_' for c in path.stem)}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@contextlib.contextmanager
def overridden(module: ModuleType, overrides: dict) -> Iterator[ModuleType]:
    """Set some module globals for the duration of the block, then restore them."""
    missing = object()
    previous = {name: getattr(module, name, missing) for name in overrides}
    for name, value in overrides.items():
        setattr(module, name, value)
    try:
        yield module
    finally:
        for name, value in previous.items():
            if value is missing:
                delattr(module, name)
            else:
                setattr(module, name, value)


def describe_overrides(overrides: dict) -> str:
    """Readable and reproducible: 'batch_size=2 length=37'."""
    return " ".join(f"{name}={value!r}" for name, value in overrides.items())
