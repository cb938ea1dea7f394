"""Each timed batch's phases, judge and runner, stamped (GPU or CPU; a diagnostic, not part of kbench):

    mkdir /tmp/ph && KBENCH_PHASES_OUT=/tmp/ph PYTHONPATH=$PWD:$PWD/bench/phase_stamps \
        python3 bench/alone_vs_loop.py relu_medium sum_rows --pairs 1
    python3 bench/phase_stamps/report.py /tmp/ph

Imported at every Python start on this path (the judge's fork server, the judge, the runners), it does nothing
unless KBENCH_PHASES_OUT names a folder. Then it patches, as each module is imported, the runner's Ring.batch (its
own perf_counter stamps, CPU time, context switches, affinity and threads, sent back in its reply: perf_counter is
CLOCK_MONOTONIC, one clock for both processes) and the judge's RemoteModel.run_batch (the request, the reply, its
parse, the copies' launch, the synchronisation), which appends one line per batch of 8 calls or more to a file per
judge process. KBENCH_PHASES_NOPIN=1 also leaves the processes unpinned while they are timed (measure.on_one_cpu)."""
import importlib.abc
import importlib.util
import os
import sys
import time


def _switches() -> int:
    with open("/proc/self/status") as status:
        return sum(int(line.split()[1]) for line in status if "ctxt_switches" in line)


def _patch_runner(batches) -> None:
    original_batch, original_named, original_sync = batches.Ring.batch, batches.Ring._named, batches.synchronize
    stamps = {}

    def queued() -> None:  # the batch's calls are all queued: what the runner's own thread spent on them
        if "cpu1" not in stamps:
            stamps.update(named0=time.perf_counter(), cpu1=time.thread_time(), pcpu1=time.process_time(),
                          sw1=_switches(), affinity=len(os.sched_getaffinity(0)),
                          threads=len(os.listdir("/proc/self/task")))

    def synchronize(device):
        queued()
        stamps["sync0"] = time.perf_counter()
        original_sync(device)
        stamps["sync1"] = time.perf_counter()

    def _named(self):
        queued()
        result = original_named(self)
        stamps["named1"] = time.perf_counter()
        return result

    def batch(self, model, message, device):
        stamps.clear()
        stamps.update(cpu0=time.thread_time(), pcpu0=time.process_time(), sw0=_switches())
        stamps["start"] = time.perf_counter()
        reply = original_batch(self, model, message, device)
        stamps["end"] = time.perf_counter()
        if isinstance(reply, dict):
            reply["phases"] = dict(stamps)
        return reply

    batches.synchronize, batches.Ring._named, batches.Ring.batch = synchronize, _named, batch


def _patch_judge(remote) -> None:
    from kbench.loading import synchronize
    out = os.environ["KBENCH_PHASES_OUT"]

    def run_batch(self, count, precision=None, kept=False, hold=False, into=0):
        judge_cpu, t0 = time.process_time(), time.perf_counter()
        message = {"op": "batch", "instance": self.instance, "count": count}
        message.update({name: value for name, value in (("precision", precision), ("kept", kept), ("hold", hold))
                        if value})
        raw = self._reply(self.runner.request(message))
        t1 = time.perf_counter()
        judge_cpu = time.process_time() - judge_cpu
        reply = remote._parsed(raw)
        t2 = time.perf_counter()
        self.last = reply
        if hold and count:
            rings = self._held_copies(reply, count, shared=kept, into=into)
        else:
            rings = self._ring_copies(reply, count, into) if count else []
        t3 = time.perf_counter()
        outputs = remote.BatchOutputs(rings, reply.sequence, t1)
        synchronize(self.runner.device)
        t4 = time.perf_counter()
        if hold:
            self.imports.close_unused()
        t5 = time.perf_counter()
        if count >= 8:
            with open(os.path.join(out, f"phases-{os.getpid()}.txt"), "a") as stamps:
                stamps.write(repr({"ref": self.of_reference, "count": count, "kept": kept, "hold": hold,
                                   "judge": [t0, t1, t2, t3, t4, t5], "judge_cpu": judge_cpu,
                                   "runner": raw.get("phases", {})}) + "\n")
        return outputs

    remote.RemoteModel.run_batch = run_batch


def _patch_measure(measure) -> None:
    if os.environ.get("KBENCH_PHASES_NOPIN"):
        import contextlib

        @contextlib.contextmanager
        def on_one_cpu(pids):
            yield None
        measure.on_one_cpu = on_one_cpu


class _Patcher(importlib.abc.MetaPathFinder):
    """Runs a patch on a module right after it is first executed."""
    patches = {"kbench.runner.batches": _patch_runner, "kbench.judge.remote": _patch_judge,
               "kbench.judge.measure": _patch_measure}

    def find_spec(self, name, path, target=None):
        if name not in self.patches:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        execute, patch = spec.loader.exec_module, self.patches[name]

        def exec_module(module):
            execute(module)
            patch(module)
        spec.loader.exec_module = exec_module
        return spec


if os.environ.get("KBENCH_PHASES_OUT"):
    sys.meta_path.insert(0, _Patcher())
