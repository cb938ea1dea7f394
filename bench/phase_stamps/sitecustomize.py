"""Each timed batch's phases, judge and runner, stamped (GPU or CPU; a diagnostic, not part of kbench):

    mkdir /tmp/ph && KBENCH_PHASES_OUT=/tmp/ph PYTHONPATH=$PWD:$PWD/bench/phase_stamps \
        python3 bench/alone_vs_loop.py relu_medium sum_rows --pairs 1
    python3 bench/phase_stamps/report.py /tmp/ph

Imported at every Python start on this path (the judge's fork server, the judge, the runners), it does nothing
unless KBENCH_PHASES_OUT names a folder. Then it patches, as each module is imported, the runner's Ring.batch (its
own perf_counter stamps, CPU time, context switches, affinity and threads, sent back in its reply: perf_counter is
CLOCK_MONOTONIC, one clock for both processes) and wraps the judge's RemoteModel.run_batch and what it calls (the
reply's parse, the copies' launch, the synchronisation), appending one line per batch of 8 calls or more to a file
per judge process. KBENCH_PHASES_NOPIN=1 also leaves the processes unpinned while they are timed
(measure.on_one_cpu)."""
import gc
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
    """Wraps what RemoteModel.run_batch calls, in order: the runner's reply is parsed (remote._parsed), copied
    (_held_copies or _ring_copies), the device synchronised (remote.synchronize), the handles closed."""
    out = os.environ["KBENCH_PHASES_OUT"]
    stamps = {}
    original_run, original_parsed, original_sync = remote.RemoteModel.run_batch, remote._parsed, remote.synchronize
    original_copies = {name: getattr(remote.RemoteModel, name) for name in ("_held_copies", "_ring_copies")}

    def _parsed(data):
        stamps.update(replied=time.perf_counter(), judge_cpu=time.process_time() - stamps.get("cpu0", 0.0),
                      runner=data.get("phases", {}) if isinstance(data, dict) else {})
        reply = original_parsed(data)
        stamps["parsed"] = time.perf_counter()
        return reply

    def copies(name):
        def copied(self, *arguments, **options):
            result = original_copies[name](self, *arguments, **options)
            stamps["copies"] = time.perf_counter()
            return result
        return copied

    def synchronize(device):
        original_sync(device)
        stamps.setdefault("synced", time.perf_counter())

    collections = []  # the judge's cyclic collections during this batch: (generation, seconds)

    def collected(phase, info):
        if phase == "start":
            stamps["gc0"] = time.perf_counter()
        elif "gc0" in stamps and "start" in stamps:
            collections.append((info["generation"], time.perf_counter() - stamps.pop("gc0")))
    gc.callbacks.append(collected)

    def run_batch(self, count, precision=None, kept=False, hold=False, into=0):
        stamps.clear()
        collections.clear()
        stamps.update(cpu0=time.process_time(), start=time.perf_counter())
        outputs = original_run(self, count, precision=precision, kept=kept, hold=hold, into=into)
        end = time.perf_counter()
        if count >= 8:
            judge = [stamps["start"], stamps["replied"], stamps["parsed"], stamps.get("copies", stamps["parsed"]),
                     stamps["synced"], end]
            with open(os.path.join(out, f"phases-{os.getpid()}.txt"), "a") as file:
                file.write(repr({"ref": self.of_reference, "count": count, "kept": kept, "hold": hold,
                                 "judge": judge, "judge_cpu": stamps["judge_cpu"], "runner": stamps["runner"],
                                 "collections": list(collections)}) + "\n")
        return outputs

    remote._parsed, remote.synchronize, remote.RemoteModel.run_batch = _parsed, synchronize, run_batch
    for name in original_copies:
        setattr(remote.RemoteModel, name, copies(name))


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
