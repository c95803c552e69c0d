"""Runs on every core: a pool of warm worker processes, each with its engine and images.

Why processes: about half of a run is Python and ctypes holding the GIL, so two threads
give ~1.2x the runs of one, two processes ~1.9x. Each worker compiles (or loads) the
engine once and keeps its own per-grant memory images, so a submitted run costs what a
run costs in-process plus one round trip over a pipe.

Where the key lives: never on the pipe. A worker reads the operator's grants file itself
when it starts (the same file and environment as the parent), so its broker holds the
key it loaded; the parent sends only the code, the profile's name, the caller and the
limits. A `Profile` may be submitted instead of a name (the example aims one at its
loopback fake with `with_base_url`): it is sent without its token (`Secret` refuses
pickling, and the field is cleared first), and the worker starts again from its own
profile of that name, applies only the two overrides a Profile offers (`with_base_url`,
`with_preamble`, with their checks) and refuses a Profile whose other fields differ from
the file, so the file stays the authority over what a run may call and with which key.

A switch for a caller that runs many runs on threads (the MCP server's `execute`):
`run_profile(code, profile, caller=...)` becomes `pool.run(code, profile, caller=...)`.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import multiprocessing
import os
import threading
import time
from pathlib import Path
from typing import Any

from runtime.broker import Grants, Profile, load
from runtime.errors import GrantsError
from runtime.messages import MSG_NOT_AVAILABLE
from runtime.session import RunOutcome, run_profile, run_with_grant

_WORKER_GRANTS: Grants | None = None


def _start_worker(grants_path: str) -> None:
    """Worker initialiser: load the grants, the engine and every profile's image."""
    global _WORKER_GRANTS
    _WORKER_GRANTS = load(grants_path)
    for profile in _WORKER_GRANTS.profiles:
        run_with_grant("", profile)  # builds the engine once and the profile's image


def _own_profile(sent: Profile | str) -> Profile:
    """The worker's profile for what the parent sent (a name or a token-less Profile)."""
    assert _WORKER_GRANTS is not None
    name = sent.name if isinstance(sent, Profile) else sent
    own = next((p for p in _WORKER_GRANTS.profiles if p.name == name), None)
    if own is None:
        raise GrantsError(MSG_NOT_AVAILABLE.format(name=f'"{name}"'))
    if not isinstance(sent, Profile):
        return own
    if dataclasses.replace(sent, base_url=own.base_url, preamble=own.preamble) != own:
        raise GrantsError(
            f'grant "{name}": the submitted profile differs from the grants file the workers loaded'
        )
    if sent.base_url != own.base_url:
        own = own.with_base_url(sent.base_url)
    if sent.preamble != own.preamble:
        own = own.with_preamble(sent.preamble)
    return own


def _run_job(code: str, sent: Profile | str, caller: str, options: dict[str, Any]) -> RunOutcome:
    return run_profile(code, _own_profile(sent), caller=caller, **options)


def _pause(seconds: float) -> int:
    time.sleep(seconds)  # long enough that each warm-up task lands on its own worker
    return os.getpid()


def _context() -> multiprocessing.context.BaseContext:
    """spawn: a fork of a threaded parent is unsafe, and a forkserver keeps the environment
    of its first start, so a worker would not see a token variable set after it."""
    return multiprocessing.get_context("spawn")


def job_args(
    code: str,
    profile: Profile | str,
    *,
    caller: str,
    timeout_s: float | None = None,
    memory_mb: int | None = None,
    clock: str = "real",
    trace_id: str | None = None,
    scan_memory_for: str | None = None,
) -> tuple[str, Profile | str, str, dict[str, Any]]:
    """Exactly what crosses the pipe for one run: never a token (a test pickles it)."""
    if isinstance(profile, Profile):
        if not profile.allows(caller):  # checked again in the worker
            raise GrantsError(MSG_NOT_AVAILABLE.format(name=f'"{profile.name}"'))
        sent: Profile | str = dataclasses.replace(profile, token=None)
    else:
        sent = profile
    options: dict[str, Any] = {"clock": clock, "trace_id": trace_id}
    if timeout_s is not None:
        options["timeout_s"] = timeout_s
    if memory_mb is not None:
        options["memory_mb"] = memory_mb
    if scan_memory_for is not None:
        options["scan_memory_for"] = scan_memory_for
    return code, sent, caller, options


class RunPool:
    """Warm worker processes running `run_profile` for the profiles of one grants file.

    `submit` returns a Future; `run` waits for it. A worker that dies takes its run with
    it (that Future raises `BrokenProcessPool`); the pool starts new workers for the
    next submission.
    """

    def __init__(self, grants_path: str | os.PathLike[str], *, workers: int | None = None) -> None:
        self.grants_path = str(Path(grants_path))
        load(self.grants_path)  # a bad file is refused here, in one line, not in a worker
        self.workers = max(1, workers or os.cpu_count() or 1)
        self._lock = threading.Lock()
        self._executor = self._new_executor()

    def _new_executor(self) -> concurrent.futures.ProcessPoolExecutor:
        return concurrent.futures.ProcessPoolExecutor(
            max_workers=self.workers,
            mp_context=_context(),
            initializer=_start_worker,
            initargs=(self.grants_path,),
        )

    def warm(self) -> None:
        """Start every worker now (each loads the engine and the images) and wait."""
        futures = [self._executor.submit(_pause, 0.05) for _ in range(self.workers)]
        concurrent.futures.wait(futures)

    def submit(
        self,
        code: str,
        profile: Profile | str,
        *,
        caller: str,
        timeout_s: float | None = None,
        memory_mb: int | None = None,
        clock: str = "real",
        trace_id: str | None = None,
        scan_memory_for: str | None = None,
    ) -> concurrent.futures.Future[RunOutcome]:
        """Queue one run; the arguments mean what they mean for `run_profile`."""
        job = job_args(
            code,
            profile,
            caller=caller,
            timeout_s=timeout_s,
            memory_mb=memory_mb,
            clock=clock,
            trace_id=trace_id,
            scan_memory_for=scan_memory_for,
        )
        with self._lock:
            try:
                return self._executor.submit(_run_job, *job)
            except concurrent.futures.process.BrokenProcessPool:
                self._executor.shutdown(wait=False, cancel_futures=True)
                self._executor = self._new_executor()
                return self._executor.submit(_run_job, *job)

    def run(self, code: str, profile: Profile | str, *, caller: str, **options: Any) -> RunOutcome:
        """`submit(...).result()`: a drop-in for `run_profile` on any thread."""
        return self.submit(code, profile, caller=caller, **options).result()

    def close(self) -> None:
        with self._lock:
            self._executor.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> RunPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
