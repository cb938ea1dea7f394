"""Builds and evaluations as Ray tasks on a cluster: `kbench sweep --executor ray`.

The scheduler decides what runs when; this executor only moves each build or evaluation onto a node,
where kbench.schedule.child runs it exactly as it does locally (a fresh child process, timeouts, crashes turned
into verdicts), so a crashing candidate never takes a Ray worker down. Every node sees the problems, the
solutions and the build cache at the same paths: an extension built on one node is found by the
evaluation on another through the cache (keyed by content hash), and nothing large travels through Ray.

Ray is an optional dependency: it is imported only when a RayExecutor is made.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path

from kbench.config import RunConfig
from kbench.failures import Evidence, Kind, Party, one_line
from kbench.results import Identity, Result
from kbench.schedule.child import EvaluationOptions, evaluate, file_hash, identify, recorded
from kbench.schedule.executor import BUILD_NICE, Pair
from kbench.verdicts import decide

INSTALL_HINT = 'kbench sweep --executor ray needs Ray: pip install "kbench[ray]"'


@dataclass(frozen=True)
class NodeJob:
    """One build or evaluation as a node runs it; a plain value that Ray carries to the node."""

    problem: Path              # absolute: a node's working directory is not the driver's
    solution: Path             # absolute
    identity: Identity         # the row's, made on the driver: files as the user named them, their hashes
    config: RunConfig          # cache_dir absolute, the same folder on every node
    device: str                # "cpu", or "cuda:0": the GPU Ray gave the task
    build_only: bool = False
    build_threads: int | None = None
    build_nice: int = 0


class RayExecutor:
    """Builds as tasks that reserve CPUs; evaluations as tasks that reserve one GPU (or one CPU)."""

    def __init__(self, address: str | None = None):
        import ray  # ModuleNotFoundError without Ray: the caller shows INSTALL_HINT

        if not ray.is_initialized():
            # No address: a Ray instance on this machine for this run; "auto" or host:port joins a cluster.
            local_only = {} if address else {"include_dashboard": False}
            ray.init(address=address, log_to_driver=False, logging_level="WARNING", **local_only)
        self._ray = ray
        # max_retries=1: a task whose node or worker was lost runs once more (an exception is not retried).
        self._build_task = ray.remote(max_retries=1)(run_on_node)
        # max_calls=0 keeps a Ray worker for later tasks, with its waiting workers warm. Ray's default for GPU
        # tasks is a fresh worker per task, to free GPU memory the task held; this worker never touches CUDA
        # (its child processes do), so there is nothing to free.
        self._evaluation_task = ray.remote(max_retries=1, max_calls=0)(run_on_node)

    def cores(self) -> int:
        return int(self._ray.cluster_resources().get("CPU", 1))

    def device_for(self, requested: str) -> str:
        """The device evaluations use on the cluster ("cuda:0", relative to the GPU Ray gives each task, or
        "cpu"); ValueError when the cluster cannot provide what was asked for."""
        has_gpus = self._gpus() > 0
        if requested == "cpu" or (requested == "auto" and not has_gpus):
            return "cpu"
        if requested not in ("auto", "cuda"):
            raise ValueError(f"--device {requested}: with --executor ray use auto, cuda or cpu (Ray picks the GPU)")
        if not has_gpus:
            raise ValueError("--device cuda: the Ray cluster has no GPU")
        return "cuda:0"

    def evaluation_devices(self, devices: list[str]) -> list[str]:
        """One slot per GPU of the cluster; for CPU evaluations, one per CPU (each task reserves one)."""
        count = self._gpus() if devices[0].startswith("cuda") else self.cores()
        return [devices[0]] * max(1, count)

    def prime_headers(self, pairs, config, devices) -> list:
        """None on a cluster: a node's builds compile torch's headers as they are (primer.py runs on one machine)."""
        return []

    def start_builds(self, jobs: int) -> int:
        return jobs  # each build task reserves its CPUs: Ray itself keeps the nodes from oversubscribing

    def end_builds(self) -> None:
        pass

    def build(self, pair: Pair, config: RunConfig, device: str, run_id: str, build_threads: int,
              rank: int = 0, on_progress=None) -> Result:
        # A task cannot reserve more CPUs than one node has. Compilers are not ordered across builds
        # (rank is unused), and a node's progress does not travel back (on_progress is unused).
        threads = max(1, min(build_threads, self._largest_node_cpus()))
        task = self._build_task.options(num_cpus=threads, name=f"kbench build {pair[1].name}")
        return self._run(task, pair, config, device, run_id, build_only=True, build_threads=threads,
                         build_nice=BUILD_NICE)

    def evaluate(self, pair: Pair, config: RunConfig, device: str, run_id: str, on_progress=None) -> Result:
        # A GPU evaluation reserves no CPU, as locally: builds filling the CPUs must not leave GPUs idle.
        needs = {"num_gpus": 1, "num_cpus": 0} if device.startswith("cuda") else {"num_cpus": 1}
        task = self._evaluation_task.options(name=f"kbench eval {pair[1].name}", **needs)
        return self._run(task, pair, config, device, run_id)

    def _run(self, task, pair: Pair, config: RunConfig, device: str, run_id: str, build_only: bool = False,
             build_threads: int | None = None, build_nice: int = 0) -> Result:
        """Run the task and wait for its Result; a task Ray could not finish is an infra_error row."""
        problem, solution = pair
        job = NodeJob(problem=problem.resolve(), solution=solution.resolve(),
                      identity=identify(problem, solution, config, device, run_id),
                      config=replace(config, cache_dir=config.cache_dir.resolve()), device=device,
                      build_only=build_only, build_threads=build_threads, build_nice=build_nice)
        started = time.monotonic()
        try:
            return self._ray.get(task.remote(job))
        except self._ray.exceptions.RayTaskError as error:
            # kbench itself raised on the node (not installed there, a full disk): not the candidate's doing.
            return machine_failure(job, Kind.RAISED, f"kbench failed on a Ray node: {one_line(error.cause)}", started)
        except self._ray.exceptions.RayError as error:
            # WorkerCrashedError, NodeDiedError, ...: Ray lost the task, and its retry too.
            return machine_failure(job, Kind.DIED, f"Ray lost the task and its retry: {one_line(error)}", started)

    def _gpus(self) -> int:
        return int(self._ray.cluster_resources().get("GPU", 0))

    def _largest_node_cpus(self) -> int:
        return int(max((node["Resources"].get("CPU", 0) for node in self._ray.nodes() if node["Alive"]), default=1))


def run_on_node(job: NodeJob) -> Result:
    """The body of every task, on its node: check the files are the driver's, then run as locally."""
    import ray

    started = time.monotonic()
    node = ray.util.get_node_ip_address()
    differences = _differences_from_driver(job)
    if differences:
        return machine_failure(job, Kind.MISCONFIGURED, f"on node {node}, {'; '.join(differences)}: every node must "
                                                        "see the driver's files at the same paths", started)
    # Ray numbers a task's GPUs from 0 (CUDA_VISIBLE_DEVICES); record the node's GPU and the node.
    gpus = ray.get_runtime_context().get_accelerator_ids().get("GPU") or []
    identity = replace(job.identity, device=f"{f'cuda:{gpus[0]}' if gpus else job.device}@{node}")
    # Ray may run the next task on this GPU in another process: each evaluation ends before its task does.
    return evaluate(job.problem, job.solution, job.config, EvaluationOptions(
        device=job.device, build_only=job.build_only, build_threads=job.build_threads, build_nice=job.build_nice,
        identity=identity, overlap_ending=False))


def _differences_from_driver(job: NodeJob) -> list[str]:
    """How the problem and solution files this node reads differ from those the driver hashed."""
    differences = []
    for path, drivers_hash in ((job.problem, job.identity.problem_hash), (job.solution, job.identity.solution_hash)):
        nodes_hash = file_hash(path)
        if not nodes_hash:
            differences.append(f"{path} is missing")
        elif nodes_hash != drivers_hash:
            differences.append(f"{path} differs (sha256 {nodes_hash}, driver {drivers_hash})")
    return differences


def machine_failure(job: NodeJob, kind: Kind, message: str, started: float) -> Result:
    """A row for what Ray or a node failed to do: verdicts.decide blames the machine, never the candidate."""
    return recorded(job.identity, decide(Evidence(Party.MACHINE, kind, message)), started)
