"""The candidate's solution in its runner, beside the request loop (serve.py): its namespace at the judge's sizes
(Namespaces), the record of its builds read from the job's log (OutputRecord), and the replies that carry it."""

from __future__ import annotations

import contextlib
import os

from kbench.extensions.cache import BuildRecord
from kbench.processes import flush_output


class Namespaces:
    """The problem's globals at the judge's sizes, in the runner's copy of the problem and in the solution's
    namespace where it still holds the problem's value (a candidate may read `in_channels`, as in
    KernelBench, where it runs in the reference's namespace)."""

    def __init__(self, problem, solution):
        self.problem, self.solution = problem, solution
        self.official = dict(vars(problem))
        self.active = contextlib.ExitStack()
        self.written: dict[str, object] = {}   # what set() wrote into the solution's namespace

    def set(self, overrides: dict) -> None:
        from kbench.problem import overridden
        namespace = vars(self.solution)
        for name, value in self.written.items():
            if namespace.get(name) is value:
                namespace[name] = self.official[name]
        self.written = {}
        self.active.close()
        self.active = contextlib.ExitStack()
        self.active.enter_context(overridden(self.problem, overrides))
        for name, official in self.official.items():
            now = vars(self.problem).get(name)
            if now is not official and namespace.get(name) is official:
                namespace[name] = self.written[name] = now


class OutputRecord(BuildRecord):
    """A build record that reads what the builds wrote to the job's log from this process's standard output (the
    log's descriptor, which the judge opened for reading too): a confined runner may not open the log by its path."""

    def log_size(self) -> int:
        return os.fstat(1).st_size

    def log_since(self, offset: int) -> str:
        flush_output()
        try:
            return os.pread(1, max(self.log_size() - offset, 0), offset).decode("utf-8", errors="replace")
        except OSError:  # not readable (a log opened for writing only)
            return ""


def load_failure(status: str, message: str, record) -> dict:
    """The reply to a load that failed, with what its builds did."""
    return {"failure": {"status": status, "message": message}, "build": build_info(record)}


def build_info(record) -> dict:
    return {"seconds": record.seconds if record.any else None, "reused": record.all_reused,
            "extensions": len(record.folders)}
