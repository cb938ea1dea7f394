"""Building candidates' extensions: the cache, compile slots, compiler wrappers, precompiled torch headers."""

from __future__ import annotations

import sys


def import_extension_builder():
    """torch.utils.cpp_extension, imported without touching CUDA's driver or NVML.

    Its import asks torch.cuda.is_available(), only to warn when CUDA_HOME has no runtime beside it. Asking
    initialises CUDA's driver (or, with PYTORCH_NVML_BASED_CUDA_CHECK, NVML), which starts a thread; and a
    process forked after the driver's initialisation cannot use CUDA. kbench imports it in processes that fork
    judges and runners, and in the candidate's runner before it confines itself, while it must be its only
    thread: the question is answered here, without asking anyone.
    """
    if "torch.utils.cpp_extension" not in sys.modules:
        import torch

        asks = torch.cuda.is_available
        torch.cuda.is_available = lambda: True
        try:
            import torch.utils.cpp_extension  # noqa: F401
        finally:
            torch.cuda.is_available = asks
    return sys.modules["torch.utils.cpp_extension"]
