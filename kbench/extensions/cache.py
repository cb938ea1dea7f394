"""Isolated, cached extension builds.

Inside a runner, kbench wraps torch's `load_inline` and `load` before the candidate is imported.
Each call then builds into its own folder, keyed by a hash of everything that defines the extension
(name, sources, flags) and of the torch/CUDA versions, so two candidates that both name their
extension `conv_transpose1d` never share a folder and an unchanged one is never rebuilt. Builds run
verbose so the full compiler output lands in the worker's log file. A build that succeeded names its
module in its folder (BUILT_MODULE): an evaluation's runner, which may not write the cache, loads it from
there as it is.
"""

from __future__ import annotations

import fcntl
import hashlib
import inspect
import json
import os
import re
import shutil
import stat
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
# Written into a build folder once its build succeeded: the module torch loaded from it (a JSON record).
BUILT_MODULE = "kbench_built.json"


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
    """`kind` ("extensions", "triton") of one solution file's builds: its build's runner may write the first (an
    evaluation's runner writes neither; the judge keeps the second). Named by the file's content, so its build
    phase and its evaluation, and every later run of the same file, share them; no other candidate can change what
    it loads (identical extensions in two files are built twice)."""
    digest = hashlib.sha256(Path(solution).read_bytes()).hexdigest()[:16]
    return Path(cache_dir) / kind / versions_tag() / digest


def copy_new_entries(source: Path, destination: Path) -> None:
    """Copy the regular files under `source` that `destination` lacks (a Triton cache: a folder per kernel), each
    whole or not at all. What `source` holds may be anything (a runner's scratch folder): only regular files are
    read, and nothing is written through a link, in `destination` or on the way there."""
    for folder, _, names in os.walk(source):
        target = _real_folder(destination, Path(folder).relative_to(source))
        if target is None:
            continue
        for name in names:
            try:
                _copy_file(Path(folder) / name, target / name)
            except OSError:
                continue  # gone meanwhile, not a regular file, or a destination it cannot write


def _real_folder(root: Path, relative: Path) -> Path | None:
    """root/relative, made where missing, when it and every folder on the way from root are folders, not links;
    else None."""
    folders = [root] + [root.joinpath(*relative.parts[:depth]) for depth in range(1, len(relative.parts) + 1)]
    for folder in folders:
        try:
            if not stat.S_ISDIR(os.lstat(folder).st_mode):
                return None
        except FileNotFoundError:
            try:
                folder.mkdir(parents=folder is root)
            except OSError:
                return None
        except OSError:
            return None
    return folders[-1]


def _copy_file(original: Path, copy: Path) -> None:
    """`original`, if it is a regular file, to `copy` (which must not exist, not even as a link) through a partial
    file made anew beside it."""
    if os.path.lexists(copy):
        return
    reading = os.open(original, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)  # a FIFO swapped in never blocks
    try:
        if not stat.S_ISREG(os.fstat(reading).st_mode):
            return
        partial = copy.with_name(f".{copy.name}.{os.getpid()}.partial")
        writing = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        try:
            with os.fdopen(os.dup(reading), "rb") as source, os.fdopen(writing, "wb") as target:
                shutil.copyfileobj(source, target)
            os.replace(partial, copy)
        except OSError:
            partial.unlink(missing_ok=True)
            raise
    finally:
        os.close(reading)


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


def install_build_hooks(root: Path, record: BuildRecord, private: Path | None = None) -> None:
    """Replace torch.utils.cpp_extension.load_inline/load with keyed, recorded, verbose versions building under
    `root`. With `private`, `root` is read-only (an evaluation's runner): an extension built there before is
    loaded as it is, and any other is built under `private`."""
    import torch.utils.cpp_extension as cpp_extension

    for name in ("load_inline", "load"):
        real = getattr(cpp_extension, name)
        setattr(cpp_extension, name, _keyed_builder(real, root, record, private))


def _keyed_builder(real, root: Path, record: BuildRecord, private: Path | None):
    signature = inspect.signature(real)

    def build(*args, **kwargs):
        # Argument errors (an unknown keyword, a missing source) are the candidate's load errors,
        # raised exactly as torch would raise them, before any compiler runs.
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError:
            return real(*args, **kwargs)  # raises torch's own TypeError, before any compiler runs
        bound.apply_defaults()
        arguments = bound.arguments
        folder = Path(arguments.get("build_directory") or root / _extension_key(arguments))
        failed_log = folder / FAILED_BUILD_LOG
        if failed_log.is_file():
            # Same sources, flags and versions failed to compile before: the compiler would say it again.
            record.folders.append(str(folder))
            record.reused.append(True)
            log = failed_log.read_text(errors="replace")
            print(log, flush=True)
            raise BuildError(str(arguments.get("name")), log)
        if private is not None and not arguments.get("build_directory"):  # the cache's folder, read-only here
            built = _built_module(folder, arguments)
            if built is not None:
                return _load_built(built, folder, arguments, record)
            folder = private / folder.name
        arguments["build_directory"] = str(folder)
        arguments["verbose"] = True
        folder.mkdir(parents=True, exist_ok=True)
        before = _artefacts(folder)
        log_offset = record.log_size()
        record.building = _describe(arguments)
        record.building_since = time.time()
        record.on_change()
        started = time.monotonic()
        try:
            with _sole_builder(folder):
                module = real(*bound.args, **bound.kwargs)
            _name_built_module(folder, module, arguments)
            return module
        except Exception as error:
            log = record.log_since(log_offset) + "\n" + str(error)
            if _ERROR_LINE.search(log):  # a deterministic compiler error, not a killed or timed-out build
                (folder / FAILED_BUILD_LOG).write_text(log)
            raise BuildError(str(arguments.get("name")), log) from error
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


def _built_module(folder: Path, arguments: dict) -> str | None:
    """The module name a successful build in `folder` recorded, when it is there to load as these arguments
    would load it (a Python module or a library of ops, not an executable); else None."""
    try:
        built = json.loads((folder / BUILT_MODULE).read_text())
        name, python_module = str(built["module"]), bool(built["python_module"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if arguments.get("is_standalone") or python_module != bool(arguments.get("is_python_module", True)):
        return None
    from torch.utils.cpp_extension import LIB_EXT
    return name if (folder / f"{name}{LIB_EXT}").is_file() else None


def _load_built(name: str, folder: Path, arguments: dict, record: BuildRecord):
    """What torch's own load returns for a build it finds up to date, without its lock file and ninja's check
    (both write in the folder); recorded as a build reused."""
    from torch.utils.cpp_extension import _import_module_from_library
    started = time.monotonic()
    try:
        return _import_module_from_library(name, str(folder), bool(arguments.get("is_python_module", True)))
    except Exception as error:  # an extension that built but does not load (an undefined symbol)
        raise BuildError(str(arguments.get("name")), str(error)) from error
    finally:
        record.seconds += time.monotonic() - started
        record.folders.append(str(folder))
        record.reused.append(True)


def _name_built_module(folder: Path, module, arguments: dict) -> None:
    """Record in `folder` the module its build produced (torch names it after the extension, with a version
    suffix when one process built the same name twice)."""
    if arguments.get("is_standalone"):
        return
    python_module = bool(arguments.get("is_python_module", True))
    name = getattr(module, "__name__", None) if python_module else Path(str(module)).stem
    if not isinstance(name, str):
        return
    written = folder / f".{BUILT_MODULE}.{os.getpid()}"
    written.write_text(json.dumps({"module": name, "python_module": python_module}))
    os.replace(written, folder / BUILT_MODULE)


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
