"""Evaluations that end in the background: a worker that wrote its result ends on its own (its runners reaped, then
its exit, CUDA teardown and all) while kbench goes on, and a marker file appears once it is gone and every ending
before it on its device is too. The next judge on that device waits for the marker before it times anything or
loads its candidate (judge/evaluation.py)."""

from __future__ import annotations

import itertools
import shutil
import threading
from pathlib import Path
from typing import Callable

from kbench.schedule import worker_folders


class Endings:
    """Per device (a waiting-worker key: pool._waiting_key), the marker of its last ending and the thread making it."""

    def __init__(self):
        self._lock = threading.Lock()
        self.last: dict[tuple[str, str], tuple[Path, threading.Thread]] = {}
        self._folder: Path | None = None
        self._markers = itertools.count()

    def marker(self, device: tuple[str, str]) -> str:
        """The file that appears once the last ending on `device` is over ("" when there was none)."""
        with self._lock:
            ending = self.last.get(device)
        return str(ending[0]) if ending is not None else ""

    def begin(self, device: tuple[str, str], end: Callable[[], None], then: Callable[[], None]) -> None:
        """`end()` in a thread of its own; once it and every earlier ending on `device` are over, the marker
        appears (even where `end` failed); then `then()`, what need not delay the next judge."""
        with self._lock:
            if self._folder is None:  # a worker folder's name: a pool that outlives this one removes it
                self._folder = worker_folders.make("endings-")
            marker = self._folder / str(next(self._markers))
            earlier = self.last.get(device)

        def ending() -> None:
            try:
                end()
                if earlier is not None:
                    earlier[1].join()
            finally:
                marker.touch()
            then()
        thread = threading.Thread(target=ending, name="kbench-ending", daemon=True)
        with self._lock:
            self.last[device] = (marker, thread)
        thread.start()

    def close(self, timeout_s: float) -> None:
        """Wait for every ending (`timeout_s` at most each), then forget them: none is under way after."""
        with self._lock:
            threads = [thread for _, thread in self.last.values()]
        for thread in threads:
            thread.join(timeout=timeout_s)
        with self._lock:
            self.last.clear()
            folder, self._folder = self._folder, None
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)
