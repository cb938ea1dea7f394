"""Why does a multi-kernel call read slower in a runner than in one process? Judge (parent) and runner (child)
processes on one GPU; modes say who flushes L2 and where the input lives."""
import statistics, sys, time
import torch, torch.multiprocessing as mp

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False

def model_and_input(dev):
    torch.manual_seed(0)
    m = torch.nn.Sequential()
    norm, up, down = torch.nn.LayerNorm(1024).to(dev), torch.nn.Linear(1024, 1024).to(dev), torch.nn.Linear(1024, 1024).to(dev)
    f = lambda x: x + down(torch.nn.functional.gelu(up(norm(x))))
    return f, torch.randn(8192, 1024, device=dev)

def runner(conn, shared_x):
    torch.backends.cuda.matmul.allow_tf32 = False
    dev = torch.device("cuda")
    f, local_x = model_and_input(dev)
    flush = torch.empty(2 * torch.cuda.get_device_properties(dev).L2_cache_size, dtype=torch.int8, device=dev)
    with torch.no_grad():
        for _ in range(5): f(local_x)
        torch.cuda.synchronize()
        while True:
            msg = conn.recv()
            if msg is None: break
            own_flush, spin, ipc, profile = msg
            x = shared_x if ipc else local_x
            if own_flush: flush.zero_()
            if spin: torch.cuda._sleep(spin)
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            if profile:
                from torch.profiler import profile as P, ProfilerActivity
                with P(activities=[ProfilerActivity.CUDA]) as prof:
                    s.record(); f(x); e.record(); torch.cuda.synchronize()
                ks = [(ev.name, ev.device_time) for ev in prof.events() if ev.device_time > 0]
                conn.send((s.elapsed_time(e), ks))
            else:
                s.record(); f(x); e.record(); torch.cuda.synchronize()
                conn.send((s.elapsed_time(e), None))

def main():
    mp.set_start_method("spawn")
    dev = torch.device("cuda")
    x = torch.randn(8192, 1024, device=dev)
    flush = torch.empty(2 * torch.cuda.get_device_properties(dev).L2_cache_size, dtype=torch.int8, device=dev)
    a, b = mp.Pipe()
    p = mp.Process(target=runner, args=(b, x)); p.start()
    # the same in one process
    f, lx = model_and_input(dev)
    with torch.no_grad():
        for _ in range(5): f(lx)
        one = []
        for _ in range(40):
            flush.zero_(); s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record(); f(lx); e.record(); torch.cuda.synchronize(); one.append(s.elapsed_time(e))
        one_idle = []
        for _ in range(40):
            flush.zero_(); torch.cuda.synchronize(); time.sleep(0.002)
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record(); f(lx); e.record(); torch.cuda.synchronize(); one_idle.append(s.elapsed_time(e))
    print(f"one process, flush in stream           {statistics.median(one):.4f} ms")
    print(f"one process, flush+sync+2ms idle        {statistics.median(one_idle):.4f} ms")
    modes = [("runner flushes itself", 1, 0, 0), ("judge flushes", 0, 0, 0), ("judge flushes, spin 200k", 0, 200_000, 0),
             ("judge flushes, spin 2M", 0, 2_000_000, 0), ("judge flushes, ipc input", 0, 0, 1),
             ("runner flushes, ipc input", 1, 0, 1), ("no flush at all", 0, 0, 0)]
    for rep in range(2):
        for name, own, spin, ipc in modes:
            ms = []
            for _ in range(40):
                if not own and name != "no flush at all":
                    flush.zero_(); torch.cuda.synchronize()
                a.send((own, spin, ipc, 0)); ms.append(a.recv()[0])
            print(f"rep{rep} {name:36s} {statistics.median(ms):.4f} ms")
    for own in (1, 0):
        flush.zero_(); torch.cuda.synchronize()
        a.send((own, 0, 0, 1)); ev, ks = a.recv()
        print(f"profiled (runner flush={own}): events {ev:.4f} ms, kernels sum {sum(t for _, t in ks)/1e3:.4f} ms")
        for n, t in ks: print(f"   {t:9.1f} us  {n[:90]}")
    a.send(None); p.join()

if __name__ == "__main__":
    main()
