"""bench/timing_fidelity.py's readers of profiler traces and ncu reports, on hand-written input.

The GPU path cannot run here; these pin down what it counts: device work launched inside a call's
range (not the L2 flush launched before it), and ncu kernels split into calls by the marker kernel.
"""

from pathlib import Path

import pytest

from kbench.problem import load_module

SCRIPT = Path(__file__).parent.parent / "bench" / "timing_fidelity.py"


@pytest.fixture(scope="module")
def fidelity():
    return load_module(SCRIPT, "timing_fidelity")


def launch(ts, correlation):
    return {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": ts, "dur": 2,
            "args": {"correlation": correlation}}


def kernel(name, ts, dur, **args):
    return {"ph": "X", "cat": "kernel", "name": name, "ts": ts, "dur": dur, "args": args}


def call_range(fidelity, ts, dur):
    return {"ph": "X", "cat": "user_annotation", "name": fidelity.CALL_RANGE, "ts": ts, "dur": dur,
            "args": {"External id": 900 + ts}}


def test_device_work_counts_what_the_call_launched_and_not_the_flush(fidelity):
    events = [
        launch(5, correlation=1), kernel("flush", 12, 30, correlation=1),        # runs inside the range on the GPU
        call_range(fidelity, 10, 20),
        launch(11, correlation=2), kernel("relu", 42, 5, correlation=2),
        launch(14, correlation=3), {"ph": "X", "cat": "gpu_memset", "name": "Memset", "ts": 47, "dur": 1,
                                    "args": {"correlation": 3}},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 16, "dur": 3, "args": {"External id": 7}},
        kernel("gemm", 48, 10, correlation=4, **{"External id": 7}),            # no launch record: via its op
        kernel("orphan", 60, 1, correlation=5),                                 # matches nothing
        {"ph": "X", "cat": "gpu_user_annotation", "name": fidelity.CALL_RANGE, "ts": 42, "dur": 16, "args": {}},
        call_range(fidelity, 100, 20),
        launch(101, correlation=6), kernel("relu", 130, 5, correlation=6),
    ]
    per_call, unplaced = fidelity.device_work_per_call(events)
    assert [[a["name"] for a in activities] for activities in per_call] == [["relu", "Memset", "gemm"], ["relu"]]
    assert unplaced == 1
    summary = fidelity.summarise(per_call, busy=fidelity.summed_us)
    assert summary["profiler_ms"] == pytest.approx((16 + 5) / 2 / 1e3)    # median of 16 us and 5 us
    assert summary["profiler_span_ms"] == pytest.approx((16 + 5) / 2 / 1e3)
    assert summary["profiled_calls"] == 2


def test_a_call_without_device_work_is_an_error_not_a_zero(fidelity):
    events = [call_range(fidelity, 10, 20), call_range(fidelity, 100, 20),
              launch(101, correlation=1), kernel("relu", 130, 5, correlation=1)]
    per_call, _ = fidelity.device_work_per_call(events)
    with pytest.raises(RuntimeError, match="1 of 2 profiled calls show no activity"):
        fidelity.summarise(per_call, busy=fidelity.summed_us)


def test_cpu_op_time_counts_nested_ops_once(fidelity):
    events = [call_range(fidelity, 0, 100),
              {"ph": "X", "cat": "cpu_op", "name": "aten::linear", "ts": 10, "dur": 40, "args": {}},
              {"ph": "X", "cat": "cpu_op", "name": "aten::addmm", "ts": 20, "dur": 20, "args": {}},
              {"ph": "X", "cat": "cpu_op", "name": "aten::relu", "ts": 60, "dur": 10, "args": {}},
              {"ph": "X", "cat": "cpu_op", "name": "aten::zero_", "ts": 150, "dur": 10, "args": {}}]
    per_call = fidelity.cpu_ops_per_call(events)
    assert [a["name"] for a in per_call[0]] == ["aten::linear", "aten::addmm", "aten::relu"]
    assert fidelity.union_us(per_call[0]) == 50


NCU_REPORT = '''==PROF== Connected to process 4242 (/usr/bin/python3)
==PROF== Profiling "spin_kernel": 0%....50%....100% - 1 pass
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"
"0","4242","python3","host","at::cuda::(anonymous namespace)::spin_kernel(long)","1","7","(1, 1, 1)","(1, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","nsecond","1,504"
"1","4242","python3","host","void at::native::vectorized_elementwise_kernel<4>(int)","1","7","(128, 1, 1)","(4096, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","nsecond","5,120"
"2","4242","python3","host","void reduce_kernel<512>(int)","1","7","(512, 1, 1)","(132, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","nsecond","880"
"3","4242","python3","host","at::cuda::(anonymous namespace)::spin_kernel(long)","1","7","(1, 1, 1)","(1, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","nsecond","1,500"
"4","4242","python3","host","void at::native::vectorized_elementwise_kernel<4>(int)","1","7","(128, 1, 1)","(4096, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","usecond","6.5"
==PROF== Disconnected from process 4242
'''


def test_ncu_report_is_split_into_calls_at_the_marker_kernels(fidelity):
    kernels = fidelity.ncu_kernels(NCU_REPORT)
    assert len(kernels) == 5
    assert fidelity.ncu_calls(kernels) == pytest.approx([0.00512 + 0.00088, 0.0065])


def test_ncu_failure_message_is_ncus_own(fidelity):
    report = "==PROF== Connected\n==ERROR== ERR_NVGPUCTRPERM - The user does not have permission\n"
    assert fidelity.ncu_kernels(report) == []
    assert fidelity.ncu_message(report).startswith("==ERROR== ERR_NVGPUCTRPERM")


def test_targets(fidelity):
    assert fidelity.fidelity_target(0.5) == 0.02
    assert fidelity.fidelity_target(0.02) == 0.02
    assert fidelity.fidelity_target(0.005) is None
    assert fidelity.stability_target(2.0) == 0.005
    assert fidelity.stability_target(0.2) == 0.02
