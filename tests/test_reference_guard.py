"""The reference snapshot: each way of changing the reference is named; honest use changes nothing.

Real problem modules (kbench.problem.load_module) and real nn.Modules. Cases that patch torch or the
interpreter undo it through pytest's monkeypatch or a cleanup they return.
"""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from kbench import guards, params
from kbench.problem import load_module, overridden
from kbench.checksum import TensorChecksum
from kbench.reference_guard import ReferenceSnapshot

from conftest import FIXTURES, PROBLEMS, REPO

CHEATS = FIXTURES / "cheats"
CONVT = CHEATS / "problems" / "convt1d_small.py"
AXPY = PROBLEMS / "axpy.py"

LIST_GLOBAL_PROBLEM = '''
import torch
import torch.nn as nn

size = 8
scales = [1.0, 2.0]


class Model(nn.Module):
    def forward(self, x):
        return x * scales[1]


def get_inputs():
    return [torch.rand(size)]


def get_init_inputs():
    return []
'''

# A class attribute the forward reads: a float, whose token its identity decides (no code inside).
CLASS_ATTRIBUTE_PROBLEM = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    scale = 2.0

    def forward(self, x):
        return x * self.scale


def get_inputs():
    return [torch.rand(8)]


def get_init_inputs():
    return []
'''

# A reference that changes its own state on every call: BatchNorm in training mode, and a counter.
OWN_STATE_PROBLEM = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    all_calls = 0

    def __init__(self):
        super().__init__()
        self.norm = nn.BatchNorm1d(4)
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        type(self).all_calls += 1
        return self.norm(x)


def get_inputs():
    return [torch.rand(8, 4)]


def get_init_inputs():
    return []
'''


def built(path: Path, seed: int = 0):
    module = load_module(path, "kbench_problem")
    torch.manual_seed(seed)
    model = module.Model(*module.get_init_inputs())
    return module, model, module.get_inputs()


def snapshot_of(path: Path):
    module, model, inputs = built(path)
    with torch.no_grad():
        snapshot = ReferenceSnapshot.take(module, model, probe=lambda: model(*[x.clone() for x in inputs]))
    return snapshot, module, model, inputs


def wrapped(function):
    def slower(*args, **kwargs):
        return function(*args, **kwargs)
    return slower


def swap_class(module, model, monkeypatch):
    class Slower(module.Model):
        pass
    model.__class__ = Slower


def global_hook(module, model, monkeypatch):
    return torch.nn.modules.module.register_module_forward_pre_hook(lambda *args: None).remove


def swap_two_weights(module, model, monkeypatch):
    flat = model.conv.weight.data.view(-1)  # .data: the version counter does not move
    first, second = flat[0].item(), flat[1].item()
    flat[0], flat[1] = second, first


def _other_forward(self, x):
    return self.conv(x)


def replace_code(module, model, monkeypatch):
    original = module.Model.forward.__code__
    module.Model.forward.__code__ = _other_forward.__code__  # the same function object, new code

    def restore():
        module.Model.forward.__code__ = original
    return restore


def fewer_threads(module, model, monkeypatch):
    threads = torch.get_num_threads()
    torch.set_num_threads(2 if threads == 1 else threads - 1)
    return lambda: torch.set_num_threads(threads)


def profile_hook(module, model, monkeypatch):
    previous = sys.getprofile()
    sys.setprofile(lambda *args: None)
    return lambda: sys.setprofile(previous)


def override_kernel(module, model, monkeypatch):
    library = torch.library.Library("aten", "IMPL")
    library.impl("convolution", lambda *args: None, "CPU")
    return library._destroy


class _SlowFunctional:
    def __getattr__(self, name):
        return getattr(F, name)


# (case, problem, tampering, a name changed() must report)
TAMPERING = [
    ("class method", CONVT, lambda m, model, mp: mp.setattr(m.Model, "forward", wrapped(m.Model.forward)),
     "Model.forward"),
    ("code object", CONVT, replace_code, "Model.forward"),
    ("instance method", CONVT, lambda m, model, mp: setattr(model, "forward", wrapped(model.forward)),
     "attribute forward"),
    ("class swap", CONVT, swap_class, "class of the reference"),
    ("forward pre-hook", CONVT, lambda m, model, mp: model.register_forward_pre_hook(lambda *args: None),
     "attribute _forward_pre_hooks"),
    ("global hook", CONVT, global_hook, "torch.nn.modules.module._global_forward_pre_hooks"),
    ("problem global", CONVT, lambda m, model, mp: mp.setattr(m, "stride", 1), "problem global stride"),
    ("functional op", CONVT, lambda m, model, mp: mp.setattr(F, "conv_transpose1d", wrapped(F.conv_transpose1d)),
     "torch.nn.functional.conv_transpose1d"),
    ("torch module global", CONVT, lambda m, model, mp: mp.setattr(torch.nn.modules.conv, "F", _SlowFunctional()),
     "torch.nn.modules.conv.F"),
    ("layer class", CONVT, lambda m, model, mp: mp.setattr(nn.ConvTranspose1d, "forward",
                                                         wrapped(nn.ConvTranspose1d.forward)),
     "nn.ConvTranspose1d.forward"),
    ("call machinery", CONVT, lambda m, model, mp: mp.setattr(nn.Module, "_call_impl", wrapped(nn.Module._call_impl)),
     "nn.Module._call_impl"),
    ("tensor operator", AXPY, lambda m, model, mp: mp.setattr(torch.Tensor, "__add__", wrapped(torch.Tensor.__add__)),
     "torch.Tensor.__add__"),
    ("weights through .data", CONVT, lambda m, model, mp: model.conv.weight.data.mul_(1e-39),
     "parameter conv.weight contents"),
    ("two weights swapped", CONVT, swap_two_weights, "parameter conv.weight contents"),
    ("weights replaced", CONVT,
     lambda m, model, mp: setattr(model.conv, "weight", nn.Parameter(model.conv.weight.detach().clone())),
     "parameter conv.weight"),
    ("weight storage replaced", CONVT,
     lambda m, model, mp: setattr(model.conv.weight, "data", model.conv.weight.data.clone()),
     "parameter conv.weight"),
    ("layer setting", CONVT, lambda m, model, mp: setattr(model.conv, "stride", (1,)), "attribute conv.stride"),
    ("training mode", CONVT, lambda m, model, mp: model.train(False) and None, "attribute training"),
    ("input maker", CONVT, lambda m, model, mp: mp.setattr(torch, "rand", torch.zeros), "torch.rand"),
    ("threads", CONVT, fewer_threads, "setting torch.get_num_threads()"),
    ("profile hook", CONVT, profile_hook, "setting sys.getprofile()"),
    ("dispatcher kernel", CONVT, override_kernel, "dispatcher kernels of aten::convolution"),
]


@pytest.mark.parametrize("case, problem, tamper, name", TAMPERING, ids=[case[0] for case in TAMPERING])
def test_each_tampering_is_named(case, problem, tamper, name, monkeypatch):
    snapshot, module, model, _ = snapshot_of(problem)
    assert snapshot.changed() == []
    cleanup = tamper(module, model, monkeypatch)
    try:
        changes = snapshot.changed()
    finally:
        if callable(cleanup):
            cleanup()
    assert name in [change.removesuffix(" (added)") for change in changes], changes


def test_a_mutable_global_changed_in_place_is_named(tmp_path):
    path = tmp_path / "scaled.py"
    path.write_text(LIST_GLOBAL_PROBLEM)
    snapshot, module, _, _ = snapshot_of(path)
    module.scales[1] = 3.0
    assert snapshot.changed() == ["problem global scales"]


def test_a_changed_class_attribute_is_named(tmp_path):
    """Entries that are not functions are compared by identity (a snapshot compares a class's entries as one
    value); a new value under the same name counts."""
    path = tmp_path / "class_attribute.py"
    path.write_text(CLASS_ATTRIBUTE_PROBLEM)
    snapshot, module, _, _ = snapshot_of(path)
    module.Model.scale = 0.5
    assert snapshot.changed() == ["Model.scale"]


def test_state_the_reference_changes_itself_is_not_tampering(tmp_path):
    path = tmp_path / "own_state.py"
    path.write_text(OWN_STATE_PROBLEM)
    snapshot, module, model, inputs = snapshot_of(path)
    for _ in range(3):
        model(*inputs)
    assert snapshot.changed() == []
    module.Model.forward = lambda self, x: x  # another entry of the class whose counter moves is still watched
    assert snapshot.changed() == ["Model.forward"]
    # Without a probe only the norm layer's running statistics are known to be the reference's own.
    module, model, inputs = built(path)
    snapshot = ReferenceSnapshot.take(module, model)
    model(*inputs)
    assert snapshot.changed() == ["Model.all_calls", "attribute calls"]
    model.norm.weight.data.add_(1.0)  # a parameter of that layer is still watched
    assert "parameter norm.weight contents" in snapshot.changed()


def every_problem() -> list[Path]:
    return sorted((REPO / "problems").glob("*.py")) + sorted(PROBLEMS.glob("*.py")) + \
        sorted((CHEATS / "problems").glob("*.py"))


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_what_the_worker_does_to_a_reference_changes_nothing(device):
    """Every problem at its small CPU size: repeated calls, op recording, a float64 deep copy, the
    profiler; on a GPU also a CUDA graph capture and the kernel attribution. None of it is tampering."""
    guards.prime_dispatch()
    for path in every_problem():
        module = load_module(path, "kbench_problem")
        with torch.no_grad(), overridden(module, params.small_overrides(module)):
            torch.manual_seed(0)
            model = module.Model(*module.get_init_inputs()).to(device)
            with torch.device(device):
                inputs = module.get_inputs()
            snapshot = ReferenceSnapshot.take(module, model, probe=lambda: model(*inputs))
            _use_like_the_worker(model, inputs, device)
            assert snapshot.changed() == [], path.name


def _use_like_the_worker(model, inputs, device) -> None:
    for _ in range(3):
        model(*inputs)
    guards.record_ops(lambda: model(*inputs))
    copy.deepcopy(model).double()(*[x.double() if x.is_floating_point() else x for x in inputs])
    with torch.autograd.profiler.profile(use_cpu=True):
        model(*inputs)
    if device == "cuda":
        from kbench import kernels, timing

        kernels.profile_kernels(lambda: model(*inputs))
        try:
            timing.capture_graph(lambda: model(*inputs), repeats=2)()
        except RuntimeError:  # not capturable: the worker then times without graphs
            pass
        torch.cuda.synchronize()


@pytest.mark.slow
def test_torch_compile_of_the_reference_is_not_tampering():
    """torch.compile adds globals to the problem module, an attribute to the instance and patches
    nn.Module.__init__: none of it is read when the reference runs."""
    snapshot, module, model, inputs = snapshot_of(CONVT)
    compiled = torch.compile(model)
    with torch.no_grad():
        compiled(*inputs)
        compiled(*inputs)
    assert snapshot.changed() == []


@pytest.mark.parametrize("solution, problem", [
    ("honest_weight_cache.py", CONVT), ("honest_fast.py", CHEATS / "problems" / "prefix_sum.py"),
    ("library_op.py", CONVT), ("low_precision.py", CONVT), ("memo_pointer.py", AXPY),
    ("timed_detector.py", CONVT), ("gc_reference_output.py", CONVT),
])
def test_candidates_that_leave_the_reference_alone_change_nothing(solution, problem):
    snapshot, module, model, inputs = snapshot_of(problem)
    candidate_module = load_module(CHEATS / solution, "kbench_solution")
    torch.manual_seed(0)
    candidate = candidate_module.ModelNew(*module.get_init_inputs())
    with torch.no_grad():
        for _ in range(3):
            reference_output = model(*[x.clone() for x in inputs])
            candidate(*[x.clone() for x in inputs])
            del reference_output
    assert snapshot.changed() == []


@pytest.mark.parametrize("solution, name", [
    ("slow_reference.py", "Model.forward"),
    ("slow_reference_global.py", "torch.nn.modules.conv.F"),
    ("slow_reference_weights.py", "parameter conv.weight contents"),
])
def test_cheats_on_the_reference_are_named(solution, name, monkeypatch):
    monkeypatch.setattr(torch.nn.modules.conv, "F", F)  # slow_reference_global replaces it: put it back after
    snapshot, module, model, inputs = snapshot_of(CONVT)
    try:
        candidate_module = load_module(CHEATS / solution, "kbench_solution")
        candidate_module.ModelNew(*module.get_init_inputs())
        assert name in snapshot.changed()
    finally:
        _unwrap_model_classes()


def _unwrap_model_classes() -> None:
    """slow_reference wraps the Model class of every problem module loaded so far."""
    for loaded in list(sys.modules.values()):
        model_class = vars(loaded).get("Model") if hasattr(loaded, "__dict__") else None
        forward = vars(model_class).get("forward") if isinstance(model_class, type) else None
        if getattr(forward, "_repeats", None):
            model_class.forward = forward.__wrapped__


def test_nan_parameters_and_repeated_snapshots_are_stable():
    """NaN equals NaN in the checksum and in tokens; a second snapshot of the same state agrees."""
    module, model, inputs = built(CONVT)
    model.conv.weight.data[0, 0, 0] = float("nan")
    snapshot = ReferenceSnapshot.take(module, model)
    assert snapshot.changed() == []
    assert ReferenceSnapshot.take(module, model).capture().keys() == snapshot.capture().keys()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.float64, torch.int64, torch.bool,
                                   torch.complex64])
def test_checksum_sees_any_change_of_bits_or_places(dtype):
    checksum = TensorChecksum()
    size = 300_000  # more than one step of the checksum on a CPU, and a last step shorter than a row
    values = (torch.rand(size) * 100).to(dtype) if dtype != torch.bool else torch.rand(size) > 0.5
    values[0], values[1021] = values[1021].clone() + (1 if dtype != torch.bool else False), values[1021]
    before = values.clone()
    base = int(checksum.of(values))
    assert torch.equal(values, before)  # it reads the tensor, never writes it
    assert int(checksum.of(values.clone())) == base
    for first, second in [(0, 1), (0, 1021), (5, 4000), (3, size - 2)]:  # same row, same column, anywhere
        swapped = values.clone()
        swapped[first], swapped[second] = values[second], values[first]
        if not torch.equal(swapped, values):
            assert int(checksum.of(swapped)) != base, (first, second)
    flipped = values.clone()
    flipped.view(torch.uint8)[7] ^= 1  # one bit
    assert int(checksum.of(flipped)) != base
    assert int(checksum.of(values.view(3000, 100).t())) != base  # another layout reads another order
