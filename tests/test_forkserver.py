"""Workers forked from a server that imported torch: they judge and build as spawned ones do."""

from __future__ import annotations

import signal
import sys
import time
from dataclasses import replace

import pytest

from kbench.runner.landlock import READS_VARIABLE
from kbench.schedule.forkserver import ForkedWorker
from kbench.processes import kill_session
from kbench.schedule.pool import worker_pool
from kbench.results import Status
from kbench.schedule.child import EvaluationOptions, evaluate

from conftest import PROBLEMS, SOLUTIONS

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="workers are forked on Linux only")

MATMUL_PROBLEM = """import torch
class Model(torch.nn.Module):
    def forward(self, a, b):
        return a @ b
def get_inputs():
    return [torch.rand(1024, 1024), torch.rand(1024, 1024)]
def get_init_inputs():
    return []
"""
MATMUL_SOLUTION = """import torch
class ModelNew(torch.nn.Module):
    def forward(self, a, b):
        return torch.mm(a, b)
"""


def test_forked_workers_run_parallel_cpu_ops(cpu_config, tmp_path):
    # A parallel op in a forked child hangs if the server ran one before forking (the child lacks its
    # OpenMP threads): the server must stay free of them, and this evaluation would time out.
    import torch

    assert torch.get_num_threads() > 1 or pytest.skip("one CPU thread: no parallel op to run")
    problem, solution = tmp_path / "matmul.py", tmp_path / "matmul_new.py"
    problem.write_text(MATMUL_PROBLEM)
    solution.write_text(MATMUL_SOLUTION)
    result = evaluate(problem, solution, replace(cpu_config, timeout_s=60))
    assert result.status == Status.CORRECT, result.message
    assert all(isinstance(process, ForkedWorker) for process in worker_pool().waiting("cpu"))


def test_a_killed_fork_server_costs_no_verdict(cpu_config):
    assert evaluate(PROBLEMS / "axpy.py", SOLUTIONS / "axpy/correct_plain.py", cpu_config).status == Status.CORRECT
    waiting = worker_pool().waiting("cpu")
    servers = [worker_pool().fork_server(waiting=True)]
    for server in servers:
        server.process.send_signal(signal.SIGKILL)
    deadline = time.monotonic() + 30
    # Its waiting workers die with it, and kbench learns that they did.
    while any(process.poll() is None for process in waiting) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert all(process.poll() is not None for process in waiting)
    result = evaluate(PROBLEMS / "axpy.py", SOLUTIONS / "axpy/correct_plain.py", cpu_config)
    assert result.status == Status.CORRECT, result.message
    current = worker_pool().fork_server(waiting=True)  # kbench started a new one
    assert current.alive and current not in servers


def test_a_forked_worker_reports_its_exit_code_and_signal(cpu_config):
    assert evaluate(PROBLEMS / "axpy.py", SOLUTIONS / "axpy/correct_plain.py", cpu_config).status == Status.CORRECT
    first, second = worker_pool().waiting("cpu")[:2]
    first.stdin.close()  # no job comes: the worker exits normally
    assert first.wait(timeout=30) == 0
    kill_session(second.pid)
    assert second.wait(timeout=30) == -signal.SIGKILL
    worker_pool().stop_waiting()


def test_a_build_worker_is_forked_and_writes_to_the_build_log(cpu_config, tmp_path, monkeypatch):
    from kbench.schedule.executor import LocalExecutor

    monkeypatch.setenv(READS_VARIABLE, "open")  # the candidate reads its judge's /proc folder: the point is the fork

    solution = tmp_path / "tells_parent.py"
    # The solution runs in the build worker's runner: the worker (the judge) is its parent, the server the judge's.
    solution.write_text("import os\nprint('build output here')\n"
                        "judge = open(f'/proc/{os.getppid()}/stat').read().rsplit(')', 1)[1].split()\n"
                        "raise RuntimeError(f'parent {judge[1]}')\n")
    built = LocalExecutor().build((PROBLEMS / "axpy.py", solution), cpu_config, "cpu", "", 1)
    assert built.status == Status.LOAD_ERROR
    build_server = worker_pool().fork_server(waiting=False)  # not the waiting workers'
    assert int(built.message.rsplit("parent ", 1)[1].split()[0]) == build_server.process.pid, built.message
    assert "build output here" in open(built.log_path).read()


DAEMON_AT_IMPORT = """import os, time
read, write = os.pipe()
if os.fork() == 0:  # a daemon in a session of its own, reparented away from the runner at once
    os.setsid()
    if os.fork() == 0:
        os.write(write, str(os.getpid()).encode())
        time.sleep(600)
    os._exit(0)
os.wait()
raise RuntimeError(f"daemon {os.read(read, 32).decode()}")
"""


def test_what_a_forked_build_leaves_behind_is_gone_when_its_build_ends(cpu_config, tmp_path):
    """A build's runner has no cgroup. A daemon its candidate detached is reparented to the judge (a subreaper)
    and, the judge exiting right after its verdict without reaping, to the fork server: kbench kills it and waits
    for it (reaped: not even a zombie is left) before the build counts as ended."""
    import re

    from kbench.processes import alive
    from kbench.schedule.executor import LocalExecutor

    solution = tmp_path / "leaves_a_daemon.py"
    solution.write_text(DAEMON_AT_IMPORT)
    built = LocalExecutor().build((PROBLEMS / "axpy.py", solution), cpu_config, "cpu", "", 1)
    assert built.status == Status.LOAD_ERROR, built.message
    daemon = int(re.search(r"daemon (\d+)", built.message).group(1))
    assert not alive(daemon), "the daemon outlived its build"


# A lineage that never stops moving: each process forks and exits at once, for 30 s, in a session of its own, and
# writes the time to the file sys.argv[1] about every 20 ms (its build folder: a build's runner may write there).
FORK_CHAIN = ("import os, sys, time\nos.setsid()\nend = due = time.time()\nend += 30\nwhile time.time() < end:\n"
              "    if time.time() > due:\n        open(sys.argv[1], 'w').write(repr(time.time()))\n"
              "        due = time.time() + 0.02\n"
              "    if os.fork():\n        os._exit(0)\n")
CHAIN_AT_IMPORT = f"""import os, subprocess, sys, time
import pathlib
import torch.utils.cpp_extension as cpp_extension
# The build's own extension folder (the runner's environment names none of the judge's): where kbench's build hook
# builds, read off the hook itself.
folder = next(cell.cell_contents for cell in cpp_extension.load_inline.__closure__
              if isinstance(cell.cell_contents, pathlib.Path))
heartbeat = os.path.join(folder, "chain.heartbeat")
subprocess.Popen([sys.executable, "-S", "-c", {FORK_CHAIN!r}, heartbeat])
for _ in range(1000):  # until it beats: out of the runner's session by then
    if os.path.exists(heartbeat):
        break
    time.sleep(0.01)
raise RuntimeError("left a fork chain")
"""


def test_a_fork_chain_a_forked_build_leaves_behind_is_gone_when_its_build_ends(cpu_config, tmp_path):
    """The same with a lineage whose living member changes at every fork: killing what the fork server adopted, round
    after round, catches it before it can run on (its heartbeat stops)."""
    import time

    from kbench.extensions.cache import solution_folder
    from kbench.schedule.executor import LocalExecutor

    solution = tmp_path / "leaves_a_fork_chain.py"
    solution.write_text(CHAIN_AT_IMPORT)
    folder = solution_folder(cpu_config.cache_dir, "extensions", solution)
    built = LocalExecutor().build((PROBLEMS / "axpy.py", solution), cpu_config, "cpu", "", 1)
    assert built.status == Status.LOAD_ERROR and "left a fork chain" in built.message, built.message
    heartbeat = folder / "chain.heartbeat"
    assert heartbeat.exists(), "the fork chain never ran"
    last = heartbeat.read_text()
    time.sleep(0.5)
    assert heartbeat.read_text() == last, "the fork chain outlived its build"


def started_ahead(waiting: bool):
    """The pool's fork server for builds (False) or waiting workers (True), started ahead of any fork: an earlier
    test's, which has forked, is killed first."""
    import time

    pool = worker_pool()
    before = pool.fork_server(waiting)
    if before is not None and before.alive and before.ever_forked:
        before.process.kill()
        deadline = time.monotonic() + 30
        while before.alive and time.monotonic() < deadline:
            time.sleep(0.02)
    pool.start_fork_server(waiting)
    ahead = pool.fork_server(waiting)
    assert ahead is not None and ahead.alive and not ahead.ever_forked
    return ahead


def test_a_build_server_started_ahead_is_the_one_the_first_build_forks_from(cpu_config, tmp_path, monkeypatch):
    # kbench sweep starts it first thing, so that its import of torch overlaps the sweep's own.
    from kbench.schedule.executor import LocalExecutor

    monkeypatch.setenv(READS_VARIABLE, "open")  # as above

    pool = worker_pool()
    ahead = started_ahead(waiting=False)
    solution = tmp_path / "tells_parent.py"
    solution.write_text("import os\n"
                        "judge = open(f'/proc/{os.getppid()}/stat').read().rsplit(')', 1)[1].split()\n"
                        "raise RuntimeError(f'parent {judge[1]}')\n")
    built = LocalExecutor().build((PROBLEMS / "axpy.py", solution), cpu_config, "cpu", "", 1)
    assert pool.fork_server(waiting=False) is ahead and ahead.ever_forked
    assert int(built.message.rsplit("parent ", 1)[1].split()[0]) == ahead.process.pid, built.message


def test_an_evaluation_server_started_ahead_is_the_one_waiting_workers_fork_from(cpu_config):
    # kbench eval starts it first thing: its one evaluation takes a waiting worker.
    pool = worker_pool()
    pool.stop_waiting()
    ahead = started_ahead(waiting=True)
    pool.prestart("cpu")
    workers = pool.waiting("cpu")
    assert workers and pool.fork_server(waiting=True) is ahead and ahead.ever_forked
    for worker in workers:
        stat = open(f"/proc/{worker.pid}/stat").read()
        assert int(stat.rsplit(")", 1)[1].split()[1]) == ahead.process.pid
    pool.stop_waiting()


def test_a_waiting_worker_that_cannot_warm_up_says_why(cpu_config):
    # A machine or kbench fault while a waiting worker warms up (here: a CUDA device asked of a CPU-only torch)
    # reached the verdict as "worker exited with code 1 while starting", with its cause nowhere: the waiting
    # worker's output went nowhere until a job came. The cause is now the job log's last line.
    import torch

    if torch.cuda.is_available():
        pytest.skip("needs a machine where warming up on cuda:0 fails")
    try:
        result = evaluate(PROBLEMS / "axpy.py", SOLUTIONS / "axpy/correct_plain.py", cpu_config,
                          EvaluationOptions(device="cuda:0"))
    finally:
        worker_pool().stop_waiting()
    assert result.status == Status.INFRA_ERROR, result.message
    assert result.message.startswith("worker exited with code 1 while starting: "), result.message
    assert "cuda" in result.message.split("while starting: ")[1].lower(), result.message
