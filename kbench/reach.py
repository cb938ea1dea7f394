"""What a reference reaches at call time, and comparable fingerprints of objects.

The reference runs in the candidate's process, so every name its code looks up when it runs (a torch
function, a module global, a method of a layer class) is a lever for slowing or changing it. `reached`
reads the names in code objects and lists each lookup they can make as an (owner, name) pair; a
snapshot later checks that each pair still resolves to the same object. `token` turns a value into
something that compares equal only while the value is the same object (or an equal immutable value),
with functions compared by their code, defaults and closure cells too.
"""

from __future__ import annotations

import builtins
import sys
import types
from typing import Iterable

MISSING = object()

# Functions whose code is walked: the reference's own methods, then the functions those name, and so on.
MAX_FUNCTION_DEPTH = 2
# At most this many functions are walked per snapshot: the walk stays in milliseconds.
MAX_FUNCTIONS = 400
# Attribute chains followed from a global (torch.nn.functional.x is three steps).
MAX_CHAIN = 3
# Containers larger than this are compared by identity and length only.
MAX_CONTAINER_ITEMS = 2000

_SIMPLE = frozenset({int, float, complex, str, bytes, bool, type(None)})
_NONE = ("=", "NoneType", "None")  # token(None)
# Values whose token reads inside them (a function's code, defaults and cells; a container's items): it can
# change while the object stays the same one. Every other value's token is decided by which object it is.
READ_INSIDE = (types.FunctionType, staticmethod, classmethod, property, tuple, dict, list, set, frozenset)
# Objects that cannot change in place in any way that matters here: compared by identity, decided first
# (a snapshot fingerprints a thousand of torch.Tensor's methods, a dozen times per evaluation).
_IDENTITY_ONLY = frozenset({type, types.ModuleType, types.BuiltinFunctionType, types.MethodDescriptorType,
                            types.WrapperDescriptorType, types.MethodWrapperType, types.GetSetDescriptorType,
                            types.MemberDescriptorType, types.ClassMethodDescriptorType})


class Same:
    """Equal only to a Same of the very same object (a value that can change in place)."""

    __slots__ = ("obj",)

    def __init__(self, obj):
        self.obj = obj

    def __eq__(self, other):
        return isinstance(other, Same) and other.obj is self.obj

    def __hash__(self):
        return id(self.obj)

    def __repr__(self):
        return f"Same({type(self.obj).__name__} at {id(self.obj):#x})"


def lookup(owner, name: str):
    """owner.name as stored, without running __getattr__ or descriptors (no lazy imports, no side
    effects); MISSING when absent. Classes look through their MRO, as attribute lookup does."""
    if isinstance(owner, dict):
        return owner.get(name, MISSING)
    if isinstance(owner, type):
        for klass in owner.__mro__:
            if name in klass.__dict__:
                return klass.__dict__[name]
        return MISSING
    if isinstance(owner, types.ModuleType):
        return vars(owner).get(name, MISSING)
    return MISSING


def describe(owner, short_module: str = "") -> str:
    """A readable dotted name: 'torch.nn.functional', 'nn.ConvTranspose1d', 'Model'."""
    if isinstance(owner, types.ModuleType):
        return owner.__name__
    if isinstance(owner, type):
        module = getattr(owner, "__module__", "") or ""
        if module == short_module:
            return owner.__qualname__
        if module.startswith("torch.nn.modules"):
            return f"nn.{owner.__qualname__}"
        return f"{module}.{owner.__qualname__}"
    return f"<{type(owner).__name__}>"


def code_names(code: types.CodeType) -> set[str]:
    """Global and attribute names a code object (and the code nested in it) can look up."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= code_names(const)
    return names


def function_of(value):
    """The plain function behind a method-like class entry (staticmethod, classmethod, property getter)."""
    if isinstance(value, (staticmethod, classmethod)):
        value = value.__func__
    elif isinstance(value, property):
        value = value.fget
    return value if isinstance(value, types.FunctionType) else None


def reached(functions: Iterable, skip_owners: Iterable = (),
            short_module: str = "") -> tuple[dict[str, tuple[object, str]], set[str]]:
    """What the functions' code can look up, and the names it uses.

    The lookups map a readable name to (owner, name) for every lookup through the functions' globals
    (and closure cells), following attribute chains, then the same for each Python function found, up
    to MAX_FUNCTION_DEPTH; names that resolve nowhere are left out, and classes of `short_module` are
    named without it. The names are the global and attribute names in the given functions' own code
    (not in what they call): an attribute added under any other name is one they never read.
    """
    skip = {id(owner) for owner in skip_owners}
    found: dict[str, tuple[object, str]] = {}
    all_names: set[str] = set()
    queue = [(function, 0) for function in map(function_of, functions) if function is not None]
    walked: set[int] = set()
    while queue and len(walked) < MAX_FUNCTIONS:
        function, depth = queue.pop(0)
        if id(function.__code__) in walked:
            continue
        walked.add(id(function.__code__))
        names = code_names(function.__code__)
        if depth == 0:
            all_names |= names
        owners = [_globals_owner(function.__globals__), builtins] + _closure_owners(function)
        for _ in range(MAX_CHAIN):
            deeper = []
            for owner in owners:
                for name in names:
                    value = lookup(owner, name)
                    if value is MISSING:
                        continue
                    if id(owner) not in skip:
                        found.setdefault(f"{describe(owner, short_module)}.{name}", (owner, name))
                    if isinstance(value, (types.ModuleType, type)) and value is not owner:
                        deeper.append(value)
                    elif isinstance(value, types.FunctionType) and depth < MAX_FUNCTION_DEPTH:
                        queue.append((value, depth + 1))
            owners = list({id(owner): owner for owner in deeper}.values())
    return found, all_names


def _globals_owner(namespace: dict):
    """The module whose globals these are (so the name reads 'torch.nn.functional.x'), else the dict."""
    module = sys.modules.get(namespace.get("__name__", ""))
    return module if module is not None and vars(module) is namespace else namespace


def _closure_owners(function) -> list:
    owners = []
    for cell in function.__closure__ or ():
        try:
            value = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        if isinstance(value, (types.ModuleType, type)):
            owners.append(value)
    return owners


def token(value, depth: int = 0):
    """A fingerprint that compares equal while `value` is unchanged: equal immutable values, or the
    same object (containers one level deep by their items; functions by code, defaults and cells)."""
    kind = type(value)
    if kind in _IDENTITY_ONLY:
        return ("object", Same(value))
    if kind in _SIMPLE:
        return ("=", kind.__name__, repr(value))  # repr: NaN equals NaN, 1 differs from True
    if kind is types.FunctionType:  # (no subclasses)
        defaults, kwdefaults = value.__defaults__, value.__kwdefaults__
        return ("function", Same(value), Same(value.__code__),
                _NONE if defaults is None else token(defaults, depth + 1),
                _NONE if kwdefaults is None else token(kwdefaults, depth + 1), _cells(value))
    if isinstance(value, tuple) and depth < 3:
        return ("tuple", kind.__name__) + tuple(token(item, depth + 1) for item in value)
    if kind.__module__ == "torch" and kind.__name__ in ("dtype", "device", "memory_format", "layout"):
        return ("=", kind.__name__, repr(value))
    if isinstance(value, (staticmethod, classmethod, property)):
        return ("wrapper", Same(value), token(function_of(value), depth + 1))
    if isinstance(value, types.MethodType):
        return ("method", Same(value.__func__), Same(value.__self__))
    if isinstance(value, (dict, list, set, frozenset)) and depth < 2:
        return _container_token(value, depth)
    return ("object", Same(value))


def _container_token(value, depth: int):
    if len(value) > MAX_CONTAINER_ITEMS:
        return ("container", Same(value), len(value))
    if isinstance(value, dict):
        items = tuple((token(key, 2), token(item, depth + 1)) for key, item in list(value.items()))
    elif isinstance(value, list):
        items = tuple(token(item, depth + 1) for item in list(value))
    else:
        items = frozenset(token(item, 2) for item in list(value))
    return ("container", Same(value), type(value).__name__, items)


def _cells(function) -> tuple:
    contents = []
    for cell in function.__closure__ or ():
        try:
            contents.append(Same(cell.cell_contents))
        except ValueError:
            contents.append(None)
    return tuple(contents)
