"""Loading a problem and a solution, and building the two models and their inputs."""

from __future__ import annotations

import traceback
from pathlib import Path

import torch

from kbench.failures import Evidence, Kind, Party, Stop, one_line
from kbench.layouts import copied_with_layout
from kbench.problem import load_module


def load_problem(path: str):
    try:
        module = load_module(Path(path), "kbench_problem")
    except Exception as error:
        raise Stop(Evidence(Party.REFERENCE, Kind.LOAD_FAILED, f"problem file failed to load: {one_line(error)}"))
    for name in ("Model", "get_inputs", "get_init_inputs"):
        if not hasattr(module, name):
            raise Stop(Evidence(Party.REFERENCE, Kind.LOAD_FAILED, f"problem file defines no {name}"))
    return module


def reference_init_inputs(problem_module, seed: int, device, precision: str = "float32") -> list:
    """get_init_inputs() right after `seed`, its tensors on `device` and its floating ones cast to `precision` (as
    KernelBench moves and casts them: the runners get them so too, through their arenas)."""
    torch.manual_seed(seed)
    try:
        return on_device(problem_module.get_init_inputs(), device, precision)
    except Exception as error:
        raise _problem_s_fault(error, "the problem's get_init_inputs() failed")


def build_reference(problem_module, init_inputs: list, seed: int, device, precision: str = "float32"):
    """Model(*init_inputs) built right after `seed`, then moved to `device` and cast to `precision`, as KernelBench
    builds each model and as the runners build theirs (the timed reference, ModelNew): its weights do not depend on
    what get_init_inputs() drew. Running out of memory may be another process's doing (verdicts.decide, on what
    evaluation.py finds)."""
    torch.manual_seed(seed)
    try:
        return problem_module.Model(*init_inputs).to(device, model_dtype(precision))
    except Exception as error:
        raise _problem_s_fault(error, "reference failed to build")


def input_maker(problem_module, device, precision: str = "float32"):
    """make_inputs(seed): the problem's get_inputs() under that seed, on the device, its floating tensors cast to
    `precision`; a get_inputs() that
    raises is the problem's fault (reference_error), a lost CUDA context is not its (see lost_context), and
    running out of memory may be the judge's copies (verdicts.decide, on what evaluation.py finds)."""
    def make_inputs(seed: int) -> list:
        _seed_input_generators(seed, device)
        try:
            with torch.device(device):
                return on_device(problem_module.get_inputs(), device, precision)
        except Exception as error:
            raise _problem_s_fault(error, "the problem's get_inputs() failed", show=True)
    return make_inputs


def _problem_s_fault(error: Exception, what: str, show: bool = False) -> Stop:
    """The problem's failure to raise; a lost CUDA context is not its (see lost_context) and running out of
    memory may be the judge's copies or another process's (verdicts.decide, on what evaluation.py finds): those
    are raised as they are, here. `show`: the traceback goes to the log first."""
    if lost_context(error) or isinstance(error, torch.OutOfMemoryError):
        raise error
    if show:
        traceback.print_exc()
    return Stop(Evidence(Party.REFERENCE, Kind.RAISED, f"{what}: {one_line(error)}"))


def on_device(values, device, precision: str = "float32") -> list:
    """The problem's arguments as a list, each tensor on `device`: one made outside torch's factories (from numpy,
    say, which the device's default does not reach) is moved there, as KernelBench moves every argument. Below
    float32, floating tensors are cast to `precision`, as KernelBench casts them (it casts integer tensors too,
    which turns indices and class labels into floats: they keep their dtype here)."""
    dtype = model_dtype(precision)
    return [(value.to(device, dtype) if dtype is not None and value.is_floating_point() else value.to(device))
            if isinstance(value, torch.Tensor) else value for value in values]


def model_dtype(precision: str | None) -> torch.dtype | None:
    """The dtype models and floating inputs are cast to at `precision` (config.PRECISIONS); None at float32 (or
    None), where they keep their own (a problem of float64 or mixed precision is judged as it is written)."""
    return None if precision in (None, "float32") else getattr(torch, precision)


def _seed_input_generators(seed: int, device) -> None:
    """torch.manual_seed for the generators get_inputs() draws from on `device` (the CPU's, and CUDA's on a
    GPU). torch.manual_seed itself records a stack trace for every backend not in use (XPU, MTIA): half a
    millisecond, paid once per timing round, where the inputs are made afresh."""
    torch.default_generator.manual_seed(seed)
    if device.type == "cuda":
        torch.cuda.manual_seed_all(seed)  # immediate once CUDA is initialised, queued for it before


def call(model, inputs, device, party: Party, what: str = ""):
    """Run a forward and wait for the device, so asynchronous CUDA errors surface here; an error is `party`'s.

    An error that lost the CUDA context propagates as it is, whoever called: it belongs to whatever launched
    the failing kernel, which need not be this call; so does running out of memory, which may be the judge's
    own copies (verdicts.decide, on what evaluation.py finds)."""
    try:
        output = model(*inputs)
        synchronize(device)
        return output
    except Exception as error:
        traceback.print_exc()
        if lost_context(error) or isinstance(error, torch.OutOfMemoryError):
            raise
        raise Stop(Evidence(party, Kind.RAISED, f"{what}{one_line(error)}"))


def lost_context(error: BaseException) -> bool:
    """True when `error` came from the CUDA runtime and left this process's CUDA context unusable (an illegal
    or misaligned access, a device-side assert: every later CUDA call fails too). Errors that leave it usable
    (a launch with a bad configuration, say) are ordinary failures of whoever raised them."""
    accelerator_error = getattr(torch, "AcceleratorError", ())
    if not (isinstance(error, accelerator_error) or (isinstance(error, RuntimeError) and "CUDA" in str(error))):
        return False
    if not torch.cuda.is_initialized():
        return False
    try:  # does the context still work?
        torch.cuda.synchronize()
        torch.ones(1, device="cuda").add_(1).item()
        return False
    except Exception:
        return True


def call_reference(model, inputs, device, cloned: bool = False):
    """The reference's output for `inputs` (on a copy of them unless `cloned`: the caller made one)."""
    return call(model, inputs if cloned else clone(inputs), device, Party.REFERENCE,
                "reference forward failed: ")


def clone(inputs: list) -> list:
    """A copy of the arguments laid out as they are (strides, storage offsets, views that share a storage), as the
    runners get them: the reference computes on what get_inputs made."""
    return copied_with_layout(inputs)


def tensor_bytes(values) -> int:
    """Bytes of the tensors in a tensor, tuple or list (an input set, an output)."""
    values = values if isinstance(values, (tuple, list)) else [values]
    return sum(v.numel() * v.element_size() for v in values if isinstance(v, torch.Tensor))


def release_cached_memory(device) -> None:
    """Give the judge's freed GPU memory (kept by torch's caching allocator) back to the card, so that the
    candidate's runner finds what the judge no longer uses."""
    if device.type == "cuda":
        torch.cuda.empty_cache()


def warm_cuda_libraries(device) -> None:
    """Load cuBLAS and cuDNN and create their handles on `device` with a tiny product and convolution: a fresh
    process pays that at its first matrix product or convolution, and a process that warms up while it waits for
    its job pays it there instead of inside a phase (the reference's first call, the reference timed alone)."""
    if device.type != "cuda":
        return
    try:
        square = torch.ones(8, 8, device=device)
        square @ square
        image = torch.ones(1, 1, 4, 4, device=device)
        torch.nn.functional.conv2d(image, torch.ones(1, 1, 3, 3, device=device))
        torch.cuda.synchronize(device)
    except Exception:  # only a head start: a library that fails fails again in the phase that needs it, blamed there
        pass


def synchronize(device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
