"""Catching a candidate that changes the reference instead of itself (DESIGN.md item 10).

The candidate runs in the reference's process and can reach all of it. A snapshot taken before the
candidate is imported records what defines the reference's behaviour and speed: its classes and
their methods, the instance tree's attributes, its parameters and buffers (identity, storage, shape,
version counter and a content checksum), the problem module's globals, every torch function and
module attribute its code (and the code of the layers it holds) looks up, torch.Tensor's methods,
nn.Module's global hooks, the dispatcher's kernels for the aten ops it runs, and process settings
that slow it down (threads, affinity, trace hooks, SDPA backends). `changed()` names what differs.

A `probe` (a call of the reference) lets the snapshot learn what the reference changes itself
(BatchNorm running statistics in training mode, a counter): those entries are left out.
"""

from __future__ import annotations

import functools
import gc
import operator
import os
import sys
import types
from typing import Callable

import torch

from kbench import reach
from kbench.checksum import TensorChecksum


# Dispatcher entries that run for plain dense tensors outside autocast and tracing; the others
# (Meta, FuncTorch, sparse, ...) are filled in lazily by torch itself and do not run here.
_RUNTIME_KEYS = {"CPU", "CUDA", "BackendSelect", "ADInplaceOrView", "AutogradCPU", "AutogradCUDA", "AutogradOther",
                 "Autograd[alias]", "CompositeImplicitAutograd[alias]", "CompositeExplicitAutograd[alias]",
                 "CompositeExplicitAutogradNonFunctional[alias]"}
_RUNNING_STATS = ("running_mean", "running_var", "num_batches_tracked")
# Special methods that build, copy or show an object but do not run when it is called.
_CONSTRUCTION = {"__init__", "__new__", "__setstate__", "__getstate__", "__reduce__", "__reduce_ex__",
                 "__init_subclass__", "__subclasshook__", "__dir__", "__repr__", "__str__", "__doc__", "__module__"}


class ReferenceSnapshot:
    """What defines the reference; take it after the reference is built and moved to its device,
    inside the problem's global overrides, before the candidate is imported."""

    def __init__(self, problem_module, reference_model: torch.nn.Module):
        self.problem = problem_module
        self.model = reference_model
        self.classes = _classes(reference_model)
        own = [cls for cls in self.classes if cls is not torch.nn.Module]
        # What runs when the reference is called (and its inputs made), apart from what builds it.
        runtime = [value for cls in own for name, value in vars(cls).items() if name not in _CONSTRUCTION]
        runtime += [vars(torch.nn.Module)[name] for name in ("_wrapped_call_impl", "_call_impl", "__getattr__")]
        runtime += list(vars(problem_module).values())
        construction = [value for cls in own for name, value in vars(cls).items() if name in _CONSTRUCTION]
        walk = dict(skip_owners=[problem_module], short_module=problem_module.__name__)
        lookups, self.runtime_names = reach.reached(runtime, **walk)
        self.reached = {**reach.reached(construction, **walk)[0], **lookups}
        self.runtime_names |= {"forward", "__call__"}
        self.names: dict[str, tuple[str, str]] = {}  # key -> (kind, attribute name) for _matters
        self._class_keys: dict[type, dict[str, str]] = {}  # class -> entry name -> key
        self.ops: list[str] = []
        self.volatile: set[str] = set()
        self.baseline: dict = {}
        self.checksum = TensorChecksum()

    @classmethod
    def take(cls, problem_module, reference_model, probe: Callable[[], object] | None = None) -> "ReferenceSnapshot":
        """Snapshot the reference. `probe`, when given, runs the reference once on real inputs, while the
        aten ops it runs are recorded (it can be the reference's first call: whatever that call changes, lazy
        initialisation included, is the reference's own state, not compared later)."""
        snapshot = cls(problem_module, reference_model)
        first = snapshot.capture()
        if probe is not None:
            snapshot.ops = _aten_ops(probe)
            first.update(_dispatcher_state(snapshot.ops))  # known only now; the reference's call does not change it
            second = snapshot.capture()
            snapshot.volatile = set(snapshot._differences(first, second))
            first = second
        snapshot.volatile |= _running_statistics(reference_model)
        snapshot.baseline = first
        return snapshot

    def changed(self, other_globals=()) -> list[str]:
        """Readable names of what differs from the snapshot (empty when nothing does). Call it under
        the same global overrides as take(), but for the problem globals named in `other_globals` (a
        sweep's configuration), which are left out."""
        skipped = {f"problem global {name}" for name in other_globals}
        names = []
        for key, (before, after) in sorted(self._differences(self.baseline, self.capture()).items()):
            if key in self.volatile or key.removesuffix(" tensor contents").removesuffix(" tensor") in skipped:
                continue
            added = before is reach.MISSING
            if not self._matters(key, added):
                continue
            names.append(f"{key} (added)" if added else f"{key} (removed)" if after is reach.MISSING else key)
        return names

    def _differences(self, before: dict, after: dict) -> dict[str, tuple]:
        """key -> (token before, token after) for every key whose token differs (MISSING where a side has
        none), a class's entries compared one by one only where the class as a whole differs."""
        found = {}
        for key, (old, new) in _unequal(before, after).items():
            if isinstance(old, _ClassEntries) and isinstance(new, _ClassEntries):
                found.update(_unequal(self._entry_tokens(old), self._entry_tokens(new)))
            else:
                found[key] = (old, new)
        return found

    def _entry_tokens(self, entries: "_ClassEntries") -> dict[str, object]:
        """The state's keys and tokens of a class's entries, one by one."""
        keys = self._class_keys.setdefault(entries.cls, {})
        return {keys.get(name) or self._class_key(entries.cls, name): token
                for name, token in zip(entries.names, entries.tokens())}

    def _matters(self, key: str, added: bool) -> bool:
        """Whether a difference can change what the reference does when it runs. A torch class's
        entry counts when the reference's code names it or the interpreter calls it implicitly (a
        special method other than construction's: torch.compile patches nn.Module.__init__); an
        added attribute or global counts when the reference's code names it."""
        kind, name = self.names.get(key, ("", ""))
        if kind == "torch class":
            implicit = name.startswith("__") and name.endswith("__") and name not in _CONSTRUCTION
            return name in self.runtime_names or implicit
        if kind == "namespace" and added:
            return name in self.runtime_names
        return True

    def capture(self) -> dict:
        state: dict = {}
        tensors: list[tuple[str, torch.Tensor]] = []
        for index, cls in enumerate(self.classes + [torch.Tensor, torch._C.TensorBase]):
            state[f"entries of class {index}"] = _ClassEntries(cls)
        for path, module in _module_tree(self.model):
            state[f"class of {path.rstrip('.') or 'the reference'}"] = reach.token(type(module))
            self._capture_namespace(state, tensors, vars(module), f"attribute {path}")
            for kind in ("parameter", "buffer"):
                for name, tensor in list(vars(module).get(f"_{kind}s", {}).items()):
                    if isinstance(tensor, torch.Tensor):
                        tensors.append((f"{kind} {path}{name}", tensor))
        self._capture_namespace(state, tensors, vars(self.problem), "problem global ")
        for key, (owner, name) in self.reached.items():
            state[key] = reach.token(reach.lookup(owner, name))
        state.update(_process_settings())
        state.update(_dispatcher_state(self.ops))
        for (key, tensor), contents in zip(tensors, self.checksum.contents([tensor for _, tensor in tensors])):
            state[key] = _tensor_token(tensor)
            state[f"{key} contents"] = contents
        return state

    def _class_key(self, cls: type, name: str) -> str:
        """The state's key for a class entry, made once per entry."""
        key = self._class_keys[cls][name] = f"{reach.describe(cls, self.problem.__name__)}.{name}"
        self.names[key] = ("problem class" if cls.__module__ == self.problem.__name__ else "torch class", name)
        return key

    def _capture_namespace(self, state: dict, tensors: list, namespace: dict, prefix: str) -> None:
        for name, value in list(namespace.items()):
            state[f"{prefix}{name}"] = reach.token(value)
            self.names[f"{prefix}{name}"] = ("namespace", name)
            if isinstance(value, torch.Tensor):
                tensors.append((f"{prefix}{name} tensor", value))


class _ClassEntries:
    """A class's entries as one value of a snapshot: equal while the class holds the very same objects under
    the same names and the tokens of those whose identity does not decide (functions, whose code can be
    swapped; containers) are equal. A snapshot reads a thousand class entries, most of them torch.Tensor's
    methods; so a comparison is a few tuple compares in C, and the entries are compared one by one (for
    their names) only where a class differs. The values are held, so no other object takes their ids."""

    __slots__ = ("cls", "names", "values", "deep")

    def __init__(self, cls: type):
        entries = vars(cls)
        self.cls = cls
        self.names = tuple(entries)
        self.values = tuple(entries.values())
        self.deep = tuple((index, reach.token(value)) for index, value in enumerate(self.values)
                          if isinstance(value, reach.READ_INSIDE))

    def tokens(self) -> list:
        """Each entry's token as it was when this was taken (the other entries' objects decide theirs)."""
        tokens = [None if isinstance(value, reach.READ_INSIDE) else reach.token(value) for value in self.values]
        for index, deep_token in self.deep:
            tokens[index] = deep_token
        return tokens

    def __eq__(self, other) -> bool:
        return (isinstance(other, _ClassEntries) and self.cls is other.cls and self.names == other.names
                and all(map(operator.is_, self.values, other.values)) and self.deep == other.deep)

    __hash__ = None


def _unequal(before: dict, after: dict) -> dict[str, tuple]:
    """key -> (value before, value after) for the keys whose values differ (MISSING where a side has none)."""
    pairs = {key: (before.get(key, reach.MISSING), after.get(key, reach.MISSING))
             for key in before.keys() | after.keys()}
    return {key: pair for key, pair in pairs.items() if pair[0] != pair[1]}


def warm_up(device: str) -> None:
    """Take and compare a snapshot of a tiny model on `device`. A process's first snapshot loads the
    checksum's kernels and starts the CPU profiler (some 50 ms on an H100's host), which a waiting worker can
    pay while it waits rather than the evaluation that takes it."""
    model = torch.nn.Linear(4, 4).to(device)
    inputs = torch.ones(2, 4, device=device)
    ReferenceSnapshot.take(types.ModuleType("kbench_warm_up"), model, probe=lambda: model(inputs)).changed()


def _classes(model: torch.nn.Module) -> list[type]:
    """Classes whose methods define the instance tree's behaviour: every module's class and its bases
    up to nn.Module, then nn.Module itself."""
    classes: dict[int, type] = {}
    for _, module in _module_tree(model):
        for cls in type(module).__mro__:
            if cls is torch.nn.Module:
                break
            classes.setdefault(id(cls), cls)
    return list(classes.values()) + [torch.nn.Module]


def _module_tree(model: torch.nn.Module):
    """(dotted path with a trailing dot, module) for the model and every submodule, read from the
    instances' own dicts so a patched nn.Module method cannot hide a change."""
    seen: set[int] = set()
    stack = [("", model)]
    while stack:
        path, module = stack.pop()
        if id(module) in seen:
            continue
        seen.add(id(module))
        yield path, module
        children = vars(module).get("_modules", {})
        for name, child in reversed(list(children.items())):
            if isinstance(child, torch.nn.Module):
                stack.append((f"{path}{name}.", child))


def _tensor_token(tensor: torch.Tensor) -> tuple:
    try:
        storage = (tensor.data_ptr(), tuple(tensor.stride()))
    except Exception:  # sparse, meta or otherwise storage-less tensors
        storage = None
    return (reach.Same(tensor), storage, tuple(tensor.shape), str(tensor.dtype), str(tensor.device),
            tensor.requires_grad, type(tensor).__name__)


def _running_statistics(model: torch.nn.Module) -> set[str]:
    """Contents of running statistics that norm layers update in training mode on every call."""
    norm_base = torch.nn.modules.batchnorm._NormBase
    return {f"buffer {path}{name} contents" for path, module in _module_tree(model)
            if isinstance(module, norm_base) and module.training and module.track_running_stats
            for name in _RUNNING_STATS}


def _aten_ops(call: Callable[[], object]) -> list[str]:
    """Names of the aten ops (composite ones included) that `call` runs, from the CPU profiler."""
    # torch.autograd's profiler, not torch.profiler's: the latter imports torch._dynamo (seconds). The raw
    # events, not function_events, which builds the call tree first (tens of ms after a cuDNN call).
    with torch.autograd.profiler.profile(use_cpu=True) as profiler:
        call()
    return sorted({event.name() for event in profiler.kineto_results.events() if event.name().startswith("aten::")})


def _dispatcher_state(ops: list[str]) -> dict:
    return {f"dispatcher kernels of {op}": _dispatch_entries(op) for op in ops}


def _dispatch_entries(op: str) -> tuple:
    """The dispatcher's kernel registrations for every overload of an aten op, runtime keys only."""
    try:
        packet = getattr(torch.ops.aten, op.removeprefix("aten::"))
        names = [op if overload == "default" else f"{op}.{overload}" for overload in packet.overloads()]
        dumps = {name: torch._C._dispatch_dump(name) for name in names}
    except Exception:  # a profiler event named like an op that the dispatcher does not know
        return ()
    return tuple(line for name, dump in dumps.items() for line in _runtime_lines(name, dump))


@functools.lru_cache(maxsize=4096)
def _runtime_lines(name: str, dump: str) -> tuple[str, ...]:
    """A dump's runtime-key lines, each prefixed with the overload's name (cached: a dump rarely changes,
    and every checkpoint reads every op's)."""
    return tuple(f"{name} {line}" for line in dump.splitlines() if line.partition(": ")[0] in _RUNTIME_KEYS)


def _process_settings() -> dict:
    """Process-wide settings a candidate can turn to slow the reference (the checking-precision ones
    are guards.snapshot_settings'). Each reads as a token; one that cannot be read is 'unavailable'."""
    readers = {
        "torch.get_num_threads()": torch.get_num_threads,
        "torch.get_num_interop_threads()": torch.get_num_interop_threads,
        "torch.backends.mkldnn.enabled": lambda: torch.backends.mkldnn.enabled,
        "torch.get_default_device()": torch.get_default_device,
        "torch.backends.cuda.flash_sdp_enabled()": torch.backends.cuda.flash_sdp_enabled,
        "torch.backends.cuda.mem_efficient_sdp_enabled()": torch.backends.cuda.mem_efficient_sdp_enabled,
        "torch.backends.cuda.math_sdp_enabled()": torch.backends.cuda.math_sdp_enabled,
        "torch.backends.cuda.cudnn_sdp_enabled()": torch.backends.cuda.cudnn_sdp_enabled,
        "torch.backends.cuda.preferred_linalg_library()": lambda: str(torch.backends.cuda.preferred_linalg_library()),
        "autocast": lambda: (torch.is_autocast_enabled("cpu"), torch.is_autocast_enabled("cuda")),
        "torch function modes": torch._C._len_torch_function_stack,
        "torch dispatch modes": torch._C._len_torch_dispatch_stack,
        "sys.gettrace()": sys.gettrace,
        "sys.getprofile()": sys.getprofile,
        "sys.getswitchinterval()": sys.getswitchinterval,
        "gc settings": lambda: (gc.isenabled(), gc.get_threshold()),
        "gc.callbacks": lambda: gc.callbacks,
        "os.sched_getaffinity(0)": lambda: tuple(sorted(os.sched_getaffinity(0))),
        "sys.monitoring tools": _monitoring_tools,
        "torch.cuda.get_sync_debug_mode()":
            lambda: torch.cuda.get_sync_debug_mode() if torch.cuda.is_initialized() else None,
    }
    settings = {}
    for name, read in readers.items():
        try:
            settings[f"setting {name}"] = reach.token(read())
        except Exception:
            settings[f"setting {name}"] = "unavailable"
    return settings


def _monitoring_tools():
    monitoring = getattr(sys, "monitoring", None)  # Python 3.12+
    if monitoring is None:
        return None
    return tuple((monitoring.get_tool(tool), monitoring.get_events(tool)) for tool in range(6))


def tampering_message(changes: list[str], when: str, limit: int = 8) -> str:
    """The flag's message: what changed, a few names at most."""
    shown = ", ".join(changes[:limit]) + (f" and {len(changes) - limit} more" if len(changes) > limit else "")
    return f"changed the reference while {when}: {shown}"
