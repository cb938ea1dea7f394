"""torch's headers precompiled by kbench itself, before candidates build.

Precompiled headers (pch.py) are loaded by every later C++ compile in a build cache, so no candidate may write
them: a candidate's runner cannot (limits.confine), and a compile it starts finds them or compiles without. This
module makes them, in a process of kbench's own that runs no candidate code: it builds a one-function extension
through the same compiler wrappers a candidate's build runs, with a flag set's `extra_cflags` (and, where torch
has CUDA, with CUDA's headers on the path, as a CUDA candidate's bindings file is compiled); the wrapper then
precompiles torch's headers for the command torch gave it.

    python -m kbench.extensions.primer CACHE_DIR [--cuda] [--cflags '["-O2"]']

A marker in the headers' folder says a flag set was primed (or failed to be), so a cache is primed once.

The header precompiled is the one a candidate's bindings file reads first: for torch's default flags the light
torch/extension.h (light.py) the c++ wrapper puts ahead of torch's; for flags that optimise host code, which the
wrapper compiles with torch's own header, that one. A sweep primes torch's default flags and the `extra_cflags` that two or
more of its candidates write (`-O3` is common), where every one of those flags is on an allow list (primable):
flags that only choose optimisation, warnings, the language standard, code-generation switches and macros. A
flag that could make this unconfined process read or run a file of the candidate's (a plugin, a response file,
`-Wp,`/`-Wl,`, `-include`, `-B`) keeps a flag set out: its compiles do without.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
import tempfile
from pathlib import Path


_SAFE_FLAG = re.compile(r"-O[0-3sgz]?|-Ofast|-g[0-3]?|-w|-pthread|-std=(c|gnu)\+\+\w+|-W(?![lpa],)[\w-]+"
                        r"|-f(?!plugin)[\w-]+|-m(arch|tune)=[\w-]+|-D\w+(=[\w.+-]*)?|-U\w+")


def primable(cflags: list[str]) -> list[str] | None:
    """`cflags` as the compile command has them (empty words vanish in torch's build file), when the primer
    may precompile torch's headers with them; None when any flag is not on the allow list."""
    flags = [flag for flag in cflags if flag.strip()]
    return flags if all(_SAFE_FLAG.fullmatch(flag) for flag in flags) else None


def headers_root(cache_dir: Path) -> Path:
    """Where a build cache keeps its precompiled torch headers: written only by this module's process."""
    from kbench.extensions.cache import versions_tag

    return Path(cache_dir) / "pch" / versions_tag()


def compilers_root(cache_dir: Path) -> Path:
    """Where a build cache keeps the compiler wrappers every build runs (wrappers.install_compiler_wrappers)."""
    from kbench.extensions.cache import versions_tag

    return Path(cache_dir) / "compilers" / versions_tag()


def marker(cache_dir: Path, cuda: bool, cflags: list[str]) -> Path:
    """The file that says this flag set was primed."""
    digest = hashlib.sha256(repr((cuda, cflags)).encode()).hexdigest()[:12]
    return headers_root(cache_dir) / f"primed-{'cuda' if cuda else 'cpu'}-{digest}"


def arguments(cache_dir: Path, cuda: bool, cflags: list[str] | None = None) -> list[str]:
    """This module's command-line arguments for a flag set."""
    return [str(cache_dir), *(["--cuda"] if cuda else []), *(["--cflags", json.dumps(cflags)] if cflags else [])]


def prime(cache_dir: Path, cuda: bool, cflags: list[str]) -> None:
    """Build the one-function extension (its link may fail where torch lacks CUDA's libraries: the bindings
    file, the compile that matters, came first) and leave the marker."""
    from torch.utils import cpp_extension

    from kbench.extensions import wrappers

    wrappers.install_compiler_wrappers(compilers_root(cache_dir), headers_root(cache_dir))
    headers_root(cache_dir).mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="kbench-primer-") as build:
        try:
            cpp_extension.load_inline(name="kbench_headers", cpp_sources="int kbench_headers() { return 1; }",
                                      functions=["kbench_headers"], extra_cflags=cflags, with_cuda=cuda,
                                      build_directory=build)
        except Exception as error:  # noqa: BLE001 (said, and remembered by the marker: not tried again)
            print(f"kbench: precompiling torch's headers: {error}", file=sys.stderr)
    marker(cache_dir, cuda, cflags).touch()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cache_dir", type=Path)
    parser.add_argument("--cuda", action="store_true", help="with CUDA's headers, as a CUDA candidate's bindings")
    parser.add_argument("--cflags", type=json.loads, default=[],
                        help="extra_cflags of the flag set, a JSON list (kbench's own test fixtures)")
    options = parser.parse_args(argv)
    if "KBENCH_PARENT_PID" in os.environ:  # started by kbench's worker pool: it goes when kbench goes
        from kbench.processes import die_with_parent
        die_with_parent()
    prime(options.cache_dir, options.cuda, options.cflags)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
