"""Isolated, cached extension builds.

Inside a worker, kbench wraps torch's `load_inline` and `load` before the candidate is imported.
Each call then builds into its own folder, keyed by a hash of everything that defines the extension
(name, sources, flags) and of the torch/CUDA versions, so two candidates that both name their
extension `conv_transpose1d` never share a folder and an unchanged one is never rebuilt. Builds run
verbose so the full compiler output lands in the worker's log file.
"""

from __future__ import annotations

import fcntl
import hashlib
import inspect
import re
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

# Compiler diagnostics: gcc "file.cpp:5:3: error: ...", nvcc "file.cu(45): error: ...", ld errors.
_ERROR_LINE = re.compile(r"(\berror\b\s*:|: error\b|\berror [A-Z]+\d+:|undefined reference|undefined symbol)",
                         re.IGNORECASE)
_WRAPPER_LINE = re.compile(r"^(RuntimeError|Error building extension|subprocess\.CalledProcessError|FAILED:)")
_ARTEFACT_SUFFIXES = (".so", ".o", ".pyd", ".dll")
# Written into a build folder whose compile failed with a compiler error; the next build with the same
# key fails at once from it (compile errors are cached like successful builds).
FAILED_BUILD_LOG = "kbench_failed_build.log"


class BuildError(RuntimeError):
    """An extension failed to build; `log` holds the compiler output."""

    def __init__(self, name: str, log: str):
        self.name = name
        self.log = log
        super().__init__(f"extension {name!r} failed to build: {first_error_line(log)}")


def first_error_line(log: str) -> str:
    """The first compiler error in a build log, without the long build-folder path in front."""
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    for line in lines:
        if _ERROR_LINE.search(line) and not _WRAPPER_LINE.match(line):
            return re.sub(r"^\S*/(?=[^/\s]+[:(])", "", line)
    return lines[-1] if lines else "build failed (no compiler output)"


def versions_tag() -> str:
    import torch

    return f"torch{torch.__version__}-cuda{torch.version.cuda or 'none'}"


def solution_folder(cache_dir: Path, kind: str, solution: Path) -> Path:
    """`kind` ("extensions", "triton") of one solution file's builds: the only build folders its runner may
    write. Named by the file's content, so its build phase and its evaluation, and every later run of the same
    file, share them; no other candidate can change what it loads (identical extensions in two files are
    built twice)."""
    digest = hashlib.sha256(Path(solution).read_bytes()).hexdigest()[:16]
    return Path(cache_dir) / kind / versions_tag() / digest


@dataclass
class BuildRecord:
    """What the builds of one candidate did (mutable: filled in while the candidate imports)."""

    seconds: float = 0.0                            # time spent inside load_inline / load
    folders: list[str] = field(default_factory=list)  # one build folder per extension
    reused: list[bool] = field(default_factory=list)  # per extension: artefacts already there, untouched
    building: str = ""                              # while a build call is in flight: "name (compiler)"
    building_since: float | None = None             # when that build started (time.time())
    log_path: Path | None = None                    # the worker's log, where verbose builds write
    on_change: Callable[[], None] = lambda: None    # told when a build starts or ends (progress file)

    def log_size(self) -> int:
        try:
            return self.log_path.stat().st_size if self.log_path else 0
        except OSError:
            return 0

    def log_since(self, offset: int) -> str:
        """What the build wrote to the log after `offset` (verbose builds print there, not in the error)."""
        if not self.log_path:
            return ""
        sys.stdout.flush()
        try:
            with self.log_path.open("rb") as handle:
                handle.seek(offset)
                return handle.read().decode("utf-8", errors="replace")
        except OSError:
            return ""

    @property
    def any(self) -> bool:
        return bool(self.folders)

    @property
    def all_reused(self) -> bool | None:
        return all(self.reused) if self.reused else None


def install_build_hooks(root: Path, record: BuildRecord) -> None:
    """Replace torch.utils.cpp_extension.load_inline/load with keyed, recorded, verbose versions."""
    import torch.utils.cpp_extension as cpp_extension

    for name in ("load_inline", "load"):
        real = getattr(cpp_extension, name)
        setattr(cpp_extension, name, _keyed_builder(real, root, record))


def _keyed_builder(real, root: Path, record: BuildRecord):
    signature = inspect.signature(real)

    def build(*args, **kwargs):
        # Argument errors (an unknown keyword, a missing source) are the candidate's load errors,
        # raised exactly as torch would raise them, before any compiler runs.
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError:
            return real(*args, **kwargs)  # raises torch's own TypeError, before any compiler runs
        bound.apply_defaults()
        folder = root / _extension_key(bound.arguments)
        if not bound.arguments.get("build_directory"):
            bound.arguments["build_directory"] = str(folder)
        folder = Path(bound.arguments["build_directory"])
        folder.mkdir(parents=True, exist_ok=True)
        failed_log = folder / FAILED_BUILD_LOG
        if failed_log.is_file():
            # Same sources, flags and versions failed to compile before: the compiler would say it again.
            record.folders.append(str(folder))
            record.reused.append(True)
            log = failed_log.read_text(errors="replace")
            print(log, flush=True)
            raise BuildError(str(bound.arguments.get("name")), log)
        bound.arguments["verbose"] = True
        before = _artefacts(folder)
        log_offset = record.log_size()
        record.building = _describe(bound.arguments)
        record.building_since = time.time()
        record.on_change()
        started = time.monotonic()
        try:
            with _sole_builder(folder):
                return real(*bound.args, **bound.kwargs)
        except Exception as error:
            log = record.log_since(log_offset) + "\n" + str(error)
            if _ERROR_LINE.search(log):  # a deterministic compiler error, not a killed or timed-out build
                (folder / FAILED_BUILD_LOG).write_text(log)
            raise BuildError(str(bound.arguments.get("name")), log) from error
        finally:
            record.building, record.building_since = "", None
            record.seconds += time.monotonic() - started
            record.folders.append(str(folder))
            after = _artefacts(folder)
            record.reused.append(bool(before) and all(after.get(p) == m for p, m in before.items()))
            record.on_change()

    build.__wrapped__ = real
    build.__signature__ = signature
    return build


def _describe(arguments: dict) -> str:
    """'conv_ext (nvcc)': the extension's name and the compiler its sources need."""
    cuda = bool(arguments.get("cuda_sources")) or any(str(path).endswith(".cu")
                                                       for path in _as_list(arguments.get("sources")))
    return f"{arguments.get('name', 'extension')} ({'nvcc' if cuda else 'c++'})"


@contextmanager
def _sole_builder(folder: Path):
    """Build in `folder` alone, clearing the lock file a killed build left there.

    torch serialises builds of one folder with a lock file that a killed build (a timeout, a lost Ray
    worker) never removes, and the next build would wait on it until its own timeout. kbench's own lock
    is an flock, which the kernel releases when its holder dies: whoever holds it is the only build in
    the folder, so a torch lock file found then is stale.
    """
    with (folder / "kbench_build.lock").open("w") as guard:
        fcntl.flock(guard, fcntl.LOCK_EX)
        (folder / "lock").unlink(missing_ok=True)
        yield


def _extension_key(arguments: dict) -> str:
    """Hash of what defines the built extension; sources given as files are hashed by content."""
    digest = hashlib.sha256(versions_tag().encode())
    for name in sorted(arguments):
        if name in ("verbose", "build_directory"):
            continue
        digest.update(f"{name}={arguments[name]!r}\n".encode())
    for path in _as_list(arguments.get("sources")):
        try:
            digest.update(Path(path).read_bytes())
        except OSError:
            pass  # torch reports the missing file itself
    label = re.sub(r"[^A-Za-z0-9_]", "_", str(arguments.get("name", "ext")))[:40]
    return f"{label}-{digest.hexdigest()[:16]}"


def _as_list(value) -> list:
    if value is None:
        return []
    return [value] if isinstance(value, (str, Path)) else list(value)


def _artefacts(folder: Path) -> dict[str, int]:
    return {str(path): path.stat().st_mtime_ns for path in folder.rglob("*")
            if path.suffix in _ARTEFACT_SUFFIXES and path.is_file()}
