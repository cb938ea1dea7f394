"""Building candidates' extensions: the cache, compile slots, precompiled torch headers."""

from __future__ import annotations

import os
import sys


def import_extension_builder():
    """torch.utils.cpp_extension, imported without initialising CUDA's driver.

    Its import asks torch.cuda.is_available(), which initialises the driver (cuInit): that starts a driver
    thread, and a process forked afterwards cannot use CUDA. kbench imports it in processes that fork judges
    and runners, and in the candidate's runner before it confines itself (while it must be its only thread).
    NVML answers the same question without the driver.
    """
    if "torch.utils.cpp_extension" in sys.modules:
        return sys.modules["torch.utils.cpp_extension"]
    before = os.environ.get("PYTORCH_NVML_BASED_CUDA_CHECK")
    os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"
    try:
        from torch.utils import cpp_extension
    finally:
        if before is None:
            del os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"]
        else:
            os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = before
    return cpp_extension
