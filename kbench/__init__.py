"""kbench: judge GPU kernels against PyTorch references.

From Python: `Judge` (a warm judge for batches), `judge` (one pair, on the process's warm judge), `read_results`
and `results_frame` (DataFrames), in kbench/api.py; `eval_kernel_against_ref` and `KernelExecResult` (KernelBench's
entry point and result) and `reward` (one number per result for a training loop), in kbench/kernelbench_entry.py;
`Result`, `Status` and `RunConfig` (the records).
"""

__version__ = "0.1.0"

__all__ = ["Judge", "judge", "eval_kernel_against_ref", "KernelExecResult", "reward", "Result", "Status",
           "RunConfig", "read_results", "results_frame"]
_HOMES = {"Result": "kbench.results", "Status": "kbench.results", "RunConfig": "kbench.config",
          "eval_kernel_against_ref": "kbench.kernelbench_entry", "KernelExecResult": "kbench.kernelbench_entry",
          "reward": "kbench.kernelbench_entry"}


def __getattr__(name: str):
    """The API, imported on first use: `import kbench` stays light for the CLI and the worker processes."""
    if name in __all__:
        import importlib
        return getattr(importlib.import_module(_HOMES.get(name, "kbench.api")), name)
    raise AttributeError(f"module 'kbench' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
