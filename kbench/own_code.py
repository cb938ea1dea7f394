"""Catching a candidate that replaces kbench's own code, or a builtin, in the worker it runs in.

The candidate is imported into the process that checks and times it. Beyond the torch and time functions
guards.WATCHED_FUNCTIONS names, it could replace any function kbench calls: the timing loop's per-call step, a
flag's threshold, a class's method, a set of op names, `len`. So the harness snapshot also holds the namespaces
of kbench's loaded modules, of the classes they define, and of builtins: the same names bound to the very same
objects, every function's code, defaults and closure contents as they were, and the items of containers.
`changed()` names what differs, as `kbench.timing._measure`.

It runs at every checkpoint, so the comparison is a few C-level tuple compares over all namespaces at once;
the namespaces are read entry by entry only when something differs.
"""

from __future__ import annotations

import builtins
import itertools
import operator
import sys
import types

from kbench import reach

_CONTAINERS = (dict, list, set)
_WRAPPERS = (staticmethod, classmethod, property)
_UNNAMED = "kbench's own code or the builtins (changed; what, could not be told)"


class OwnCode:
    """kbench's namespaces and the builtins as they are now: take it before the candidate is imported, once
    everything the worker uses is imported."""

    def __init__(self):
        self.owners = _owners()
        self.names, self.values = _read(self.owners)
        self.functions = [function for function in map(_function, self.values) if function is not None]
        self.closures = [function for function in self.functions if function.__closure__]
        self.containers = [index for index, (name, value) in enumerate(zip(self.names, self.values))
                           if type(value) in _CONTAINERS and not name[1].startswith("__")]
        self.insides = _insides(self.functions, self.closures)
        self.container_tokens = self._containers()
        self.entries = self._entries()

    def _containers(self) -> tuple:
        return tuple(reach.token(self.values[index]) for index in self.containers)

    def changed(self) -> list[str]:
        names, values = _read(self.owners)
        same_names = names == self.names
        if not (same_names and _identical(values, self.values)):
            if not _identical(_kept(names, values, self.names), self.values):
                return self._named(names, values)
        # Container tokens are read by kbench's own code: only once its functions are known to be intact.
        if not (_all_identical(_insides(self.functions, self.closures), self.insides)
                and self._containers() == self.container_tokens):
            return self._named(names, values)
        return [] if same_names else self._added(names, values)  # every entry as it was: names added since?

    def _named(self, names: tuple, values: tuple) -> list[str]:
        """The entries that differ, by name. Naming reads through kbench's own token code, which the change
        may have reached: a difference it cannot name is still reported."""
        now = self._entries()
        named = [f"{owner}.{name}" + (" (removed)" if (owner, name) not in now else "")
                 for (owner, name), token in self.entries.items() if now.get((owner, name), reach.MISSING) != token]
        return named + self._added(names, values) or [_UNNAMED]

    def _added(self, names: tuple, values: tuple) -> list[str]:
        """Names added to kbench's namespaces (one can shadow a builtin), but a submodule an import bound."""
        return [f"{owner}.{name} (added)" for (owner, name), value in zip(names, values)
                if (owner, name) not in self.entries and owner != "builtins" and not name.startswith("__")
                and not _submodule(owner, name, value)]

    def _entries(self) -> dict:
        """(owner, name) -> what changes when the entry does, read now (for naming the differences)."""
        names, values = _read(self.owners)
        return {name: _entry_token(name[1], value) for name, value in zip(names, values)}


# Whether anything changed is decided by the functions below through builtins and itertools bound as their
# defaults when kbench was imported, before any candidate: one that replaces builtins.all or itertools.chain
# cannot blind the comparison (and is named by it). A candidate that reaches into this module's own
# functions or the snapshot's instance is beyond it.

def _read(owners: list, _vars=vars, _tuple=tuple, _zip=zip, _repeat=itertools.repeat,
          _chain=itertools.chain.from_iterable) -> tuple[tuple, tuple]:
    """Every namespace's (owner name, entry name) pairs and values, in one flat tuple each."""
    spaces = [(label, _vars(owner)) for label, owner in owners]
    names = _tuple(_chain(_zip(_repeat(label), space) for label, space in spaces))
    values = _tuple(_chain(space.values() for _, space in spaces))
    return names, values


def _insides(functions: list, closures: list, _tuple=tuple, _map=map, _chain=itertools.chain.from_iterable,
             _code=operator.attrgetter("__code__"), _defaults=operator.attrgetter("__defaults__"),
             _kwdefaults=operator.attrgetter("__kwdefaults__")) -> tuple:
    """What can change inside functions while the names still hold the same ones: code, defaults, cells."""
    return (_tuple(_map(_code, functions)), _tuple(_map(_defaults, functions)),
            _tuple(_map(_kwdefaults, functions)), _tuple(_chain(_map(_cells, closures))))


def _identical(a: tuple, b: tuple, _len=len, _all=all, _map=map, _is=operator.is_) -> bool:
    return _len(a) == _len(b) and _all(_map(_is, a, b))


def _all_identical(a: tuple, b: tuple, _all=all, _map=map) -> bool:
    return _all(_map(_identical, a, b))


def _kept(names: tuple, values: tuple, before: tuple, _tuple=tuple, _dict=dict, _zip=zip,
          _missing=reach.MISSING) -> tuple:
    """The values now under the names `before` lists, in its order (MISSING where a name is gone)."""
    now = _dict(_zip(names, values))
    return _tuple(now.get(name, _missing) for name in before)


def _cells(function, _tuple=tuple, _missing=reach.MISSING) -> tuple:
    contents = []
    for cell in function.__closure__ or ():
        try:
            contents.append(cell.cell_contents)
        except ValueError:  # an empty cell
            contents.append(_missing)
    return _tuple(contents)


def _owners() -> list[tuple[str, object]]:
    """(dotted name, module or class): builtins, then each loaded kbench module and the classes it defines."""
    owners: list[tuple[str, object]] = [("builtins", builtins)]
    for name, module in list(sys.modules.items()):
        if module is None or not (name == "kbench" or name.startswith("kbench.")):
            continue
        owners.append((name, module))
        owners += [(f"{name}.{cls.__qualname__}", cls) for cls in vars(module).values()
                   if isinstance(cls, type) and cls.__module__ == name]
    return owners


def _function(value):
    """The plain function a namespace entry runs: the entry itself, or the one a staticmethod, classmethod or
    property wraps; None for any other entry."""
    return reach.function_of(value) if type(value) is types.FunctionType or type(value) in _WRAPPERS else None


def _entry_token(name: str, value) -> tuple:
    function = _function(value)
    inside = () if function is None else tuple(map(reach.Same, (function.__code__, function.__defaults__,
                                                                function.__kwdefaults__, *_cells(function))))
    contents = reach.token(value) if type(value) in _CONTAINERS and not name.startswith("__") else None
    return reach.Same(value), inside, contents


def _submodule(owner: str, name: str, value) -> bool:
    """Whether `value` is the package's submodule `name`, bound there by its import (a later import of one)."""
    return isinstance(value, types.ModuleType) and sys.modules.get(f"{owner}.{name}") is value
