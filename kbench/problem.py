"""Problems: load a reference file and run it with some of its globals overridden.

A problem's sizes and settings are its module-level globals, read by get_init_inputs() and
get_inputs() at call time; overriding them is how kbench runs a problem at other sizes. Globals
computed from others at import time (`bias_shape = (out_channels, 1, 1)`) must follow an override,
so `overridden` re-runs the module's top-level assignments with the overridden ones replaced.
"""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import inspect
import itertools
import sys
import warnings
import weakref
from dataclasses import dataclass
from pathlib import Path
from types import CodeType, ModuleType
from typing import Iterator

_module_counter = itertools.count()


def load_module(path: Path, prefix: str) -> ModuleType:
    """Execute a Python file as a fresh module with a unique name (files may share stems)."""
    return load_module_in(path, prefix, None)


def load_module_in(path: Path, prefix: str, namespace: ModuleType | None) -> ModuleType:
    """Execute a Python file as a fresh module whose globals start as `namespace`'s public names (KernelBench
    executes a candidate in its reference's namespace, so `class ModelNew(Model)` works there)."""
    name = f"{prefix}_{next(_module_counter)}_{''.join(c if c.isalnum() else '_' for c in path.stem)}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    if namespace is not None:
        vars(module).update({key: value for key, value in vars(namespace).items() if not key.startswith("__")})
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@dataclass(frozen=True)
class Assignment:
    """One top-level assignment of a problem file, compiled alone so it can be re-run."""

    targets: frozenset[str]  # names it binds
    reads: frozenset[str]    # names its value reads (an augmented assignment also reads its target)
    code: CodeType           # the statement alone, with the file's name and line numbers
    line: int


# Parsed once per module: shrink_to_fit enters `overridden` many times for one module.
_assignments: "weakref.WeakKeyDictionary[ModuleType, list[Assignment]]" = weakref.WeakKeyDictionary()
# Overrides in force per module, so a nested `overridden` keeps the outer block's values.
_active: "weakref.WeakKeyDictionary[ModuleType, dict]" = weakref.WeakKeyDictionary()


def assignments(module: ModuleType) -> list[Assignment]:
    """The module's top-level assignments to plain names, in source order; none without source.

    Imports, function and class definitions, loops and assignments to attributes or items are not
    assignments here: re-running them would replace the Model class or change other objects.
    """
    if module not in _assignments:
        _assignments[module] = list(_parse_assignments(module))
    return _assignments[module]


def _parse_assignments(module: ModuleType) -> Iterator[Assignment]:
    try:
        source = inspect.getsource(module)
        tree = ast.parse(source)
    except (OSError, TypeError, SyntaxError):  # built from a string, or a compiled-only module
        return
    filename = getattr(module, "__file__", None) or "<problem>"
    for statement in tree.body:
        if isinstance(statement, ast.Assign):
            target_nodes = statement.targets
        elif isinstance(statement, (ast.AnnAssign, ast.AugAssign)) and statement.value is not None:
            target_nodes = [statement.target]
        else:
            continue
        targets = _bound_names(target_nodes)
        if targets is None:
            continue
        reads = {node.id for node in ast.walk(statement.value)
                 if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)}
        if isinstance(statement, ast.AugAssign):
            reads |= targets
        code = compile(ast.Module(body=[statement], type_ignores=[]), filename, "exec")
        yield Assignment(frozenset(targets), frozenset(reads), code, statement.lineno)


def _bound_names(nodes: list[ast.expr]) -> set[str] | None:
    """Names bound by these targets (tuples unpack), or None if any target is not a plain name."""
    names: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Name):
            names.add(node.id)
            continue
        if isinstance(node, ast.Starred):
            inner = _bound_names([node.value])
        elif isinstance(node, (ast.Tuple, ast.List)):
            inner = _bound_names(node.elts)
        else:
            return None
        if inner is None:
            return None
        names |= inner
    return names


def derived_globals(module: ModuleType) -> frozenset[str]:
    """Globals whose last top-level assignment reads other globals: they follow, not vary.

    Builtins and imported modules are not sources (`n = math.prod((2, 3))` is a constant); a
    function of the module is (`bias_shape = _shape()` may read any global).
    """
    namespace = vars(module)
    last: dict[str, Assignment] = {}
    for assignment in assignments(module):
        for name in assignment.targets:
            last[name] = assignment
    derived = set()
    for name, assignment in last.items():
        sources = {read for read in assignment.reads - {name}
                   if read in namespace and not isinstance(namespace[read], ModuleType)}
        if sources:
            derived.add(name)
    return frozenset(derived)


@contextlib.contextmanager
def overridden(module: ModuleType, overrides: dict) -> Iterator[ModuleType]:
    """Set some module globals for the duration of the block, with derived globals following them.

    The module's top-level assignments are re-run in source order, each assignment to an overridden
    name replaced by the override; every global set here is restored on exit. An assignment that
    fails to re-run keeps its previous value, with a RuntimeWarning (the reference then fails at
    those sizes, which is the problem's fault, not the candidate's). Nested blocks keep the outer
    block's overrides.
    """
    outer = _active.get(module, {})
    effective = {**outer, **overrides}
    namespace = vars(module)
    missing = object()
    saved: dict[str, object] = {}

    def assign(name: str, value: object) -> None:
        if name not in saved:
            saved[name] = namespace.get(name, missing)
        namespace[name] = value

    try:
        for name, value in overrides.items():
            assign(name, value)
        if overrides:
            _rerun(module, effective, assign)
        _active[module] = effective
        yield module
    finally:
        for name, value in saved.items():
            if value is missing:
                namespace.pop(name, None)
            else:
                namespace[name] = value
        if outer:
            _active[module] = outer
        else:
            _active.pop(module, None)


def _rerun(module: ModuleType, overrides: dict, assign) -> None:
    """Re-run the assignments whose targets are not all overridden, in source order.

    A statement that reads a name some later assignment binds, before the re-run has bound it,
    read a value from outside the assignments on import (a loop, a def): it is not re-run, or it
    would apply twice (`n += 1`).
    """
    statements = assignments(module)
    assignable = set().union(*(statement.targets for statement in statements)) if statements else set()
    bound = set(overrides)
    for statement in statements:
        free = statement.targets - overrides.keys()
        if not free or not (statement.reads & assignable) <= bound:
            continue
        scratch: dict = {}
        try:
            exec(statement.code, vars(module), scratch)
        except Exception as error:  # keep the previous values of its targets
            warnings.warn(f"{statement.code.co_filename}:{statement.line}: {', '.join(sorted(free))} kept "
                          f"its value: re-running the assignment failed: {type(error).__name__}: {error}",
                          RuntimeWarning, stacklevel=4)
            continue
        for name in free:
            if name in scratch:
                assign(name, scratch[name])
                bound.add(name)


def describe_overrides(overrides: dict) -> str:
    """Readable and reproducible: 'batch_size=2 length=37'."""
    return " ".join(f"{name}={value!r}" for name, value in overrides.items())
