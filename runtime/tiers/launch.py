"""Starting an engine process on a tier: the command line, the environment, the view.

`worker`: the engine process runs under bubblewrap (`bwrap`) with no network namespace
of the host (`--unshare-all`: its own, empty, network, and its own pid, ipc and uts),
no capabilities, an empty environment but for the cache folder's path, a new session
(no terminal to inject into), and a filesystem of read-only binds of exactly what
Python and the engine need (the interpreter's prefix, the virtual environment, the
folders the `runtime`, `specgen` and `wasmtime` packages, the templates and the
QuickJS wasm live in, the compiled-engine cache), a fresh /dev and /proc and a small tmpfs for scratch
at /tmp. Paths the operator names (the grants file, its preamble file) are covered by
/dev/null when they fall inside a bound folder. bwrap dies with its parent.

`gvisor`: the same view, and inside it gVisor's `runsc do --network=none`, so the
engine's system calls go to gVisor's own kernel, not Linux's (runsc needs the
capabilities bwrap otherwise drops, so here it is runsc's sandbox that holds none).

The engine process lowers its own limits before it reads anything (`--limits`): the
data it may write, CPU seconds, open files, the size of a file it may write; and, once
the engine is loaded, installs a seccomp filter refusing sockets, new programs and the
kernel interfaces that could stand in for them (`--seccomp`, runtime/tiers/syscall_filter.py).

A tier that cannot start here is refused in one line naming what is missing
(`IsolationError`); nothing falls back to a weaker tier.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

from runtime.errors import Refusal

#: The tiers an operator chooses from, weakest first.
TIERS = ("process", "worker", "gvisor")
#: Limits the engine process sets on itself: writable data (MiB; the largest guest
#: memory, 4 GiB, plus the interpreter, wasmtime and its compiled code), CPU seconds
#: over its whole life (a pool replaces one at half of it, `boundary.RETIRE_CPU_S`),
#: open files, and the largest file it may write (its scratch tmpfs is capped too).
DATA_LIMIT_MB = 6 << 10
CPU_LIMIT_S = 3600
OPEN_FILES = 64
FILE_LIMIT_MB = 16
SCRATCH_BYTES = 16 << 20
#: Where the engine process's scratch tmpfs is mounted.
_SCRATCH = Path("/tmp")


class IsolationError(Refusal):
    """The chosen isolation tier cannot run here; the line says what is missing."""


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise IsolationError(f"isolation: package {name!r} not found")
    return Path(next(iter(spec.submodule_search_locations))).resolve()


def visible_folders() -> list[Path]:
    """The folders an engine process sees (read-only): the least Python and the engine
    need, never the operator's working folder or home as such."""
    from runtime.sandbox.engine_file import ensure_cached, wasm_path
    from specgen.cache_dir import cache_dir
    from specgen.render import TEMPLATE_DIRS

    ensure_cached()
    cache = cache_dir().resolve()
    folders = {
        *(d.resolve() for d in TEMPLATE_DIRS if d.is_dir()),
        Path(sys.base_prefix).resolve(),
        Path(sys.prefix).resolve(),
        _package_dir("runtime"),
        _package_dir("specgen"),
        _package_dir("wasmtime"),
        wasm_path().resolve().parent,
        # Bound only when it exists: a folder that could not be made (a read-only home)
        # costs each engine process a compile, never its start.
        *((cache,) if cache.is_dir() else ()),
    }
    # A folder inside another is bound once, by the outer one; one that holds /tmp (a
    # cache folder set to /tmp itself, say) not at all, as its bind would cover the
    # engine's scratch tmpfs with the host's /tmp.
    ordered = sorted(
        (f for f in folders if not _SCRATCH.is_relative_to(f)), key=lambda p: len(p.parts)
    )
    kept: list[Path] = []
    for folder in ordered:
        if not any(folder.is_relative_to(k) for k in kept):
            kept.append(folder)
    return kept


def _system_binds() -> list[str]:
    args: list[str] = []
    for name in ("usr", "lib", "lib64", "bin", "sbin"):
        path = Path("/") / name
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            args += ["--ro-bind", str(path), str(path)]
    return args


def _require(program: str, tier: str) -> str:
    found = shutil.which(program)
    if found is None:
        raise IsolationError(
            f"--isolation {tier}: {program} is not installed (apt-get install"
            f" {'bubblewrap' if program == 'bwrap' else program}); no weaker tier is used instead"
        )
    return found


def command(tier: str, hidden: Iterable[Path] = (), *, escape_hook: bool = False) -> list[str]:
    """The argv that starts one engine process on `tier` (`worker` or `gvisor`)."""
    if tier not in ("worker", "gvisor"):
        raise IsolationError(f"--isolation {tier!r}: an engine process runs on worker or gvisor")
    if not sys.platform.startswith("linux"):
        raise IsolationError(f"--isolation {tier}: needs Linux (bubblewrap namespaces)")
    bwrap = _require("bwrap", tier)
    runsc = _require("runsc", tier) if tier == "gvisor" else None
    folders = visible_folders()
    # The scratch tmpfs first: a folder the engine needs that lies under /tmp (a
    # checkout or cache folder there) is then bound over it, not hidden by it.
    view = ["--size", str(SCRATCH_BYTES), "--tmpfs", str(_SCRATCH), *_system_binds()]
    for folder in folders:
        view += ["--ro-bind", str(folder), str(folder)]
    for path in hidden:
        path = Path(path).resolve()
        if any(path.is_relative_to(f) for f in folders) and path.exists():
            view += ["--ro-bind", "/dev/null", str(path)]
    # The dynamic loader's cache: how the engine process finds libseccomp to load its
    # filter (a list of library paths, nothing of the operator's).
    view += ["--ro-bind-try", "/etc/ld.so.cache", "/etc/ld.so.cache"]
    view += ["--proc", "/proc", "--chdir", "/tmp"]

    python = [
        sys.executable,
        "-I",
        "-m",
        "runtime.tiers.engine_process",
        f"--limits={DATA_LIMIT_MB},{CPU_LIMIT_S},{OPEN_FILES},{FILE_LIMIT_MB}",
        "--seccomp",
    ]
    if escape_hook:
        python.append("--test-escape-hook")
    # bwrap builds the view's root (and the folders leading to each bind) on a tmpfs:
    # read-only too, after the last mount, so the only writable place is /tmp.
    common = ["--remount-ro", "/", "--die-with-parent", "--new-session", "--unshare-pid"]
    if runsc is None:
        # --unshare-all makes a user namespace too, in which the process would hold
        # every capability (over that namespace's own resources): drop them all.
        return [
            bwrap,
            *view,
            "--dev",
            "/dev",
            *common,
            "--unshare-all",
            "--cap-drop",
            "ALL",
            *python,
        ]
    # runsc needs the host's /dev and /sys (read-only, cgroups left alone), state under
    # a tmpfs /run, and the capabilities to build its sandbox.
    return [
        bwrap,
        *view,
        "--dev-bind",
        "/dev",
        "/dev",
        "--ro-bind",
        "/sys",
        "/sys",
        "--tmpfs",
        "/run",
        *common,
        "--unshare-net",
        "--unshare-ipc",
        "--cap-add",
        "ALL",
        runsc,
        "--ignore-cgroups",
        "--root=/run/runsc",
        "--network=none",
        "do",
        "-quiet",
        # No overlay: writes go to the view itself, which is read-only but for /tmp,
        # instead of succeeding into gVisor's memory.
        "-force-overlay=false",
        *python,
    ]


def environment() -> dict[str, str]:
    """All the engine process gets of the operator's environment: the cache folder."""
    from specgen.cache_dir import CACHE_ENV, cache_dir

    return {CACHE_ENV: str(cache_dir().resolve())}


def popen(argv: list[str]) -> subprocess.Popen[bytes]:
    """Start it: only the pipes open (close_fds), its own session, nothing inherited."""
    return subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=environment(),
        close_fds=True,
        start_new_session=True,
        cwd="/",
    )
