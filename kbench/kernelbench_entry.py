"""KernelBench's entry point, judged by kbench: `eval_kernel_against_ref` with KernelBench's keywords, units and
result fields (`KernelExecResult`), on this process's warm judge (api.warm_judge); and `reward`, one number per
result for a training loop."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path

from kbench.api import judge
from kbench.config import RunConfig
from kbench.results import Result, Status

# KernelBench's keyword values (its eval.py and timing.py): a value outside them is refused, as KernelBench refuses it.
BACKENDS = ("cuda", "triton", "tilelang", "cute", "hip", "thunderkittens")
TIMING_METHODS = ("cuda_event", "do_bench", "do_bench_impl", "host_time", "nsight_python_time")
# KernelBench's precision names (get_torch_dtype_from_string), and torch's, to kbench's.
_PRECISION_NAMES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16", "float32": "float32",
                    "float16": "float16", "bfloat16": "bfloat16"}


@dataclass
class KernelExecResult:
    """The fields of KernelBench's KernelExecResult, filled as KernelBench fills them: times in milliseconds (its
    recorded results hold ms, whatever its field comment says), `runtime` and `ref_runtime` the mean of the timed
    calls to three significant figures, -1.0 where not measured; `runtime_stats` and `ref_runtime_stats` its keys
    (mean, std, min, max, num_trials, hardware, device) and kbench's (median_ms, iqr_ms, timer, samples_ms);
    `metadata` its keys (hardware, device, correctness_trials, compilation_error, runtime_error,
    correctness_issue, max_difference, excessive_speedup, ...) and kbench's (kbench_status, kbench_flags,
    kbench_message). `result`: kbench's own Result; `reward` its reward (Result.reward)."""

    compiled: bool = False
    correctness: bool = False
    metadata: dict = field(default_factory=dict)
    runtime: float = -1.0
    runtime_stats: dict = field(default_factory=dict)
    ref_runtime: float = -1.0
    ref_runtime_stats: dict = field(default_factory=dict)
    result: Result | None = None

    @property
    def reward(self) -> float:
        return reward(self)


_NOT_COMPILED = (Status.COMPILE_ERROR, Status.LOAD_ERROR)
_FAILED_RUNNING = (Status.RUNTIME_ERROR, Status.CRASHED, Status.TIMEOUT)


def eval_kernel_against_ref(original_model_src: str, custom_model_src: str, seed_num: int = 42,
                            num_correct_trials: int = 1, num_perf_trials: int = 10,
                            measure_performance: bool = False, timing_method: str = "cuda_event",
                            verbose: bool = False, build_dir: "os.PathLike | None" = None, device=None,
                            backend: str = "cuda", precision=None, check_for_excessive_speedup: bool = True,
                            excessive_speedup_threshold: float = 10) -> KernelExecResult:
    """KernelBench's `eval_kernel_against_ref`, judged by kbench: its keywords (an unknown one is a TypeError, an
    unknown backend, timing method or precision a ValueError), its result fields and units.

    `precision`: torch.float32 (default), torch.float16 or torch.bfloat16 (or KernelBench's "fp32", "fp16",
    "bf16"): floating inputs, init inputs and both models' parameters are cast to it, and float16/bfloat16 runs
    compare every output at KernelBench's tolerance for them (1e-2). `device`: an index, "cuda:N" or a
    torch.device (default: the first GPU, else the CPU). `build_dir`: kbench's build cache for this call.
    `num_perf_trials`: the fewest timed calls of each side (kbench samples on until its medians are precise or
    its time budget is spent). `timing_method`: checked, not used (kbench times both sides alike, on its own
    clock around batches of calls). `backend`: checked; kbench judges any backend's Python file alike (tilelang needs float16 or
    bfloat16, as in KernelBench; hip needs an AMD GPU, which kbench does not drive).

    kbench's checks are stricter than KernelBench's: true float32 (TF32 off), a float64 truth where the candidate
    and the reference disagree, a parameter sweep, fresh inputs while timing, the candidate in a process of its
    own. A `correct` result with a noting flag is correct here too (flags in `metadata["kbench_flags"]`). Calls
    share one warm judge (warm_judge): the first pays its start-up, later ones do not."""
    precision_name = _precision_name(precision)
    _check_backend(backend, precision_name)
    if timing_method not in TIMING_METHODS:
        raise ValueError(f"Unsupported timing method: {timing_method}")
    defaults = RunConfig()
    name = _device_name(device)
    config = RunConfig(device=name, seed=seed_num, trials=max(1, num_correct_trials), time=measure_performance,
                       min_samples=max(1, num_perf_trials), max_samples=max(num_perf_trials, defaults.max_samples),
                       precision=precision_name, **({"cache_dir": Path(build_dir)} if build_dir else {}))
    result = judge(original_model_src, custom_model_src, config)
    outcome = kernel_exec_result(result, check_for_excessive_speedup, excessive_speedup_threshold)
    if verbose:
        print(f"[Eval] kbench: {result.status}{': ' + result.message if result.message else ''} "
              f"(compiled {outcome.compiled}, correctness {outcome.correctness}, runtime {outcome.runtime} ms, "
              f"ref_runtime {outcome.ref_runtime} ms)", flush=True)
    return outcome


def kernel_exec_result(result: Result, check_for_excessive_speedup: bool = True,
                       excessive_speedup_threshold: float = 10) -> KernelExecResult:
    """KernelBench's fields for a kbench Result."""
    outcome = KernelExecResult(compiled=result.status not in _NOT_COMPILED,
                               correctness=result.status == Status.CORRECT, metadata=_metadata(result),
                               result=result)
    if result.status != Status.CORRECT or not (result.candidate_timing and result.reference_timing):
        return outcome
    environment = {"hardware": result.device_name, "device": result.device}
    outcome = replace(outcome, runtime=_mean_ms(result.candidate_timing),
                      runtime_stats=_stats(result.candidate_timing, environment),
                      ref_runtime=_mean_ms(result.reference_timing),
                      ref_runtime_stats=_stats(result.reference_timing, environment))
    # KernelBench's guard, on its own numbers: the reference's mean over the candidate's.
    if check_for_excessive_speedup and outcome.runtime > 0 and \
            outcome.ref_runtime / outcome.runtime > excessive_speedup_threshold:
        outcome.metadata["excessive_speedup"] = True
    return outcome


def reward(result: "Result | KernelExecResult") -> float:
    """One number per result for a training loop: Result.reward (the judge's speedup when the verdict is
    `correct`, 1.0 if it was not timed, else 0.0), of a Result or of eval_kernel_against_ref's result."""
    if isinstance(result, KernelExecResult):
        return result.result.reward if result.result is not None else 0.0
    return result.reward


def _metadata(result: Result) -> dict:
    """KernelBench's metadata keys for what kbench found, and kbench's own beside them."""
    metadata = {"hardware": result.device_name, "device": result.device}
    status, message = result.status, result.message or result.status
    if result.check is not None:
        metadata["correctness_trials"] = f"({result.check.trials_passed} / {result.check.trials_total})"
    if status in _NOT_COMPILED:
        metadata["compilation_error_name"] = f"kbench.{status}"
        metadata["compilation_error"] = message
    elif status in _FAILED_RUNNING:
        metadata["runtime_error_name"] = f"kbench.{status}"
        metadata["runtime_error"] = message
    elif status in (Status.INCORRECT, Status.REJECTED):
        mismatch = result.check.first_mismatch if result.check is not None else None
        metadata["correctness_issue"] = mismatch or message
        metadata["correctness_issue_name"] = f"kbench.{status}"
        if result.check is not None and result.check.max_abs_err is not None:
            metadata["max_difference"] = [f"{result.check.max_abs_err:.6f}"]
    metadata.update(kbench_status=status, kbench_flags=list(result.flags))
    if result.message:
        metadata["kbench_message"] = result.message
    return metadata


def _precision_name(precision) -> str:
    """kbench's name for KernelBench's `precision` (a torch.dtype or its string); ValueError for another."""
    if precision is None:
        return "float32"
    name = _PRECISION_NAMES.get(str(precision).removeprefix("torch."))
    if name is None:
        raise ValueError(f"Invalid precision not supported: {precision}")
    return name


def _check_backend(backend: str, precision: str) -> None:
    lower = str(backend).lower()
    if lower not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; KernelBench's are {', '.join(BACKENDS)}")
    if lower == "hip":
        raise ValueError("HIP backend requires AMD GPU, which kbench does not judge on")
    if lower == "tilelang" and precision not in ("float16", "bfloat16"):
        raise ValueError("TileLang only supports fp16 or bfloat16")


def _device_name(device) -> str:
    if device is None:
        return "auto"
    if isinstance(device, int):
        return f"cuda:{device}"
    name = str(device)
    return "cuda:0" if name == "cuda" else name


def _three_figures(value: float) -> float:
    """As KernelBench's get_timing_stats rounds every figure."""
    return float(f"{value:.3g}")


def _mean_ms(timing) -> float:
    import statistics

    return _three_figures(statistics.fmean(timing.samples_ms))


def _stats(timing, environment: dict) -> dict:
    """KernelBench's runtime_stats keys, in ms to three figures, then kbench's median and spread (full precision)."""
    import statistics

    samples = timing.samples_ms
    return {"mean": _mean_ms(timing), "std": _three_figures(statistics.pstdev(samples)),
            "min": _three_figures(min(samples)), "max": _three_figures(max(samples)), "num_trials": len(samples),
            **environment, "median_ms": timing.median_ms, "iqr_ms": timing.iqr_ms, "timer": timing.timer,
            "samples_ms": list(samples)}
