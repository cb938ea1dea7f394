"""Timers behind one small interface, and the interleaved sampling loop.

A timer turns one call into milliseconds. The sampling loop only sees that interface, so tests drive
it with a fake clock and the GPU path uses CUDA events with an L2 flush.
"""

from __future__ import annotations

import ctypes
import os
import time
from dataclasses import dataclass, field
from typing import Callable, Protocol

from kbench import stats

# Never sample fewer than this, even when the time budget is spent: a median needs a few points.
MIN_SAMPLES_ALWAYS = 3


class Timer(Protocol):
    name: str

    def measure(self, call: Callable[[], object]) -> tuple[float, float, object]:
        """Run `call` once: (timed ms, wall ms until the device is idle, the call's return value)."""


class HostTimer:
    """Wall clock around the call; right for CPU work, which is synchronous."""

    name = "host-clock"

    def __init__(self, clock: Callable[[], float] = time.perf_counter):
        self.clock = clock

    def measure(self, call: Callable[[], object]) -> tuple[float, float, object]:
        start = self.clock()
        output = call()
        elapsed_ms = (self.clock() - start) * 1e3
        return elapsed_ms, elapsed_ms, output


class CudaEventTimer:
    """CUDA events on the current stream around the call, after an L2 flush (the judge uses its flush alone:
    the timing loop's batches are timed by its own clock, sides.py).

    The flush writes a buffer twice the size of L2 before the start event, so neither model finds
    its inputs or weights warm in cache from the previous call; the flush itself is not timed.
    Before it, the persisting L2 carve-out is released and persisting lines are made normal again
    (PersistingL2): lines a candidate marked persisting would otherwise survive the flush.
    After the end event kbench waits for the whole device, not just the timed stream, and keeps
    that wall time too: work hidden on another stream shows up there and not in the events.
    """

    name = "cuda-events"

    def __init__(self, device, release_persisting_l2: bool = True):
        import torch

        self._event = torch.cuda.Event
        self._synchronize = torch.cuda.synchronize
        self._capturing = torch.cuda.is_current_stream_capturing
        self._clock = time.perf_counter
        self.device = device
        l2_bytes = torch.cuda.get_device_properties(device).L2_cache_size
        self.flush_buffer = torch.empty(max(2 * l2_bytes, 1 << 20), dtype=torch.int8, device=device)
        self.persisting_l2 = PersistingL2() if release_persisting_l2 else None

    def flush(self) -> None:
        # Host calls cannot be captured: inside a CUDA graph the flush is the buffer write alone.
        if self.persisting_l2 is not None and not self._capturing():
            self.persisting_l2.release()
        self.flush_buffer.zero_()

    def measure(self, call: Callable[[], object]) -> tuple[float, float, object]:
        self.flush()
        start = self._event(enable_timing=True)
        end = self._event(enable_timing=True)
        wall_start = self._clock()
        start.record()
        output = call()
        end.record()
        self._synchronize(self.device)
        wall_ms = (self._clock() - wall_start) * 1e3
        return start.elapsed_time(end), wall_ms, output


# cudaLimitPersistingL2CacheSize and CU_LIMIT_PERSISTING_L2_CACHE_SIZE (0x05 is the fetch granularity).
_LIMIT_PERSISTING_L2 = 0x06
_RUNTIME_CALLS = ("cudaCtxResetPersistingL2Cache", "cudaDeviceGetLimit", "cudaDeviceSetLimit", "cudaGetLastError")
_DRIVER_CALLS = ("cuCtxResetPersistingL2Cache", "cuCtxGetLimit", "cuCtxSetLimit", None)


class PersistingL2:
    """Releases the persisting L2 carve-out and makes persisting lines normal, before each timed call.

    A candidate can set aside part of L2 for persisting accesses (cudaDeviceSetLimit) and mark its
    inputs or weights persisting with an access-policy window on the timed stream; the flush's
    normal writes then cannot evict them. Resetting the lines alone is not enough while the
    carve-out stays (normal writes do not use it), so the limit goes back to 0 as well (only when it
    is not 0 already: Hopper's default carve-out is not). The stream's window is left alone: using
    persisting L2 within one call is a legitimate optimisation, and without the carve-out and the
    lines it cannot carry anything from one call to the next.

    Calls the CUDA runtime torch loaded (found in /proc/self/maps), else the driver (libcuda.so.1).
    `note` says why it does nothing, when it cannot work; a failed call disables it with a note.
    """

    def __init__(self):
        self.note: str | None = None
        self._reset = self._get_limit = self._set_limit = self._clear_error = None
        try:
            self._bind()
        except OSError as error:
            self.note = f"persisting L2 lines are not reset before timed calls ({error})"

    def _bind(self) -> None:
        runtime = loaded_library("libcudart")
        choices = ([(runtime, _RUNTIME_CALLS)] if runtime else []) + [("libcuda.so.1", _DRIVER_CALLS)]
        errors = []
        for path, names in choices:
            try:
                library = ctypes.CDLL(path)
                reset, get_limit, set_limit, clear_error = (getattr(library, name) if name else None
                                                            for name in names)
            except (OSError, AttributeError) as error:
                errors.append(str(error))
                continue
            reset.restype = get_limit.restype = set_limit.restype = ctypes.c_int
            get_limit.argtypes = [ctypes.POINTER(ctypes.c_size_t), ctypes.c_int]
            set_limit.argtypes = [ctypes.c_int, ctypes.c_size_t]
            self._reset, self._get_limit, self._set_limit, self._clear_error = reset, get_limit, set_limit, clear_error
            return
        raise OSError("; ".join(errors))

    def release(self) -> None:
        """Carve-out to 0 (when it is not), then persisting lines back to normal. Needs a device that
        is idle (the timer synchronises after every call)."""
        if self._reset is None:
            return
        limit = ctypes.c_size_t(0)
        status = self._get_limit(ctypes.byref(limit), _LIMIT_PERSISTING_L2)
        if status == 0 and limit.value:
            status = self._set_limit(_LIMIT_PERSISTING_L2, 0)
        if status == 0:
            status = self._reset()
        if status != 0:
            if self._clear_error is not None:
                self._clear_error()  # or the next kernel launch check would report this error as its own
            self.note = f"persisting L2 lines are not reset before timed calls (CUDA error {status})"
            self._reset = None


def loaded_library(stem: str) -> str | None:
    """Path of a shared library this process has loaded whose file name starts with `stem`."""
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.split()[-1] if line.strip() else ""
                name = os.path.basename(path)
                if name.startswith(stem) and ".so" in name:  # libcudart.so.13, libcudart-1a2b3c.so.12
                    return path
    except OSError:  # not Linux
        return None
    return None


@dataclass(frozen=True)
class StopRule:
    warmup: int               # untimed calls of each side first
    min_samples: int          # samples before the precision target may stop sampling
    max_samples: int          # hard cap
    target_rse: float         # stop once every side's median is known this precisely (stats.median_relative_error)
    budget_s: float           # stop once this much wall time has gone into sampling

    def done(self, samples_ms: list[list[float]], elapsed_s: float) -> bool:
        count = min(len(ms) for ms in samples_ms)
        if count < MIN_SAMPLES_ALWAYS:
            return False
        if count >= self.max_samples or elapsed_s >= self.budget_s:
            return True
        precise = all(stats.median_relative_error(ms) < self.target_rse for ms in samples_ms)
        return count >= self.min_samples and precise


def do_nothing(*_args) -> None:
    return None


@dataclass(frozen=True)
class Side:
    """One side of a timing comparison: the timed call and untimed work around it."""

    call: Callable[[], object]                           # timed
    prepare: Callable[[], None] = do_nothing               # before each call (e.g. load the next inputs)
    inspect: Callable[[object], None] = do_nothing         # after each call, given its output
    timer: object = None                                   # its own Timer (sides.BatchTimer), else the loop's


@dataclass(frozen=True)
class ClockReading:
    sm_mhz: float | None          # SM clock, None when it cannot be read
    temperature_c: float | None   # GPU temperature, None when it cannot be read


class ClockLog:
    """SM clock and temperature while timing: read at the start, about every `every_s`, and at the end."""

    def __init__(self, read: Callable[[], ClockReading], every_s: float = 0.5,
                 clock: Callable[[], float] = time.monotonic):
        self.read = read
        self.every_s = every_s
        self.clock = clock
        self.readings: list[ClockReading] = []
        self._last_s: float | None = None

    def record(self, force: bool = False) -> None:
        now = self.clock()
        if force or self._last_s is None or now - self._last_s >= self.every_s:
            self.readings.append(self.read())
            self._last_s = now


def nvml_clock_reader(device) -> Callable[[], ClockReading]:
    """Reads the device's SM clock and temperature through NVML (via torch); None where that fails."""
    import torch

    def read_or_none(read):
        try:
            return float(read(device))
        except Exception:  # no NVML (pynvml missing, sandboxed driver): the reading is simply absent
            return None
    return lambda: ClockReading(read_or_none(torch.cuda.clock_rate), read_or_none(torch.cuda.temperature))


@dataclass
class Samples:
    ms: list[float] = field(default_factory=list)        # timed milliseconds per call
    wall_ms: list[float] = field(default_factory=list)   # wall milliseconds until the device was idle
    others_cpu_ms: list[float] = field(default_factory=list)  # CPU ms the process's other threads used meanwhile


def sample_interleaved(sides: list[Side], timer: Timer, rule: StopRule,
                       clock: Callable[[], float] = time.monotonic,
                       clock_log: ClockLog | None = None,
                       before_round: Callable[[], None] = do_nothing,
                       turns: int = 1, before_turn: Callable[[int], None] = do_nothing) -> list[Samples]:
    """Time the sides in turn, round after round, always in the order given (kbench puts the candidate
    first: no reference output for a round's contents exists while it runs), so drift in clocks or load
    cancels in their ratios. With `turns` 2 each side runs two batches in a row, `before_turn(t)` before
    its t-th (fresh.py: the round's t-th contents), each a sample: every side then follows another side
    in one batch and itself in the other, whatever its place in the round. Every timed call starts the
    same way whatever ran before it: the timer flushes L2 and the device was idle (each call ends with a
    synchronisation). Stops when every side's median is precise enough or the budget is spent.
    `clock_log`, when given, reads the GPU clock after the warm-up, between rounds and at the end;
    `before_round` runs before every round, warm-up included (it makes the round's input contents)."""
    def run_round(samples: list[Samples] | None) -> None:
        before_round()
        for index, side in enumerate(sides):
            for turn in range(turns):
                before_turn(turn)
                measured = measure_side(side, timer)
                if samples is not None:
                    samples[index].ms.append(measured[0])
                    samples[index].wall_ms.append(measured[1])
                    samples[index].others_cpu_ms.append(measured[2])

    for _ in range(rule.warmup):
        run_round(None)
    samples = [Samples() for _ in sides]
    if clock_log:
        clock_log.record(force=True)
    started = clock()
    while not rule.done([side_samples.ms for side_samples in samples], clock() - started):
        run_round(samples)
        if clock_log:
            clock_log.record()
    if clock_log:
        clock_log.record(force=True)
    return samples


def measure_side(side: Side, timer: Timer) -> tuple[float, float, float]:
    """One call of `side`, prepared and inspected as the rounds make it: (timed ms, wall ms, CPU ms the process's
    threads other than this one used during the timed call)."""
    side.prepare()
    others_before = others_cpu_s()
    timed_ms, wall_ms, output = (side.timer or timer).measure(side.call)
    others_cpu_ms = (others_cpu_s() - others_before) * 1e3
    side.inspect(output)
    return timed_ms, wall_ms, others_cpu_ms


def others_cpu_s() -> float:
    """CPU seconds used so far by this process's threads other than the calling one. A thread that slows the
    reference by holding the GIL (or by any work of its own) uses CPU while the reference is timed."""
    return time.process_time() - time.thread_time()
