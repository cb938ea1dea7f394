"""Kernel attribution (kbench.runner.kernels): library work, the caller's own kernels, decoys.

The attribution rules run here on synthetic profiler events; on a GPU the same rules run on real
profiles of fixtures (a decoy, an honest kernel, the reference's own op, plain PyTorch).
"""

from __future__ import annotations

import pytest
import torch

from kbench.runner import kernels
from kbench.runner.kernels import Event, KernelReport, Launch

from conftest import FIXTURES, PROBLEMS


def op(name: str, correlation: int, start: int, end: int, thread: int = 1) -> Event:
    return Event(name, False, correlation, 0, start, end, thread, "cpu_op")


def kernel(name: str, linked: int, duration_ns: int, kind: str = "kernel") -> Event:
    return Event(name, True, 900 + linked, linked, 10_000, 10_000 + duration_ns, 0, kind)


def test_a_kernel_under_an_aten_op_is_library_work_named_by_the_outermost_op():
    events = [op("aten::conv_transpose1d", 1, 0, 100), op("aten::convolution", 2, 5, 95),
              op("aten::cudnn_convolution_transpose", 3, 10, 90), op("cudaLaunchKernel", 4, 20, 30),
              kernel("sm90_xmma_dgrad", 3, 5000), kernel("Memcpy DtoD (Device -> Device)", 3, 100, "gpu_memcpy")]
    report = kernels.classify(events)
    assert report.launches == (Launch("sm90_xmma_dgrad", 5.0, "aten::conv_transpose1d"),)
    message = kernels.message(report)
    assert message.startswith("launched no GPU kernel of its own") and "aten::conv_transpose1d (1)" in message


def test_a_kernel_under_no_aten_op_is_the_caller_s_own():
    events = [op("aten::empty", 1, 0, 10), op("myext::convt1d", 2, 20, 80), op("aten::mm", 3, 100, 200),
              kernel("convt1d_gather_kernel", 0, 4000), kernel("fused_kernel", 2, 1000), kernel("gemm", 3, 3000)]
    report = kernels.classify(events)
    assert [launch.library_op for launch in report.launches] == [None, None, "aten::mm"]
    assert report.own_share == pytest.approx(5 / 8)
    assert kernels.message(report) is None


def test_a_runtime_call_with_the_same_id_as_an_op_is_not_that_op():
    runtime_call = Event("cudaLaunchKernel", False, 2, 1, 50, 60, 1, "cuda_runtime")  # launched by aten::mm
    events = [op("aten::mm", 1, 0, 100), op("myext::run", 2, 400, 600), runtime_call, kernel("own_kernel", 2, 1000)]
    assert kernels.classify(events).launches[0].library_op is None


def test_ops_on_another_thread_do_not_enclose_a_launch():
    events = [op("aten::add", 1, 0, 1000, thread=2), op("record_function", 2, 10, 20, thread=1),
              kernel("own_kernel", 2, 1000)]
    assert kernels.classify(events).launches[0].library_op is None


def test_a_token_kernel_beside_library_work_is_still_library_only():
    events = [op("aten::matmul", 1, 0, 100), kernel("gemm", 1, 990_000), kernel("noop_kernel", 0, 1000)]
    message = kernels.message(kernels.classify(events))
    assert message and "noop_kernel" in message and "0.1%" in message and "aten::matmul (1)" in message


def test_nothing_to_judge_says_nothing():
    assert kernels.message(None) is None
    assert kernels.message(KernelReport(())) is None
    assert kernels.message(kernels.classify([op("aten::view", 1, 0, 10)])) is None


def test_without_a_gpu_it_cannot_tell():
    if torch.cuda.is_available():
        pytest.skip("has a CUDA device")
    assert kernels.library_only_message(lambda: torch.ones(4) * 2) is None


CHEATS = FIXTURES / "cheats"
CONVT = CHEATS / "problems" / "convt1d_small.py"


@pytest.fixture(scope="module")
def prebuilt(gpu_cache_dir):
    """load_inline in this process builds into the GPU tests' cache (where conftest built the fixtures),
    through the workers' compiler wrappers (other compiler commands would make ninja build again)."""
    import os

    import torch.utils.cpp_extension as cpp_extension

    from kbench.extensions import wrappers
    from kbench.extensions.cache import BuildRecord, install_build_hooks, versions_tag

    real = {name: getattr(cpp_extension, name) for name in ("load_inline", "load")}
    environment = {name: os.environ.get(name) for name in ("CXX", "PYTORCH_NVCC")}
    install_build_hooks(gpu_cache_dir / "extensions" / versions_tag() / "in-process", BuildRecord())
    wrappers.install_compiler_wrappers(gpu_cache_dir / "compilers" / versions_tag(), gpu_cache_dir / "pch" / versions_tag())
    yield
    for name, function in real.items():
        setattr(cpp_extension, name, function)
    for name, value in environment.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def _forward_of(solution, problem, device="cuda"):
    from kbench.problem import load_module

    problem_module = load_module(problem, "kbench_problem")
    solution_module = load_module(solution, "kbench_solution")
    torch.manual_seed(0)
    model = solution_module.ModelNew(*problem_module.get_init_inputs()).to(device)
    with torch.device(device):
        inputs = problem_module.get_inputs()
    with torch.no_grad():
        model(*inputs)  # warm: lazy initialisation is not the call's work
        torch.cuda.synchronize()
    return lambda: model(*inputs)


@pytest.mark.gpu
@pytest.mark.parametrize("solution, problem, expected", [
    ("decoy_cuda.py", CONVT, "launched no GPU kernel of its own"),
    ("library_op.py", CONVT, "aten::conv_transpose1d"),
    ("honest_weight_cache.py", CONVT, "launched no GPU kernel of its own"),
    ("honest_cuda_kernel.py", CONVT, None),
    ("honest_two_streams.py", PROBLEMS / "axpy.py", None),
    ("honest_fast_cuda.py", CHEATS / "problems" / "elementwise_chain.py", None),
])
def test_gpu_kernels_are_attributed(prebuilt, solution, problem, expected):
    call = _forward_of(CHEATS / solution, problem)
    with torch.no_grad():
        report = kernels.profile_kernels(call)
        message = kernels.library_only_message(call)
    assert report is not None and report.launches, "the profiler recorded no kernel"
    print(solution, [(launch.name[:60], launch.library_op) for launch in report.launches])
    if expected is None:
        assert message is None, message
    else:
        assert message and expected in message, message
