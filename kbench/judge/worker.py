"""The worker process, the judge: one evaluation in a fresh child, its Outcome written to a file. The candidate
runs in the judge's runner (remote.py), never here.

The parent (schedule/child.py) starts `python -m kbench.judge.worker JOB.json`, or a waiting worker (`--wait DEVICE`)
that warms up and then reads the job's path from stdin, with its output going to a log file and a
wall-clock timeout. Everything the candidate can do wrong that Python can see becomes evidence that
verdicts.decide turns into the Outcome (evaluation.py); what Python cannot see (a segfault, a hang) the parent
turns into evidence for the same function, helped by the progress file the worker keeps up to date.
"""

from __future__ import annotations

import faulthandler
import os
import platform
import sys
import traceback
from pathlib import Path

import torch

from kbench import policy
from kbench.judge import evaluation
from kbench.schedule.job import Job, write_json_atomic
from kbench.judge.progress import Progress
from kbench.judge.remote_process import Runners
from kbench.processes import (PARENT_REAPS_VARIABLE, die_with_parent, flush_output, open_files_to_the_limit, open_log,
                              output_to)
from kbench.loading import release_cached_memory, warm_cuda_libraries
from kbench.op_recording import prime_op_recording
from kbench.results import Outcome
from kbench.runner.limits import judge_protection


def main(argv: list[str]) -> int:
    """`python -m kbench.judge.worker JOB.json`, or `--wait DEVICE`: warm up, then read the job path from stdin.

    A waiting worker has already imported torch and created its CUDA context while the previous
    evaluation ran, so an evaluation does not pay for them. It is still a fresh process: it runs one
    job and exits.
    """
    faulthandler.enable()  # a segfault leaves a Python stack in the log
    # Started by kbench, it dies with its parent: kbench starts every worker from one thread that lives as long as it
    # does (pool.WorkerPool), or forks it from the one-threaded fork server, which dies with kbench in turn.
    if "KBENCH_PARENT_PID" in os.environ:
        die_with_parent(int(os.environ["KBENCH_PARENT_PID"]))
    open_files_to_the_limit()
    judge_protection()
    os.nice(int(os.environ.get("KBENCH_NICE", "0")))  # a build: the compilers it starts inherit it
    if argv[0] == "--wait":
        try:
            runners, warm_up_failure = _warm_up(argv[1]), ""
        except Exception:  # kbench's or the machine's: told in the log of the job this worker waits for
            runners, warm_up_failure = None, traceback.format_exc()
        line = sys.stdin.readline().strip()
        if not line:
            if runners is not None:
                runners.stop()
            return 0  # the parent closed the pipe: no job came
        job = Job.load(Path(line))
        output_to(open_log(job.log_path))  # and its children's
        if runners is None:
            sys.stderr.write(f"kbench's worker failed to warm up before the job came:\n{warm_up_failure}")
            return 1
    else:
        job = Job.load(Path(argv[0]))
        runners = Runners.start(job.device, build_only=job.build_only)
    outcome = run(job, runners)  # the runners are killed by now
    write_json_atomic(Path(job.result_path), outcome.to_dict())
    # The parent goes on with the verdict; the next judge on the device runs its reference meanwhile, and times
    # nothing until this process and its runners (their CUDA contexts, with any work the candidate left queued, and
    # whatever they started) are gone. Where the parent adopts what this process leaves (forkserver.py), the
    # runners' exits overlap this one's; else they are reaped here first, and the memory this judge no longer needs
    # goes before, which makes its exit quicker. Interpreter teardown is skipped.
    if os.environ.get(PARENT_REAPS_VARIABLE) != "1":
        release_cached_memory(torch.device(job.device))
        runners.stop()
    flush_output()
    os._exit(0)


def _warm_up(device: str) -> Runners:
    """Start the runners first (forked before this process touches CUDA, they warm up beside the judge), then
    prime the reference's op recording, create the judge's CUDA context and load its libraries."""
    runners = Runners.start(device)
    prime_op_recording()
    if device.startswith("cuda"):
        torch.cuda.set_device(torch.device(device))
        torch.zeros(1, device=device)  # creates the CUDA context
        warm_cuda_libraries(torch.device(device))
    return runners


def run(job: Job, runners: Runners) -> Outcome:
    """Evaluate one job (the candidate in its runner, the reference timed in its own); every failure the judge
    can observe becomes the outcome's status."""
    device = torch.device(job.device)
    if device.type == "cuda" and not job.build_only:  # a build needs no CUDA context (runners.start)
        torch.cuda.set_device(device)
    else:
        single_threaded()
    progress = Progress(Path(job.progress_path))
    policy.apply_policy(job.config.policy)
    environment = {"device_name": _device_name(device), "torch_version": torch.__version__,
                   "cuda_version": torch.version.cuda or ""}
    return evaluation.judge(job, device, progress, environment, runners)


def single_threaded() -> None:
    """On a CPU device the judge and its runner compute on one thread each (both sides alike): two processes
    with a pool of threads each made times on a small machine swing by 20x, and the judge's clock with them."""
    torch.set_num_threads(1)


def _device_name(device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return platform.processor() or platform.machine() or "cpu"


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
