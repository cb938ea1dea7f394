"""Would a device gate take a runner's launches out of the judge's clock? (GPU; not built into kbench)

    PYTHONPATH=$PWD python3 bench/device_gate.py

A child process (the runner) queues N calls behind cuStreamWaitValue32 on a flag in the parent's memory (a CUDA IPC
mapping), says it has, then synchronises; the parent (the judge) opens the gate with cuStreamWriteValue32 on its own
stream and times until the child says it is done. Beside it, per call: the kernels' CUPTI time (torch.profiler), CUDA
events around N calls back to back in the child, and the parent's wall time of an ungated batch (request to done).
ReLU on 2**23 float32, a row sum of 4096x8192, a 4096x4096 matmul; milliseconds per call, median of 12 batches after
3 (the gate's fixed cost is not subtracted: it is spread over N)."""
import ctypes
import statistics
import time

import torch
import torch.multiprocessing as mp

WORKLOADS = [("relu", [1, 10, 100, 400, 1000]), ("sum", [1, 10, 100, 300]), ("matmul", [1, 4, 8])]
BATCHES, SKIPPED = 15, 3


def stream_value_ops():
    """libcuda's cuStreamWaitValue32 and cuStreamWriteValue32 (stream, address, value, flags), typed."""
    cuda = ctypes.CDLL("libcuda.so.1")

    def typed(*names):
        for name in names:
            function = getattr(cuda, name, None)
            if function is not None:
                function.restype = ctypes.c_int
                function.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_uint]
                return function
        raise RuntimeError(f"libcuda has none of {names}")
    return (typed("cuStreamWaitValue32_v2", "cuStreamWaitValue32"),
            typed("cuStreamWriteValue32_v2", "cuStreamWriteValue32"))


def make_call(kind: str):
    if kind == "relu":
        x = torch.randn(1 << 23, device="cuda")
        return lambda: torch.relu(x)
    if kind == "sum":
        x = torch.randn(4096, 8192, device="cuda")
        return lambda: x.sum(dim=1)
    a, b = torch.randn(4096, 4096, device="cuda"), torch.randn(4096, 4096, device="cuda")
    return lambda: a @ b


def runner(connection, flag: torch.Tensor, kind: str) -> None:
    """Answers (mode, value, calls): queues the calls (behind the gate with mode 'gated', between events with
    'events'), says 'queued', synchronises, says 'done' (with the events' milliseconds)."""
    wait, _ = stream_value_ops()
    call, stream = make_call(kind), torch.cuda.Stream()
    for _ in range(3):
        call()
    torch.cuda.synchronize()
    while (message := connection.recv()) is not None:
        mode, value, calls = message
        with torch.cuda.stream(stream):
            started = time.perf_counter()
            if mode == "gated" and wait(stream.cuda_stream, flag.data_ptr(), value, 0):  # 0: value >= flag
                raise RuntimeError("cuStreamWaitValue32 failed")
            if mode == "events":
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
            kept = [call() for _ in range(calls)]
            if mode == "events":
                end.record()
            connection.send(("queued", (time.perf_counter() - started) * 1e3))
            stream.synchronize()
            del kept
            connection.send(("done", start.elapsed_time(end) if mode == "events" else None))


def cupti_ms(kind: str, calls: int = 50) -> float:
    from torch.profiler import ProfilerActivity, profile
    call = make_call(kind)
    for _ in range(3):
        call()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as profiled:
        for _ in range(calls):
            call()
        torch.cuda.synchronize()
    return sum(event.device_time_total for event in profiled.key_averages() if event.device_time_total) / calls / 1e3


def timed_batch(connection, write, judge_stream, flag: torch.Tensor, mode: str, value: int, calls: int):
    """(ms for the batch: the parent's wall from the gate's opening, or from the request, or the child's events;
    the child's host ms queueing it)."""
    torch.cuda.synchronize()
    if mode == "gated":
        connection.send((mode, value, calls))
        _, queued_ms = connection.recv()
        started = time.perf_counter()
        write(judge_stream.cuda_stream, flag.data_ptr(), value, 0)
        connection.recv()
        return (time.perf_counter() - started) * 1e3, queued_ms
    started = time.perf_counter()
    connection.send((mode, value, calls))
    _, queued_ms = connection.recv()
    _, events_ms = connection.recv()
    return (events_ms if mode == "events" else (time.perf_counter() - started) * 1e3), queued_ms


def main() -> None:
    mp.set_start_method("spawn")
    _, write = stream_value_ops()
    for kind, counts in WORKLOADS:
        flag = torch.zeros(1, dtype=torch.int32, device="cuda")
        parent, child = mp.Pipe()
        process = mp.Process(target=runner, args=(child, flag, kind))
        process.start()
        judge_stream, value = torch.cuda.Stream(), 0
        print(f"== {kind}: CUPTI per call {cupti_ms(kind):.5f} ms", flush=True)
        for calls in counts:
            times = {"gated": [], "ungated": [], "events": []}
            queued = []
            for _ in range(BATCHES):
                for mode in times:
                    if mode == "gated":
                        value += 1  # a gate of its own: the flag only grows
                    ms, queued_ms = timed_batch(parent, write, judge_stream, flag, mode, value, calls)
                    times[mode].append(ms)
                    if mode == "gated":
                        queued.append(queued_ms)
            per_call = {mode: statistics.median(values[SKIPPED:]) / calls for mode, values in times.items()}
            print(f"{kind} n={calls:5d} gated {per_call['gated']:.5f} ungated-wall {per_call['ungated']:.5f} "
                  f"events {per_call['events']:.5f} ms/call; enqueue {statistics.median(queued):.3f} ms "
                  f"(max {max(queued):.3f})", flush=True)
        parent.send(None)
        process.join()


if __name__ == "__main__":
    main()
