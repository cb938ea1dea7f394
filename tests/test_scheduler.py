"""The order the scheduler starts builds in, compile slots, build priority."""

from __future__ import annotations

import socket
import subprocess

from kbench.schedule.scheduler import build_order

from conftest import PROBLEMS, REPO, SOLUTIONS, sharing_precompiled_headers


def holding_a_slot(address: str) -> socket.socket:
    """A connection to the slot server at `address` granted a slot, as a compile of this process (no build's, when
    it is not registered): closing it frees it."""
    holder = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    holder.connect(address)
    holder.sendall(b"c++ short\n")
    assert holder.recv(1) == b"1"
    return holder


# A compile that holds its slot until it is killed (argv[1]: the server's address).
HOLD_A_SLOT = ("import signal, socket, sys\nconnection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n"
               "connection.connect(sys.argv[1])\nconnection.sendall(b'c++ short')\nconnection.recv(1)\nsignal.pause()")


def compiler_of_build(server, rank: int, command: list[str], env: dict, share: int = 2) -> subprocess.Popen:
    """Starts `command` as a compile of the build of `rank`: through a gate process registered as the build's worker,
    which becomes the command once registered, as kbench registers a build's worker when it forks it."""
    gate = subprocess.Popen(["sh", "-c", 'read go; exec "$@"', "sh", *command], stdin=subprocess.PIPE,
                            env=dict(env, **server.environment()))
    server.register(gate.pid, rank, share)
    gate.stdin.write(b"go\n")
    gate.stdin.close()
    return gate


def test_cuda_builds_are_started_first():
    cpp = (PROBLEMS / "axpy.py", SOLUTIONS / "axpy" / "correct.py")
    cuda = (REPO / "problems" / "convt1d.py", REPO / "solutions" / "convt1d.py")
    assert build_order([cpp, cuda, cpp]) == [1, 0, 2]


def test_a_solution_built_once_skips_the_build_phase_next_time(cpu_config, tmp_path):
    from dataclasses import replace

    from kbench.results import Status
    from kbench.schedule.scheduler import needs_build_phase, run_pairs

    config = replace(cpu_config, time=False, sweep=0)
    extension = SOLUTIONS / "axpy" / "correct.py"
    plain = SOLUTIONS / "axpy" / "correct_plain.py"
    assert not needs_build_phase(plain, config)  # imports build nothing: straight to evaluation
    pairs = [(PROBLEMS / "axpy.py", extension), (PROBLEMS / "axpy.py", plain)]
    assert needs_build_phase(extension, replace(config, cache_dir=tmp_path))  # a new cache: no record yet
    first = run_pairs(pairs, config, devices=["cpu"])
    assert [result.status for result in first] == [Status.CORRECT, Status.CORRECT]
    assert not needs_build_phase(extension, config)
    built = []
    second = run_pairs(pairs, config, devices=["cpu"], on_built=built.append)
    assert [result.status for result in second] == [Status.CORRECT, Status.CORRECT]
    assert all(result.build_s is None for result in built)  # no build ran: nothing was timed


def test_compile_slots_go_by_rank_with_device_compiles_ahead(tmp_path):
    # Real wrappers and real processes: `sh -c` stands in for the compilers (it has the `-c` of a compile).
    import os
    import time

    from kbench.extensions.slots import LAST_RANK, SlotServer
    from kbench.extensions.wrappers import write_wrapper

    server = SlotServer(slots=1, lookahead=4)
    holder = holding_a_slot(server.address)  # a compile holding the only slot
    log = tmp_path / "order.txt"
    compilers = []
    for rank, kind in [(5, "c++"), (3, "c++"), (6, "nvcc")]:
        wrapper = tmp_path / "wrappers" / kind
        write_wrapper(wrapper, kind, "sh", str(REPO))
        compilers.append(compiler_of_build(server, rank, [str(wrapper), "-c", f"echo {kind}{rank} >> {log}"],
                                           dict(os.environ)))
        deadline = time.monotonic() + 30
        while server.waiting() < len(compilers) and time.monotonic() < deadline:
            time.sleep(0.02)
    assert server.waiting() == 3
    holder.close()  # its compiler ended: the slot goes to the queue, one compiler at a time
    assert [compiler.wait(timeout=60) for compiler in compilers] == [0, 0, 0]
    # The device compile of build 6 is served as if it were build 2, ahead of the host compiles of 3 and 5.
    assert log.read_text().split() == ["nvcc6", "c++3", "c++5"]
    # Its record of every compile (what sweep_bench prints): who asked, when each ran, in the same order. A
    # compiler's exit reaches the server as its connection closing, a moment after the process is gone.
    deadline = time.monotonic() + 30
    while any(entry.released_s is None for entry in server.history()) and time.monotonic() < deadline:
        time.sleep(0.02)
    history = server.history()
    assert [(entry.rank, entry.kind) for entry in history] == [(LAST_RANK, "c++"), (5, "c++"), (3, "c++"),
                                                                (6, "nvcc")]
    assert all(entry.queued_s <= entry.granted_s <= entry.released_s for entry in history)
    granted = sorted(history[1:], key=lambda entry: entry.granted_s)
    assert [(entry.rank, entry.kind) for entry in granted] == [(6, "nvcc"), (3, "c++"), (5, "c++")]
    server.close()


def test_a_host_compile_that_parses_all_of_torch_s_header_is_served_as_early_as_a_device_compile(tmp_path):
    """An optimised C++ file (no light header) with no precompiled header for its flags is long: it gets a device
    compile's place; one the light header serves is short. Real wrappers, a stand-in compiler that logs its turn."""
    import os
    import time

    from kbench.extensions import light
    from kbench.extensions.slots import SlotServer
    from kbench.extensions.wrappers import LIGHT_VARIABLE, write_wrapper

    include = tmp_path / "include" / "torch"
    include.mkdir(parents=True)
    (include / "extension.h").write_text("#pragma once\n")
    light.write_light_headers(tmp_path / "light", include / "extension.h")
    log = tmp_path / "order.txt"
    compiler = tmp_path / "compiler"
    compiler.write_text(f'#!/bin/sh\necho "$LABEL" >> {log}\n')
    compiler.chmod(0o755)
    source = tmp_path / "main.cpp"
    source.write_text("#include <torch/extension.h>\nint f() { return 1; }\n")
    server = SlotServer(slots=1, lookahead=4)
    holder = holding_a_slot(server.address)
    compilers = []
    for rank, kind, flags in [(3, "c++", []), (5, "c++", ["-O2"]), (6, "nvcc", [])]:
        wrapper = tmp_path / "wrappers" / kind
        write_wrapper(wrapper, kind, str(compiler), str(REPO),
                      {LIGHT_VARIABLE: str(light.folder_for(tmp_path / "light", kind))})
        arguments = ["-isystem", str(tmp_path / "include"), *flags, "-c", str(source), "-o", str(tmp_path / "x.o")]
        compilers.append(compiler_of_build(server, rank, [str(wrapper), *arguments],
                                           dict(os.environ, LABEL=f"{kind}{rank}")))
        deadline = time.monotonic() + 30
        while server.waiting() < len(compilers) and time.monotonic() < deadline:
            time.sleep(0.02)
    assert server.waiting() == 3
    holder.close()
    assert [process.wait(timeout=60) for process in compilers] == [0, 0, 0]
    # c++5 parses all of torch's header: served as build 1; nvcc6 as build 2; the light c++3 as build 3.
    assert log.read_text().split() == ["c++5", "nvcc6", "c++3"]
    server.close()


def test_a_request_of_no_build_is_served_after_the_builds_and_garbage_stops_nothing(tmp_path):
    """A runner can reach the slot server's socket: a request from outside every registered build's processes (here
    this test's, sending garbage and then a device compile's request) waits behind every build's compile, whatever
    it says, and the server goes on."""
    import os
    import socket as sockets
    import sys
    import time

    from kbench.extensions.slots import SlotServer
    from kbench.extensions.wrappers import write_wrapper

    server = SlotServer(slots=1, lookahead=4)
    holder = compiler_of_build(server, 2, [sys.executable, "-c", HOLD_A_SLOT, server.address], dict(os.environ))
    deadline = time.monotonic() + 30
    while not any(entry.granted_s for entry in server.history()) and time.monotonic() < deadline:
        time.sleep(0.02)
    senders = []
    for message in (b"\xff\xfe not a request", b"nvcc long\n"):
        sender = sockets.socket(sockets.AF_UNIX, sockets.SOCK_STREAM)
        sender.settimeout(30)
        sender.connect(server.address)
        sender.sendall(message)
        senders.append(sender)
    wrapper = tmp_path / "wrappers" / "c++"
    write_wrapper(wrapper, "c++", "sh", str(REPO))
    build = compiler_of_build(server, 7, [str(wrapper), "-c", "exit 0"], dict(os.environ))
    deadline = time.monotonic() + 30
    while server.waiting() < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.waiting() == 3
    holder.terminate()  # build 2's compile ends
    assert build.wait(timeout=30) == 0  # the last to ask, the first served: a build's short host compile
    assert senders[0].recv(1) == b"1"  # then the others of no build, first come first
    senders[0].close()
    assert senders[1].recv(1) == b"1"
    server.close()


def test_a_build_holds_no_more_slots_than_its_share_and_its_extra_waits_excuse_nothing(tmp_path):
    """A candidate that opens many requests (this test, registered as build 0's worker, share 1) gets one slot;
    another build's compile, asking later, gets the other at once; the hog's extra requests wait, uncounted."""
    import os
    import socket as sockets
    import time

    from kbench.extensions.slots import SlotServer
    from kbench.extensions.wrappers import write_wrapper

    server = SlotServer(slots=2, lookahead=4)
    server.register(os.getpid(), 0, 1)
    hog = []
    for _ in range(3):
        request = sockets.socket(sockets.AF_UNIX, sockets.SOCK_STREAM)
        request.connect(server.address)
        request.sendall(b"nvcc long\n")
        hog.append(request)
    assert hog[0].recv(1) == b"1"
    deadline = time.monotonic() + 30
    while server.waiting() < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    wrapper = tmp_path / "wrappers" / "c++"
    write_wrapper(wrapper, "c++", "sh", str(REPO))
    other = compiler_of_build(server, 1, [str(wrapper), "-c", "exit 0"], dict(os.environ))
    assert other.wait(timeout=30) == 0  # the free slot, though the hog's requests came first
    for request in hog[1:]:
        request.settimeout(0.3)
        try:
            assert request.recv(1) == b"", "a build was granted more than its share"
        except TimeoutError:
            pass
    assert server.waited_s(0) < 0.1  # its waits past its share excuse none of its time
    hog[0].close()
    hog[1].settimeout(30)
    assert hog[1].recv(1) == b"1"  # its own slot freed: its next request goes
    server.close()


def test_a_build_s_timeout_does_not_count_its_waits_for_a_compile_slot(tmp_path):
    # Real wrappers, a real slot server and the pool's own wait: the "build" is a wrapper whose compiler
    # (`sh -c`) is instant but waits 2 s for the only slot, held by another build's compile.
    import os
    import subprocess
    import threading
    import time

    from kbench.config import RunConfig
    from kbench.extensions.slots import SlotServer
    from kbench.extensions.wrappers import write_wrapper
    from kbench.schedule.child import Limits
    from kbench.schedule.job import ProgressRecord
    from kbench.schedule.pool import _wait

    server = SlotServer(slots=1, lookahead=1)
    wrapper = tmp_path / "wrappers" / "c++"
    write_wrapper(wrapper, "c++", "sh", str(REPO))

    def waiting_build(rank: int) -> subprocess.Popen:
        holder = holding_a_slot(server.address)  # another compile: the only slot
        threading.Timer(2.0, holder.close).start()
        return compiler_of_build(server, rank, [str(wrapper), "-c", "exit 0"], dict(os.environ))

    def out_of_time(limits: Limits):
        return lambda: limits.out_of_time(ProgressRecord())
    config = RunConfig(device="cpu", cache_dir=tmp_path, build_timeout_s=1.0)
    excused = waiting_build(1)
    limits = Limits(config, build_only=True, excused_s=lambda: server.waited_s(1))
    assert _wait(excused, out_of_time(limits), lambda: None) == 0  # 2 s waited, then done at once
    assert 1.5 < server.waited_s(1) < 4
    counted = waiting_build(2)
    limits = Limits(config, build_only=True)
    assert _wait(counted, out_of_time(limits), lambda: None) is None  # the same wait, counted: out of time
    assert limits.exceeded == "the build limit (1 s, --build-timeout)"
    counted.kill()
    counted.wait()
    deadline = time.monotonic() + 10
    while any(entry.released_s is None for entry in server.history() if entry.rank == 2) \
            and time.monotonic() < deadline:  # the server sees the wrapper's end on its own thread
        time.sleep(0.02)
    waited = server.waited_s(2)
    time.sleep(0.5)
    assert server.waited_s(2) == waited  # a wrapper gone while waiting waits no more
    server.close()


def test_a_sweep_build_that_waits_for_a_compile_slot_is_not_timed_out(cpu_config):
    # The whole path: the executor's build phase, a build worker, its runner importing a solution whose one
    # compile waits for the only slot, held here as another build's compile would, until it has waited 2 s
    # longer than the build's whole timeout (8 s).
    import threading
    import time
    from dataclasses import replace

    from kbench.results import Status
    from kbench.schedule.executor import LocalExecutor

    timeout_s = 8.0
    executor = LocalExecutor()
    executor.start_builds(1)
    slots = executor._slots
    holder = holding_a_slot(slots.address)

    def release_after_the_timeout() -> None:
        deadline = time.monotonic() + 120
        while slots.waited_s(1) < timeout_s + 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        holder.close()
    threading.Thread(target=release_after_the_timeout, daemon=True).start()
    try:
        pair = (PROBLEMS / "axpy.py", SOLUTIONS / "axpy" / "compiles_at_import.py")
        result = executor.build(pair, replace(cpu_config, build_timeout_s=timeout_s), "cpu", "run", 1, rank=1)
    finally:
        executor.end_builds()
    assert result.status == Status.BUILT, result.message
    assert any(entry.rank == 1 and entry.granted_s - entry.queued_s > timeout_s for entry in executor.compiles)


def test_a_sweep_build_compiles_in_a_slot_through_the_wrapper(cpu_config, tmp_path):
    from dataclasses import replace
    from pathlib import Path

    from kbench.results import Status
    from kbench.schedule.child import evaluate
    from kbench.schedule.executor import LocalExecutor

    executor = LocalExecutor()
    executor.start_builds(jobs=1)
    server = executor._slots
    # An empty build cache: it compiles (torch's headers precompiled, as kbench prepares them once).
    config = replace(cpu_config, cache_dir=sharing_precompiled_headers(tmp_path, cpu_config.cache_dir), time=False,
                     sweep=0)
    pair = (PROBLEMS / "axpy.py", SOLUTIONS / "axpy" / "correct.py")
    built = executor.build(pair, config, "cpu", "", 1, rank=3)
    executor.end_builds()
    assert built.status == Status.BUILT, built.message
    assert server.granted == 1  # its one compile (linking takes no slot)
    # Known as build 3's from its process tree (worker, runner, ninja, wrapper), not from anything it said.
    assert [entry.rank for entry in executor.compiles] == [3]
    assert "/compilers/" in Path(built.log_path).read_text()  # the wrapper ran it
    # The evaluation, outside the build phase, finds the build up to date: ninja compiles nothing.
    judged = evaluate(*pair, config)
    assert judged.status == Status.CORRECT and judged.build_reused, judged.message


def test_a_build_runs_at_build_niceness_and_an_evaluation_at_kbenchs(cpu_config):
    import os
    from dataclasses import replace

    from kbench.results import Status
    from kbench.schedule.child import evaluate
    from kbench.schedule.executor import BUILD_NICE, LocalExecutor

    config = replace(cpu_config, time=False, sweep=0)
    pair = (PROBLEMS / "axpy.py", SOLUTIONS / "axpy" / "reports_priority.py")
    own = os.nice(0)
    built = LocalExecutor().build(pair, config, "cpu", "", 1)
    assert built.status == Status.LOAD_ERROR
    assert f"imported at niceness {min(19, own + BUILD_NICE)}" in built.message
    judged = evaluate(*pair, config)
    assert f"imported at niceness {own}" in judged.message
    assert built.cpu_s > 0 and judged.cpu_s > 0  # each worker's CPU time (its children's too) is recorded


def test_build_parallelism_fits_the_cores_allowed_and_the_memory_available():
    import os

    from kbench.schedule.executor import COMPILER_MEMORY, LocalExecutor, compile_capacity

    assert compile_capacity(64, 512 << 30) == 64
    assert compile_capacity(16, 4 * COMPILER_MEMORY + 1) == 4  # memory, not cores, is the limit
    assert compile_capacity(16, 0) == 1                           # never none
    assert compile_capacity(2, None) == 2                         # memory unknown: the cores
    assert 1 <= LocalExecutor().cores() <= len(os.sched_getaffinity(0))
