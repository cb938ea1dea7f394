"""RunConfig: every setting of one evaluation, frozen so a job description is a plain value."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

# Default tolerances by output dtype name (atol = rtol); integer and bool outputs must match exactly.
DEFAULT_TOLERANCE = {"float32": 1e-4, "float64": 1e-7, "float16": 1e-2, "bfloat16": 1e-2}

# Precision policies: what the reference runs under when it is checked against and timed for the main
# speedup. strict-fp32: true float32, no TF32 anywhere (the default). pytorch-default: PyTorch's
# out-of-the-box settings (cuDNN may use TF32 for float32 convolutions).
STRICT_FP32 = "strict-fp32"
PYTORCH_DEFAULT = "pytorch-default"
POLICIES = (STRICT_FP32, PYTORCH_DEFAULT)
# TF32 keeps 10 mantissa bits (unit roundoff ~5e-4), so a TF32 reference and a true-float32 candidate
# differ by ~1e-3 after accumulation: float32 outputs get a tolerance to match under pytorch-default.
POLICY_FLOAT32_TOLERANCE = {STRICT_FP32: 1e-4, PYTORCH_DEFAULT: 1e-2}

# Precisions a run can be judged at (KernelBench's `precision`): the floating inputs, init inputs and both models'
# parameters are cast to it, as KernelBench casts them. Below float32, every floating output gets KernelBench's
# tolerance for the precision (its get_tolerance_for_precision), whatever the output's own dtype.
PRECISIONS = ("float32", "float16", "bfloat16")
PRECISION_TOLERANCE = {"float16": 1e-2, "bfloat16": 1e-2}


def default_cache_dir() -> Path:
    """The user's cache dir (XDG), overridable with KBENCH_CACHE_DIR."""
    if os.environ.get("KBENCH_CACHE_DIR"):
        return Path(os.environ["KBENCH_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "kbench"


@dataclass(frozen=True)
class RunConfig:
    device: str = "auto"            # "auto" (CUDA if present), "cpu", "cuda" or "cuda:N"
    trials: int = 5                 # correctness trials, each with fresh seeded inputs
    seed: int = 42                  # base seed: models are built under it, trial i uses seed + i
    atol: float | None = None       # absolute tolerance; None: DEFAULT_TOLERANCE by dtype
    rtol: float | None = None       # relative tolerance; None: DEFAULT_TOLERANCE by dtype
    timeout_s: float | None = None  # run limit of one evaluation, its builds not counted; None: derived from the
                                    # reference's time (judge/progress.py derived_run_limit)
    build_timeout_s: float = 600.0  # build limit: a build phase, or the builds inside an evaluation
    call_timeout_s: float = 60.0    # a request to the candidate's runner ends the run (timeout) after this long, or
                                    # 1000x the reference's time for the calls it asks for if longer; 0: no limit
    cache_dir: Path = field(default_factory=default_cache_dir)  # builds and logs live here
    time: bool = True               # time correct candidates against the reference
    warmup: int = 3                 # untimed calls of each model before sampling
    min_samples: int = 10           # samples of each model before the stop rule may end timing
    max_samples: int = 500          # hard cap on samples of each model
    target_rse: float = 0.01        # stop when every side's median has this relative standard error
    time_budget_s: float = 10.0     # stop sampling after this many seconds regardless
    policy: str = STRICT_FP32       # precision policy of the check and the timed reference
    sweep: int = 8                  # random parameter configurations checked after the official one
    strict: bool = False            # a sweep failure makes the verdict `incorrect` (else: a flag)
    full_size: bool = False         # on a CPU device, run official sizes instead of reduced ones
    guards: bool = True             # anti-cheat checks that cost time (see guards.py); cheap ones always run
    baselines: tuple[str, ...] = ("default",)  # also timed: "default" (PyTorch's precision), "compile"
    precision: str = "float32"      # dtype the inputs and models are cast to (see PRECISIONS)

    def __post_init__(self):
        if self.policy not in POLICIES:
            raise ValueError(f"unknown precision policy {self.policy!r}; choose from {', '.join(POLICIES)}")
        if self.precision not in PRECISIONS:
            raise ValueError(f"unknown precision {self.precision!r}; choose from {', '.join(PRECISIONS)}")

    def tolerance_for(self, dtype_name: str) -> tuple[float, float]:
        """(atol, rtol) for an output dtype: user overrides win over the per-dtype defaults."""
        if not (dtype_name.startswith("float") or dtype_name.startswith("bfloat")
                or dtype_name.startswith("complex")):
            return 0.0, 0.0
        if self.precision in PRECISION_TOLERANCE:
            default = PRECISION_TOLERANCE[self.precision]
        else:
            default = POLICY_FLOAT32_TOLERANCE[self.policy] if dtype_name == "float32" else \
                DEFAULT_TOLERANCE.get(dtype_name, 1e-4)
        atol = default if self.atol is None else self.atol
        rtol = default if self.rtol is None else self.rtol
        return atol, rtol

    def fingerprint(self, device: str) -> str:
        """Short hash of the settings that change a verdict or a timing (not paths or time limits)."""
        import hashlib
        import json

        relevant = {key: value for key, value in self.to_dict().items()
                    if key not in ("cache_dir", "timeout_s", "build_timeout_s", "call_timeout_s", "device")}
        relevant["device_kind"] = device.split(":")[0]
        if self.precision == "float32":  # the default leaves the hash of every earlier run's settings as it was
            del relevant["precision"]
        return hashlib.sha256(json.dumps(relevant, sort_keys=True).encode()).hexdigest()[:12]

    def to_dict(self) -> dict:
        data = asdict(self)
        data["cache_dir"] = str(self.cache_dir)
        data["baselines"] = list(self.baselines)
        return data

    @classmethod
    def from_dict(cls, data: dict) -> "RunConfig":
        return cls(**{**data, "cache_dir": Path(data["cache_dir"]), "baselines": tuple(data.get("baselines", ()))})
