"""Whose GPU kernels a call launched: the candidate's own, or a library's (DESIGN.md item 13, decoys).

A decoy compiles a custom kernel and never launches it: the work is done by library ops (cuBLAS,
cuDNN, torch's own kernels). The profiler links every GPU kernel to the host op that was innermost
when it was launched (CUPTI's external correlation). Every aten op is a RecordFunction, whether
called from Python or from C++, so a kernel launched under an aten op (at any depth) is library
work; one launched under no aten op (a load_inline kernel called through pybind, a Triton launch, a
custom-namespace op) is the caller's own.

`library_only_message` says when a call's own kernels did none (or almost none) of its GPU time. A
plain-PyTorch solution gets it too, rightly: it has no kernel of its own. It is a noting flag.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Callable, Iterable


# Own kernels below this share of the call's GPU kernel time are a token launch next to library work.
OWN_SHARE_MIN = 0.02
_NOT_KERNELS = ("Memcpy", "Memset", "memcpy", "memset")
_LIBRARY_PREFIX = "aten::"


@dataclass(frozen=True)
class Event:
    """One profiler event, reduced to what attribution needs."""

    name: str
    on_device: bool     # a GPU activity (kernel, copy, fill), not a host event
    correlation: int    # host op: its id
    linked: int         # GPU activity: id of the host op innermost at its launch (0: none)
    start_ns: int
    end_ns: int
    thread: int         # host thread of a host event
    kind: str = ""      # the profiler's activity type where known ("kernel", "gpu_memcpy", "cpu_op")


@dataclass(frozen=True)
class Launch:
    name: str                # the kernel
    duration_us: float       # its GPU time
    library_op: str | None   # outermost aten op it ran under; None for the caller's own kernel


@dataclass(frozen=True)
class KernelReport:
    launches: tuple[Launch, ...]

    @property
    def own(self) -> tuple[Launch, ...]:
        return tuple(launch for launch in self.launches if launch.library_op is None)

    @property
    def own_share(self) -> float:
        total = sum(launch.duration_us for launch in self.launches)
        own = sum(launch.duration_us for launch in self.own)
        if total > 0:
            return own / total
        return len(self.own) / len(self.launches) if self.launches else 0.0

    def library_ops(self) -> list[tuple[str, int]]:
        """(aten op, kernels launched under it), most kernels first."""
        return Counter(launch.library_op for launch in self.launches if launch.library_op).most_common()


def is_kernel(event: Event) -> bool:
    if not event.on_device:
        return False
    if event.kind:
        return event.kind == "kernel"
    return not event.name.startswith(_NOT_KERNELS)


def classify(events: Iterable[Event]) -> KernelReport:
    """Attribute each GPU kernel to the outermost aten op among the host op that launched it and
    the host ops enclosing that one on its thread, or to the caller when there is none."""
    events = list(events)
    host = [event for event in events if not event.on_device]
    # Ops only: runtime calls (cudaLaunchKernel) are host events too, linked to an op, and their
    # correlation ids come from CUPTI's own sequence, which can repeat an op's id.
    by_id = {event.correlation: event for event in host if event.correlation and not event.linked}
    outermost: dict[int, str | None] = {}
    launches = []
    for kernel in filter(is_kernel, events):
        if kernel.linked not in outermost:
            outermost[kernel.linked] = _outermost_library_op(by_id.get(kernel.linked), host)
        launches.append(Launch(kernel.name, (kernel.end_ns - kernel.start_ns) / 1e3, outermost[kernel.linked]))
    return KernelReport(tuple(launches))


def _outermost_library_op(op: Event | None, host: list[Event]) -> str | None:
    if op is None:
        return None
    enclosing = [event for event in host if event.thread == op.thread and event.name.startswith(_LIBRARY_PREFIX)
                 and event.start_ns <= op.start_ns and event.end_ns >= op.end_ns]
    if not enclosing:
        return None
    return min(enclosing, key=lambda event: (event.start_ns, -event.end_ns)).name


def message(report: KernelReport | None) -> str | None:
    """The noting flag's message, or None (own kernels did a real share, or nothing to judge)."""
    if report is None or not report.launches:
        return None
    share = report.own_share
    if share >= OWN_SHARE_MIN:
        return None
    ops = ", ".join(f"{op} ({count})" for op, count in report.library_ops()[:4])
    total = len(report.launches)
    if not report.own:
        return f"launched no GPU kernel of its own: all {total} kernels came from library ops: {ops}"
    return (f"its own kernels ({', '.join(sorted({launch.name for launch in report.own}))[:120]}) took "
            f"{share:.1%} of its GPU kernel time; library ops did the rest: {ops}")


def profile_kernels(call: Callable[[], object]) -> KernelReport | None:
    """The GPU kernels one call of `call` launched, attributed; None where that cannot be known (no
    CUDA device, a profiler without CUDA activity, an error while profiling)."""
    import torch

    if not torch.cuda.is_available() or not torch.cuda.is_initialized():
        return None
    try:
        torch.cuda.synchronize()
        # torch.autograd's profiler: torch.profiler's imports torch._dynamo first (seconds). Without
        # use_kineto it times CUDA work with events (its "GPU fallback") and records no GPU kernel.
        with torch.autograd.profiler.profile(use_device="cuda", use_kineto=True) as profiler:
            call()
            torch.cuda.synchronize()
        raw = profiler.kineto_results.events()
        events = [_from_kineto(event) for event in raw]
    except Exception as error:  # a profiler that is unavailable or fails: say nothing rather than guess
        print(f"kbench: kernel attribution unavailable ({type(error).__name__}: {error})", flush=True)
        return None
    if not any(event.on_device for event in events):
        return None  # CUDA activity was not recorded (CUPTI missing?), or the call ran nothing
    return classify(events)


def _from_kineto(event) -> Event:
    import torch

    start = event.start_ns()
    end = event.end_ns() if hasattr(event, "end_ns") else start + event.duration_ns()
    kind = event.activity_type() if hasattr(event, "activity_type") else ""
    return Event(name=event.name(), on_device=event.device_type() != torch.autograd.DeviceType.CPU,
                 correlation=event.correlation_id(), linked=event.linked_correlation_id(),
                 start_ns=start, end_ns=end, thread=event.start_thread_id(), kind=str(kind or ""))


def library_only_message(call: Callable[[], object]) -> str | None:
    """Profile one call of `call` (the candidate's forward on its inputs, already warmed up) and say
    when its own kernels did none or almost none of its GPU work; None when they did, or when it
    cannot tell (CPU device, profiler unavailable)."""
    return message(profile_kernels(call))


def profiled_once(model, arguments: list) -> tuple[object, str | None]:
    """One call under the kernel profiler: (its output, what library_only_message says of it). One call, as
    in every mode: a forward that writes its inputs must not run twice; and the candidate's own error is raised as
    it was, not swallowed with the profiler's (which says nothing when it fails) and the forward called again."""
    returned, raised = [], []

    def once():
        try:
            returned.append(model(*arguments))
        except Exception as error:
            raised.append(error)
            raise
    said = library_only_message(once)
    if raised:
        raise raised[0]
    return (returned[0] if returned else model(*arguments)), said  # the profiler may not have called it
