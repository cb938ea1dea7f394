"""Defences against candidates that fake correctness or speed: each check returns what it found; the
flags it raises are named in flags.py.
"""

from __future__ import annotations

import statistics
import sys
from typing import Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from kbench import flags, policy
from kbench.own_code import OwnCode
from kbench.reference_guard import tampering_message


# A fall of the SM clock beyond this fraction while timing makes the times suspect.
THROTTLE_DROP = 0.10


def throttle_message(clocks) -> str | None:
    """A warning when the SM clock fell by more than THROTTLE_DROP while timing (results.ClockRecord)."""
    if clocks is None or clocks.sm_drop is None or clocks.sm_drop <= THROTTLE_DROP:
        return None
    temperatures = "" if clocks.temperature_c_end is None else \
        f", temperature {clocks.temperature_c_start:g} -> {clocks.temperature_c_end:g} C"
    return (f"SM clock fell {clocks.sm_drop:.0%} while timing ({clocks.sm_mhz_start:g} MHz at the start, "
            f"{clocks.sm_mhz_min:g} lowest{temperatures}): times may be slow")


def inputs_mutated(pristine: list, used: list) -> bool:
    """True when any input tensor differs from its untouched copy (NaN equal to NaN)."""
    for original, after in zip(pristine, used):
        if isinstance(original, torch.Tensor):
            if not isinstance(after, torch.Tensor) or original.shape != after.shape:
                return True
            if not torch.equal(original, after) and not bool(
                    torch.isclose(original, after, rtol=0, atol=0, equal_nan=True).all()
                    if original.is_floating_point() else False):
                return True
    return False


# --- harness integrity -------------------------------------------------------------------------

# torch and time functions the worker's timing and checking rely on; a candidate replacing any of them is
# tampering. (kbench's own code and the builtins are watched whole: own_code.py.)
WATCHED_FUNCTIONS = (
    "time.perf_counter", "time.monotonic", "time.time", "time.process_time", "time.thread_time",
    "torch.cuda.synchronize", "torch.cuda.Event", "torch.cuda.Event.record", "torch.cuda.Event.elapsed_time",
    "torch.cuda.Event.synchronize", "torch.cuda.current_stream", "torch.cuda.Stream.synchronize",
    "torch.allclose", "torch.isclose", "torch.equal", "torch.isfinite", "torch.isnan", "torch.where", "torch.abs",
    "torch.linalg.vector_norm", "torch.nan_to_num", "torch.unravel_index", "torch.manual_seed",
    "torch.default_generator", "torch.cuda.manual_seed_all",
    "torch.Tensor.__sub__", "torch.Tensor.__eq__", "torch.Tensor.__ne__", "torch.Tensor.__gt__", "torch.Tensor.abs",
    "torch.Tensor.max", "torch.Tensor.any", "torch.Tensor.sum", "torch.Tensor.to", "torch.Tensor.clone",
    "torch.Tensor.copy_", "torch.Tensor.fill_", "torch.Tensor.item", "torch.Tensor.__bool__", "torch.Tensor.__float__",
    "torch.nn.Module.__call__", "torch.nn.Module._call_impl", "torch.cuda.CUDAGraph.replay",
    "torch.cuda.graph.__enter__", "torch.cuda.clock_rate",
)


def _resolve(dotted: str):
    module_name, _, rest = dotted.partition(".")
    target = sys.modules.get(module_name)
    for part in rest.split("."):
        if target is None:
            return None
        if isinstance(target, type):
            target = target.__dict__.get(part, getattr(target, part, None))
        else:
            target = getattr(target, part, None)
            if target is None and hasattr(sys.modules.get(f"{module_name}.{part}"), "__dict__"):
                target = sys.modules[f"{module_name}.{part}"]
        module_name = f"{module_name}.{part}"
    return target


class HarnessSnapshot:
    """What the worker relies on, taken before the candidate is imported: the identities of WATCHED_FUNCTIONS,
    and kbench's own code and the builtins (own_code.OwnCode)."""

    def __init__(self):
        prime_dispatch()
        self.objects = {name: _resolve(name) for name in WATCHED_FUNCTIONS}
        self.own_code = OwnCode()

    def changed(self) -> list[str]:
        return [name for name, original in self.objects.items() if _resolve(name) is not original] + \
            self.own_code.changed()


class Watch:
    """What must stay as it was before the candidate was imported: the global numerical settings and the
    functions the harness relies on. `findings(when)` names what changed (and puts the settings back)."""

    def __init__(self, harness: bool = True):
        self.settings = policy.snapshot_settings()
        # A build's import is repeated by the evaluation, whose snapshot judges it; the snapshot primes the
        # dispatcher first, which would cost each build worker seconds of CPU (forkserver.py).
        self.harness = HarnessSnapshot() if harness else None
        self.reference = None  # a reference_guard.ReferenceSnapshot, once the reference is built

    def findings(self, when: str, other_globals=()) -> list[tuple[str, str]]:
        """Call it under the global overrides the reference snapshot was taken under, but for the problem
        globals named in `other_globals`, which are not compared."""
        found = []
        changes = policy.changed_settings(self.settings, policy.snapshot_settings())
        if changes:
            found.append((flags.CHANGED_SETTINGS, f"global settings changed while {when}: {', '.join(changes)}"))
            policy.restore_settings(self.settings)
        tampered = self.harness.changed() if self.harness else []
        if tampered:
            found.append((flags.HARNESS_TAMPERING, f"replaced {', '.join(tampered)} while {when}"))
        reference_changes = self._reference_changes(other_globals)
        if reference_changes:
            found.append((flags.REFERENCE_TAMPERING, tampering_message(reference_changes, when)))
        return found

    def _reference_changes(self, other_globals) -> list[str]:
        if self.reference is None:
            return []
        try:
            return self.reference.changed(other_globals)
        except Exception as error:  # what it reads was made unreadable: that is a change too
            return [f"the reference's snapshot could not be compared ({type(error).__name__}: {error})"]


def prime_dispatch() -> None:
    """Use a dispatch mode once. The first use imports a good deal of torch (about a second) and makes
    torch wrap a few functions (torch.manual_seed among them); after this, the harness snapshot holds
    the wrapped versions, so only a candidate's replacements count. Waiting workers do it ahead."""
    record_ops(lambda: torch.zeros(1) + 1)


# --- outputs -----------------------------------------------------------------------------------

def non_plain_outputs(output) -> list[str]:
    """Types of outputs that are tensors but not plain torch.Tensor (or nn.Parameter)."""
    values = output if isinstance(output, (tuple, list)) else [output]
    return [type(value).__name__ for value in values
            if isinstance(value, torch.Tensor) and type(value) not in (torch.Tensor, torch.nn.Parameter)]


def poison(output) -> None:
    """Fill floating outputs with NaN before they are freed: memory a later candidate reuses without
    writing then reads NaN, not the reference's answer."""
    values = output if isinstance(output, (tuple, list)) else [output]
    for value in values:
        if type(value) is torch.Tensor and value.is_floating_point():
            value.detach().fill_(float("nan"))
            if value.is_cuda:
                # Finished here, so the fill is not in the wall time of whatever is timed next.
                torch.cuda.synchronize(value.device)


def weak_check_reason(reference_output, tolerance_for: Callable[[str], tuple[float, float]]) -> str | None:
    """Why the tolerance says little about this reference output (nearly zero or nearly constant)."""
    values = reference_output if isinstance(reference_output, (tuple, list)) else [reference_output]
    for index, value in enumerate(values):
        if not isinstance(value, torch.Tensor) or not value.is_floating_point() or value.numel() < 2:
            continue
        atol, rtol = tolerance_for(str(value.dtype).removeprefix("torch."))
        finite = torch.isfinite(value)
        # One read of the device for the four figures; the extremes are exact in the output's dtype.
        count, largest, highest, lowest = torch.stack([
            finite.sum(dtype=torch.float64), torch.where(finite, value.abs(), 0).max().double(),
            torch.where(finite, value, -torch.inf).max().double(),
            torch.where(finite, value, torch.inf).min().double()]).tolist()
        if count < 2:
            continue
        spread = highest - lowest
        if largest <= atol:
            return f"reference output {index} is nearly zero (max |ref| = {largest:.2g} <= atol)"
        if spread <= atol + rtol * largest:
            return f"reference output {index} is nearly constant (spread {spread:.2g} within tolerance)"
    return None


# A candidate's error against float64 truth this many times the float32 reference's is lower precision.
LOW_PRECISION_RATIO = 10.0
# ...and only when that error is large enough to matter at all.
LOW_PRECISION_MIN_ERROR = 1e-6


def low_precision_possible(norm_err: float | None) -> bool:
    """Whether a candidate whose relative norm error against the float32 reference is `norm_err` can be
    flagged at all: against the truth its error is at most norm_err*(1 + e) + e, e being the reference's
    own, and the flag needs e at most a tenth of it, so it is at most about norm_err / 0.9. Below the
    flag's floor, the float64 truth (the slowest part of the checks on large convolutions) need not run."""
    if norm_err is None or norm_err != norm_err:
        return True
    ratio = LOW_PRECISION_RATIO
    bound = norm_err / max(1 - 1 / ratio - norm_err / ratio, 1e-9)
    return bound * 1.01 >= LOW_PRECISION_MIN_ERROR


# --- work outside the timed stream -------------------------------------------------------------

# Wall time beyond the events (after the reference's own overhead is taken off) that counts as hidden.
HIDDEN_WORK_MIN_MS = 0.05
HIDDEN_WORK_FRACTION = 0.1


def hidden_work_message(reference_ms: list[float], reference_wall_ms: list[float],
                        candidate_ms: list[float], candidate_wall_ms: list[float]) -> str | None:
    """Compare event time with time until the whole device was idle, per side.

    A kernel launched on the timed stream is inside the events; work left running on another stream
    or thread is not, but the device-wide wait after each call still waits for it. The reference's
    own gap (sync and launch overhead) is the baseline.
    """
    if not candidate_ms or not reference_ms:
        return None
    baseline = statistics.median(w - t for t, w in zip(reference_ms, reference_wall_ms))
    hidden = statistics.median(w - t for t, w in zip(candidate_ms, candidate_wall_ms)) - baseline
    timed = statistics.median(candidate_ms)
    if hidden > HIDDEN_WORK_MIN_MS and hidden > HIDDEN_WORK_FRACTION * timed:
        return (f"work outside the timed stream: the device stayed busy {hidden:.3g} ms beyond the "
                f"{timed:.3g} ms the events saw")
    return None


# --- which aten ops ran ------------------------------------------------------------------------

# Ops that move, allocate or reshape data: calling them is not doing the reference's work.
UTILITY_OPS = {
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "zeros", "zeros_like", "ones",
    "ones_like", "full", "full_like", "new_zeros", "new_ones", "new_full", "fill_", "zero_", "view",
    "_unsafe_view", "reshape", "t", "transpose", "permute", "expand", "contiguous", "clone", "copy_", "_to_copy",
    "to", "detach", "alias", "as_strided", "select", "slice", "squeeze", "unsqueeze", "unbind", "split",
    "lift_fresh", "resize_", "set_", "_reshape_alias", "view_as", "flatten", "unflatten", "narrow", "split_with_sizes",
    "is_same_size", "_local_scalar_dense", "item", "scalar_tensor", "arange", "record_stream", "cat", "stack",
}


class OpRecorder(TorchDispatchMode):
    """Records the names of the aten ops dispatched while active (from Python and C++ alike)."""

    def __init__(self):
        super().__init__()
        self.ops: set[str] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.add(func.overloadpacket.__name__)
        return func(*args, **(kwargs or {}))


def record_ops(call: Callable[[], object]) -> set[str]:
    recorder = OpRecorder()
    with recorder:
        call()
    return recorder.ops


def shared_work_ops(reference_ops: set[str], candidate_ops: set[str]) -> list[str]:
    """The reference's work-carrying ops that the candidate ran too."""
    return sorted((reference_ops & candidate_ops) - UTILITY_OPS)
