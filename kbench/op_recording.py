"""Which aten ops a call ran, as torch's profiler sees them: recorded in the judge (the reference's) and in the
candidate's runner (its own); the profiler's imports and its first start paid ahead."""

from __future__ import annotations

from typing import Callable

import torch


def import_op_recording() -> None:
    """Import what recording ops needs (the profiler's first start imports torch._dynamo: about a second), in a
    process that will fork: no profiler is started here, which could initialise CUDA's driver or start threads
    a fork would not carry."""
    import torch._dynamo  # noqa: F401
    import torch.profiler  # noqa: F401


def prime_op_recording() -> None:
    """Record ops once: the profiler's first start costs a second or so, which waiting judges pay ahead, not
    during the reference's op recording. Not in a process that forks afterwards (import_op_recording)."""
    record_ops(lambda: torch.zeros(1) + 1)


def record_ops(call: Callable[[], object]) -> set[str]:
    """The aten ops `call` ran (from Python and C++ alike), seen by the profiler's CPU observer. A dispatch mode
    would see them too, but it changes what runs: a torch.compile'd model falls back to eager aten ops under
    one, and would be noted for running the reference's ops it never runs otherwise."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU]) as recorded:
        call()
    return {event.name[len("aten::"):] for event in recorded.events() if event.name.startswith("aten::")}
