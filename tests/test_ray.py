"""kbench sweep --executor ray on a Ray instance of this machine: the local executor's verdicts, a lost Ray
worker retried once and then recorded as infra_error (its evaluation killed with it), --resume and
--only-failed rerunning infra_error. (Without Ray: test_cli's one-line usage error.)"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="needs Ray: pip install -e '.[ray]'")

from kbench.config import RunConfig
from kbench.schedule.ray_executor import NodeJob, run_on_node
from kbench.results import Status
from kbench.results_csv import read_rows
from kbench.schedule.child import identify
from kbench.schedule.sweep import select_pairs

from conftest import PROBLEMS, REPO, SOLUTIONS
from test_cli import kbench

# One pytest-xdist worker runs the whole module: its Ray instance starts once (README's --dist loadgroup).
pytestmark = pytest.mark.xdist_group("ray")

FAST = ["--device", "cpu", "--time-budget", "0.2"]


@pytest.fixture(scope="module")
def cluster():
    """A Ray instance of two CPUs for this module; sweeps join it with --ray-address."""
    context = ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield context.address_info["address"]
    ray.shutdown()


def make_tree(root: Path, names: list[str]) -> Path:
    """problems/axpy.py and solutions/axpy/<names>: a folder `kbench sweep` runs as it is."""
    (root / "problems").mkdir(parents=True)
    shutil.copy(PROBLEMS / "axpy.py", root / "problems" / "axpy.py")
    (root / "solutions" / "axpy").mkdir(parents=True)
    for name in names:
        shutil.copy(SOLUTIONS / "axpy" / name, root / "solutions" / "axpy" / name)
    return root


def statuses(csv: Path) -> dict[str, str]:
    return {Path(row["solution"]).name: row["status"] for row in read_rows(csv)}


def test_ray_sweep_gives_the_local_verdicts_and_writes_every_row(tmp_path, cpu_config, cluster):
    # A hang through Ray is judged in test_resume_and_only_failed_rerun_infra_error.
    names = ["correct.py", "wrong_shape.py", "segfault.py", "syntax_error.py"]
    tree = make_tree(tmp_path, names)
    args = ["sweep", *FAST, "--sweep", "2", "--timeout", "60"]
    local = kbench(*args, "--out", "local.csv", cwd=tree, cache_dir=cpu_config.cache_dir)
    on_ray = kbench(*args, "--executor", "ray", "--ray-address", cluster, "--out", "ray.csv", cwd=tree,
                    cache_dir=cpu_config.cache_dir)
    assert local.returncode == on_ray.returncode == 1, on_ray.stderr
    assert statuses(tree / "ray.csv") == statuses(tree / "local.csv") == {
        "correct.py": "correct", "wrong_shape.py": "incorrect", "segfault.py": "crashed",
        "syntax_error.py": "load_error"}
    rows = read_rows(tree / "ray.csv")
    assert len(rows) == len(names) and len({row["run_id"] for row in rows}) == 1
    # Rows name the files as given, like a local run, and say on which node each result was produced.
    assert all(row["solution"].startswith("solutions/axpy/") for row in rows)
    node = ray.util.get_node_ip_address()
    assert {row["device"] for row in rows} == {f"cpu@{node}"}
    assert "fast_1" in on_ray.stdout  # the report closes the sweep


def test_a_node_that_sees_other_files_than_the_driver_gives_infra_error(tmp_path, cluster):
    problem, solution = PROBLEMS / "axpy.py", tmp_path / "solution.py"
    shutil.copy(SOLUTIONS / "axpy" / "correct_plain.py", solution)
    config = RunConfig(device="cpu", cache_dir=tmp_path)
    job = NodeJob(problem=problem, solution=solution, identity=identify(problem, solution, config, "cpu", "r"),
                  config=config, device="cpu")
    solution.write_text(solution.read_text() + "# edited after the driver read it\n")
    edited = ray.get(ray.remote(run_on_node).remote(job))
    assert edited.status == Status.INFRA_ERROR and f"{solution} differs" in edited.message
    solution.unlink()
    missing = ray.get(ray.remote(run_on_node).remote(job))
    assert missing.status == Status.INFRA_ERROR and f"{solution} is missing" in missing.message


def test_a_ray_task_returns_only_once_its_evaluation_has_ended(tmp_path, cluster):
    """Ray may run the next task on the same GPU in another process, which could not wait for this one's ending
    (locally the next judge does): on a node, an evaluation's judge is gone before its task returns. Here one
    whose candidate's load error names its judge."""
    problem, solution = PROBLEMS / "axpy.py", tmp_path / "tells_its_judge.py"
    solution.write_text("import os\nraise RuntimeError(f'judged by process {os.getppid()}')\n")
    config = RunConfig(device="cpu", cache_dir=tmp_path / "cache")
    job = NodeJob(problem=problem, solution=solution, identity=identify(problem, solution, config, "cpu", "r"),
                  config=config, device="cpu")

    def judged(job: NodeJob) -> tuple:
        import re

        from kbench.processes import alive

        result = run_on_node(job)
        judge = int(re.search(r"judged by process (\d+)", result.message).group(1))
        return result, alive(judge)  # at once, on the node
    result, judge_alive = ray.get(ray.remote(judged).remote(job))
    assert result.status == Status.LOAD_ERROR, result.message
    assert not judge_alive, "the task returned while its judge still ran"


def ray_workers_running(task_name: str) -> list[int]:
    """Ray worker processes whose title says they run `task_name` now."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            title = (entry / "cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
        except OSError:
            continue
        if title.startswith(f"ray::{task_name}"):
            found.append(int(entry.name))
    return found


def evaluation_child(ancestor: int, solution_name: str) -> int | None:
    """The kbench worker below `ancestor` (its child, or its fork server's) that writes to `solution_name`'s
    log: it has taken the job."""
    parents, outputs = {}, {}
    for entry in Path("/proc").iterdir():
        try:
            parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            outputs[int(entry.name)] = os.readlink(entry / "fd" / "1")
        except (OSError, ValueError, IndexError):
            continue
    for pid, output in outputs.items():
        below = ancestor in (parents.get(pid), parents.get(parents.get(pid)))
        if below and Path(output).name.startswith(Path(solution_name).stem + "-"):
            return pid
    return None


def alive(pid: int) -> bool:
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def dies_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    return not alive(pid)


def kill_ray_worker_evaluating(solution_name: str, already_killed: set[int]) -> int:
    """SIGKILL the Ray worker whose task evaluates `solution_name`, once its child runs the evaluation.

    Returns that child, which must not outlive its parent."""
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        for worker in set(ray_workers_running(f"kbench eval {solution_name}")) - already_killed:
            child = evaluation_child(worker, solution_name)
            if child is not None:
                os.kill(worker, signal.SIGKILL)
                already_killed.add(worker)
                return child
        time.sleep(0.2)
    pytest.fail(f"no Ray worker evaluating {solution_name} within 90 s")


@pytest.fixture(scope="module")
def lost_run(tmp_path_factory, cpu_config, cluster):
    """A Ray sweep whose evaluation of infinite_loop.py loses its Ray worker twice (the first try and its
    retry); correct_plain.py runs beside it. Returns the tree, the CSV, the sweep's exit code and output, and
    whether each killed worker's evaluation died with it."""
    tree = make_tree(tmp_path_factory.mktemp("lost"), ["infinite_loop.py", "correct_plain.py"])
    arguments = [sys.executable, "-m", "kbench", "sweep", *FAST, "--sweep", "0", "--timeout", "300",
                 "--executor", "ray", "--ray-address", cluster, "--out", "ray.csv"]
    environment = dict(os.environ, PYTHONPATH=str(REPO), KBENCH_CACHE_DIR=str(cpu_config.cache_dir))
    sweep = subprocess.Popen(arguments, cwd=tree, env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    killed: set[int] = set()
    # The first attempt, then Ray's one retry; each killed worker's evaluation must die with it.
    children_died = [dies_within(kill_ray_worker_evaluating("infinite_loop.py", killed), 10) for _ in range(2)]
    stdout, stderr = sweep.communicate(timeout=120)
    return tree, tree / "ray.csv", sweep.returncode, stdout + stderr, children_died


def test_a_lost_worker_is_retried_once_then_infra_error_and_the_sweep_completes(lost_run):
    tree, csv, returncode, output, children_died = lost_run
    assert returncode == 1, output
    assert children_died == [True, True]
    rows = {Path(row["solution"]).name: row for row in read_rows(csv)}
    assert {name: row["status"] for name, row in rows.items()} == {
        "infinite_loop.py": "infra_error", "correct_plain.py": "correct"}
    assert rows["infinite_loop.py"]["message"].startswith("Ray lost the task and its retry: WorkerCrashedError")
    report = json.loads(kbench("report", csv, "--format", "json").stdout)
    assert report["status_counts"] == {"correct": 1, "infra_error": 1}


def test_resume_and_only_failed_rerun_infra_error(lost_run, tmp_path, cpu_config, cluster, monkeypatch):
    tree, csv, *_ = lost_run
    resumed_csv = tmp_path / "resumed.csv"
    shutil.copy(csv, resumed_csv)
    monkeypatch.chdir(tree)  # the CSV names solutions relative to the folder the sweep ran in
    only_failed, _, _ = select_pairs(Path("problems"), Path("solutions"), (), resumed_csv, None,
                                     RunConfig(device="cpu"), "cpu")
    assert [solution.name for _, solution in only_failed] == ["infinite_loop.py"]

    resumed = kbench("sweep", *FAST, "--sweep", "0", "--timeout", "10", "--executor", "ray", "--ray-address",
                     cluster, "--resume", "--out", resumed_csv, cwd=tree, cache_dir=cpu_config.cache_dir)
    assert "resume: 1 pair(s) already in" in resumed.stderr
    new_rows = read_rows(resumed_csv)[2:]
    assert [(Path(row["solution"]).name, row["status"]) for row in new_rows] == [("infinite_loop.py", "timeout")]
