"""kbench: judge GPU kernels against PyTorch references.

From Python (kbench/api.py): `Judge` (a warm judge for batches), `judge` (one pair), `eval_kernel_against_ref`
(KernelBench's entry point), `read_results` and `results_frame` (DataFrames).
"""

__version__ = "0.1.0"

_API = ("Judge", "judge", "eval_kernel_against_ref", "KernelExecResult", "read_results", "results_frame")


def __getattr__(name: str):
    """The API, imported on first use: `import kbench` stays light for the CLI and the worker processes."""
    if name in _API:
        from kbench import api
        return getattr(api, name)
    raise AttributeError(f"module 'kbench' has no attribute {name!r}")
