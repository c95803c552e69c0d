"""Runs on every core: a pool of warm worker processes, each with its engine and images.

Why processes: about half of a run is Python and ctypes holding the GIL, so two threads
give ~1.2x the runs of one, two processes ~1.9x. Each worker compiles (or loads) the
engine once and keeps its own per-grant memory images, so a submitted run costs what a
run costs in-process plus one round trip over a pipe.

Where the key lives: never on the pipe. A worker reads the operator's grants file itself
when it starts (the same file and environment as the parent), so its broker holds the
key it loaded; the parent sends only the code, the profile's name, the caller and the
limits. A tuple of profiles (names or Profiles) is one run of them all together
(runtime/profile_set.py). A `Profile` may be submitted instead of a name (the example aims one at its
loopback fake with `with_base_url`): it is sent without its token or token block
(`Secret` refuses pickling, and both fields are cleared first), and the worker starts again from its own
profile of that name, applies only the two overrides a Profile offers (`with_base_url`,
`with_preamble`, with their checks) and refuses a Profile whose other fields differ from
the file, so the file stays the authority over what a run may call and with which key.

That is the `process` tier: each worker holds the key next to the engine. On the
`worker` and `gvisor` tiers (`isolation=`, runtime/tiers/) there are no such workers:
the pool's own process loads the grants file once and holds every broker and key, and
each worker is an engine process that holds neither (no key, no token variable, no
grants file, no network, no writable file), asking the broker here for each host call
over its pipe. A run whose engine process dies still has its whole trace here: the
audit line lists every call the broker admitted, with its real outcome.

A switch for a caller that runs many runs on threads (the MCP server's `execute`):
`run_profile(code, profile, caller=...)` becomes `pool.run(code, profile, caller=...)`,
with the same contract: a `RunOutcome` for every run that started, a `Refusal` for
input refused before it. A run whose worker died under it (killed, out of memory, a
crash in the engine) still ends with an outcome and an audit record, written by the
parent: exit `EXIT_INTERNAL`, `internal_error` "WorkerDied", and `"worker_died": true`
on the audit line. The worker's broker and its trace go down with it, so the worker
tells the parent of each call as its broker admits it (before it is sent, on the pipe
the run's answer comes back on); the parent's record lists every such call, status 0
and failure `worker_died`: admitted, perhaps answered by the API, outcome unknown.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import contextvars
import dataclasses
import itertools
import multiprocessing
import os
import pickle
import queue
import signal
import sys
import threading
import time
from collections.abc import Sequence
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import orjson

from runtime import telemetry
from runtime.broker import Grants, Profile, audit_line, load
from runtime.broker.approval import Answer, Approver, Question
from runtime.broker.trace import CallTrace, listen_for_admissions
from runtime.errors import GrantsError
from runtime.messages import MSG_NOT_AVAILABLE
from runtime.sandbox import (
    DEFAULT_MEMORY_MB,
    DEFAULT_TIMEOUT_S,
    EXIT_INTERNAL,
    GuestGrant,
    Limits,
    RunResult,
)
from runtime.session import RunOutcome, run_profile, run_with_grant
from runtime.tiers.boundary import EngineProcess, run_isolated
from runtime.tiers.launch import TIERS, IsolationError, command
from runtime.tiers.wire import spin_for
from specgen.routes import Route

_WORKER_GRANTS: Grants | None = None
#: The subject a warm-up run's jwt (never sent: the run makes no call) is minted for.
_WARMUP_CALLER = "runpool-warm-up"


def _start_worker(grants_path: str) -> None:
    """Worker initialiser: load the grants, the engine and every profile's image."""
    global _WORKER_GRANTS
    _WORKER_GRANTS = load(grants_path)
    for profile in _WORKER_GRANTS.profiles:
        # Builds the engine once and the profile's image. A jwt profile mints a token
        # for the run's caller before the guest starts; this run makes no call, so the
        # token minted for the warm-up subject is never sent anywhere.
        run_with_grant("", profile, caller=_WARMUP_CALLER)


def _own_profile(sent: Profile | str) -> Profile:
    """The worker's profile for what the parent sent (a name or a token-less Profile)."""
    assert _WORKER_GRANTS is not None
    name = sent.name if isinstance(sent, Profile) else sent
    own = next((p for p in _WORKER_GRANTS.profiles if p.name == name), None)
    if own is None:
        raise GrantsError(MSG_NOT_AVAILABLE.format(name=f'"{name}"'))
    if not isinstance(sent, Profile):
        return own
    # The credential is always the worker's own (the parent sends none), so it is not
    # part of the comparison.
    same = dataclasses.replace(
        sent, base_url=own.base_url, preamble=own.preamble, credential=own.credential
    )
    if same != own:
        raise GrantsError(
            f'grant "{name}": the submitted profile differs from the grants file the workers loaded'
        )
    if sent.base_url != own.base_url:
        own = own.with_base_url(sent.base_url)
    if sent.preamble != own.preamble:
        own = own.with_preamble(sent.preamble)
    return own


#: What a job names: a profile (by name, or token-less), or several for one run.
_Sent = Profile | str | tuple[Profile | str, ...]


def _own_profiles(sent: _Sent) -> Profile | tuple[Profile, ...]:
    """`_own_profile` of each profile a job names (a run of several profiles)."""
    if isinstance(sent, tuple):
        return tuple(_own_profile(each) for each in sent)
    return _own_profile(sent)


def _scanned_key(profile: Profile | tuple[Profile, ...]) -> str:
    """The key a memory scan looks for: the one profile's own (a scan is of one profile)."""
    if isinstance(profile, tuple):
        raise GrantsError("scan_memory is for a run of one profile")
    if profile.token is None:
        raise GrantsError(f'grant "{profile.name}": scan_memory needs a profile with a key')
    return profile.token.reveal()


def _names(sent: _Sent) -> str | tuple[str, ...]:
    """The profile name(s) a job's audit line names."""
    if isinstance(sent, tuple):
        return tuple(each.name if isinstance(each, Profile) else each for each in sent)
    return sent.name if isinstance(sent, Profile) else sent


class _ParentApprover:
    """A worker's approval channel: the question goes to the parent, which owns the
    person's channel (the terminal, the MCP session), on the run's own pipe; the parent
    always answers (None when its channel's timeout passed). Answers carry the ask's
    number, so a late one is never taken for the answer to a later question."""

    def __init__(self, conn: Connection, sending: threading.Lock, channel: str) -> None:
        self._conn = conn
        self._sending = sending
        self.channel = channel
        self._numbers = itertools.count(1)

    def __call__(self, question: Question, timeout_s: float) -> Answer | None:
        number = next(self._numbers)
        with self._sending:
            self._conn.send(("approve", (number, question.to_dict(), timeout_s)))
        end = time.monotonic() + timeout_s + _ANSWER_GRACE_S
        while (left := end - time.monotonic()) > 0 and self._conn.poll(left):
            message = self._conn.recv()
            if isinstance(message, tuple) and message[:2] == ("answer", number):
                return Answer(message[2]) if message[2] is not None else None
        return None


#: How long past the approval timeout a worker waits for its parent's answer.
_ANSWER_GRACE_S = 5.0
#: Set in a worker process: the channel its runs ask through (see _worker_main).
_WORKER_CONN: tuple[Connection, threading.Lock] | None = None


def _run_job(code: str, sent: _Sent, caller: str, options: dict[str, Any]) -> RunOutcome:
    profile = _own_profiles(sent)
    channel = options.pop("approval_channel", None)
    if channel is not None and _WORKER_CONN is not None:
        options["approver"] = _ParentApprover(*_WORKER_CONN, channel)
    if options.pop("scan_memory", False):
        # The key to look for is the worker's own, read from the grants file: the parent
        # asks for the scan, it never sends the key (job_args).
        options["scan_memory_for"] = _scanned_key(profile)
    return run_profile(code, profile, caller=caller, **options)


def _worker_main(conn: Connection, grants_path: str) -> None:
    """A worker process: warm up, then answer one job at a time over its pipe."""
    # The terminal's Ctrl-C goes to the whole process group: the parent decides what it
    # ends (RunPool.interrupt), a worker must not die of it on its own mid-job.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        _start_worker(grants_path)
    except BaseException as exc:
        conn.send(("err", _picklable(exc)))
        return
    # A worker's runs export nothing: it ends with os._exit, before any export, and its
    # spans would have no parent (the parent's run has none on this tier either).
    telemetry.configure(enabled=False)
    conn.send(("ready", os.getpid()))
    sending = threading.Lock()

    def admitted(seq: int, method: str, route: str) -> None:
        # Before the call is sent: a parent that outlives this worker knows of it.
        with sending, contextlib.suppress(OSError):
            conn.send(("admitted", (seq, method, route)))

    listen_for_admissions(admitted)
    global _WORKER_CONN
    _WORKER_CONN = (conn, sending)
    while True:
        try:
            job = conn.recv()
        except (EOFError, OSError):
            break
        if job is None:
            break
        if isinstance(job, tuple) and job[:1] == ("answer",):
            continue  # an approval answered after its run stopped waiting
        try:
            reply: tuple[str, object] = ("ok", _run_job(*job))
        except BaseException as exc:  # handed back to the caller's Future
            reply = ("err", _picklable(exc))
        with sending:
            conn.send(reply)
    _exit_now(conn)


def _exit_now(conn: Connection) -> None:
    """End the worker without the interpreter's teardown.

    Every run has answered and a worker writes no file, so there is nothing left to do;
    finalising the engine, the images and every module took ~0.7 s per worker, which a
    batch `specgen run` waited for after its last result.
    """
    conn.close()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(0)


def _picklable(exc: BaseException) -> BaseException:
    try:
        pickle.dumps(exc)
    except Exception:
        return RuntimeError(f"{type(exc).__name__}: {exc}")
    return exc


def _guest_grant(profile: Profile) -> GuestGrant:
    return GuestGrant(
        global_name=profile.global_name, allow=profile.allow, preamble=profile.preamble
    )


class WorkerDied(RuntimeError):
    """A pool worker ended while starting, so the runs queued for it could not start."""


#: The `failure` of a call a dead worker's run had admitted: its outcome is unknown.
WORKER_DIED = "worker_died"


def _lost(
    job: tuple[str, _Sent, str, dict[str, Any]],
    duration_s: float,
    admitted: Sequence[tuple[int, str, str]] = (),
) -> RunOutcome:
    """The outcome of a run whose worker died before answering.

    The worker's broker held the run's trace and went down with it; what the parent has
    is the calls the worker said it admitted (`admitted`: seq, method, allow entry),
    each of which may have reached the API. They become rows with status 0 and failure
    `worker_died`, and the audit line says `"worker_died": true`, so the record neither
    passes for a run that made no call nor claims an outcome nobody saw.
    """
    _, sent, _, options = job
    name = _names(sent)
    trace = CallTrace()
    for seq, method, route in admitted:
        trace.record(
            Route(path=route, method=method),
            seq=seq,
            status=0,
            delivered=False,
            bytes_sent=0,
            bytes_back=0,
            latency_s=0.0,
            failure=WORKER_DIED,
        )
    snapshot = trace.snapshot()
    record = orjson.loads(audit_line(name, snapshot, options.get("trace_id"), isolation="process"))
    record["worker_died"] = True
    result = RunResult(
        stdout="",
        stderr="",
        stdout_truncated=False,
        stderr_truncated=False,
        exit_code=EXIT_INTERNAL,
        timed_out=False,
        duration_s=duration_s,
        internal_error=WorkerDied.__name__,
    )
    return RunOutcome(result=result, trace=snapshot, audit=orjson.dumps(record).decode("utf-8"))


def _ask(approver: Approver | None, asked: object) -> tuple[int, str | None]:
    """The parent's side of a worker's question: (its number, the answer's value or
    None). A malformed question or a failing channel is a no, never a yes."""
    number: object = 0
    try:
        number, raw, timeout_s = asked  # type: ignore[misc]
        if approver is None:
            return int(number), Answer.NO.value  # type: ignore[call-overload]
        answer = approver(Question.from_dict(raw), float(timeout_s))
        return int(number), answer.value if answer is not None else None  # type: ignore[call-overload]
    except Exception:
        return (number if isinstance(number, int) else 0), Answer.NO.value


def _context() -> multiprocessing.context.BaseContext:
    """spawn: a fork of a threaded parent is unsafe, and a forkserver keeps the environment
    of its first start, so a worker would not see a token variable set after it."""
    return multiprocessing.get_context("spawn")


def job_args(
    code: str,
    profile: _Sent,
    *,
    caller: str,
    timeout_s: float | None = None,
    memory_mb: int | None = None,
    clock: str = "real",
    trace_id: str | None = None,
    scan_memory: bool = False,
) -> tuple[str, _Sent, str, dict[str, Any]]:
    """Exactly what crosses the pipe for one run: never a token (a test pickles it)."""
    if isinstance(profile, tuple):
        sent: _Sent = tuple(job_args(code, each, caller=caller)[1] for each in profile)  # type: ignore[misc]
    elif isinstance(profile, Profile):
        if not profile.allows(caller):  # checked again in the worker
            raise GrantsError(MSG_NOT_AVAILABLE.format(name=f'"{profile.name}"'))
        # The token block holds the key(s) too (header, query, basic, jwt signing key).
        sent = dataclasses.replace(profile, token=None, credential=None)
    else:
        sent = profile
    options: dict[str, Any] = {"clock": clock, "trace_id": trace_id}
    if timeout_s is not None:
        options["timeout_s"] = timeout_s
    if memory_mb is not None:
        options["memory_mb"] = memory_mb
    if scan_memory:
        options["scan_memory"] = True
    return code, sent, caller, options


class RunPool:
    """Warm worker processes running `run_profile` for the profiles of one grants file.

    `isolation` is the tier: `process` (workers that each hold the key next to their
    engine), `worker` or `gvisor` (engine processes holding no key; the brokers run in
    this process). An isolated tier that cannot start here is refused by the
    constructor (`IsolationError`, one line); the pool never falls back to a weaker one.

    One pipe and one dispatching thread per worker, no executor in between: the threads
    wait on their pipes with the GIL released, so the parent adds tens of microseconds
    to a run (a ProcessPoolExecutor's feeder thread cost more than a run and kept two
    workers at the speed of one). `submit` returns a Future; `run` waits for it. A
    worker that dies during a run ends that run with exit 70 and an audit line marked
    `worker_died` (see the module's docstring) and is replaced.
    """

    def __init__(
        self,
        grants_path: str | os.PathLike[str],
        *,
        workers: int | None = None,
        isolation: str = "process",
        wait: bool = True,
    ) -> None:
        """`wait=False` returns while the workers of an isolated tier are still starting,
        for a caller with work of its own to do meanwhile; it then calls `started`."""
        self.grants_path = str(Path(grants_path))
        if isolation not in TIERS:
            raise IsolationError(f"--isolation {isolation!r}: choose one of {', '.join(TIERS)}")
        #: The tier every run of this pool runs on (runtime/tiers/launch.py).
        self.isolation = isolation
        # A bad file is refused here, in one line, not in a worker. On an isolated tier
        # this is the one copy of the grants (and keys) the pool's runs use.
        self._grants = load(self.grants_path)
        if isolation != "process":
            command(isolation)  # a missing bwrap or runsc is refused here, in one line
        self.workers = max(1, workers or self.default_workers())
        self._start_error: BaseException | None = None
        self._jobs: queue.SimpleQueue[
            tuple[concurrent.futures.Future, tuple, Approver | None, contextvars.Context] | None
        ] = queue.SimpleQueue()
        self._ready = [threading.Event() for _ in range(self.workers)]
        #: What each worker is running a job on now (its process, or its engine
        #: process on an isolated tier), for `interrupt`; None between jobs.
        self._running: list[Any] = [None] * self.workers
        #: Set by `interrupt`: no run starts after it.
        self._interrupted = False
        #: Runs on engine processes now, which sets how long each looks for frames.
        self._busy = 0
        self._busy_lock = threading.Lock()
        self._closed = False
        self._threads = [
            threading.Thread(target=self._serve, args=(i,), name=f"plimsoll-pool-{i}", daemon=True)
            for i in range(self.workers)
        ]
        for t in self._threads:
            t.start()
        if wait:
            self.started()

    def started(self) -> None:
        """On an isolated tier, wait until every worker's engine process has started, and
        raise (the pool closed) when the tier cannot run here, so that is said at once,
        in one line, not at the first run. The constructor calls it unless told not to."""
        if self.isolation == "process":
            return
        self.warm()
        if self._start_error is not None:
            error = self._start_error
            self.close()
            raise error

    @staticmethod
    def default_workers() -> int:
        """One worker per core this process may run on: `--workers` when omitted."""
        try:
            return len(os.sched_getaffinity(0)) or 1
        except (AttributeError, OSError):  # no affinity outside Linux
            return os.cpu_count() or 1

    def _spawn(self) -> tuple[multiprocessing.process.BaseProcess, Connection]:
        ctx = _context()
        parent, child = ctx.Pipe()
        proc = ctx.Process(target=_worker_main, args=(child, self.grants_path), daemon=True)
        proc.start()
        child.close()
        return proc, parent

    def _start(
        self,
    ) -> tuple[multiprocessing.process.BaseProcess | None, Connection | None, str, object]:
        """A new worker and its first word: ("ready", pid), or ("err", why it could not start).

        Never raises: an exception here would end the dispatching thread and leave every
        run queued behind it waiting for ever.
        """
        try:
            proc, conn = self._spawn()
        except Exception as exc:  # no process to start (limits, a main module without
            # the `if __name__ == "__main__"` guard that spawn needs)
            return None, None, "err", WorkerDied(f"a pool worker could not start: {exc}")
        try:
            kind, value = conn.recv()
        except (EOFError, OSError):
            kind, value = "err", WorkerDied("a pool worker ended while starting")
        return proc, conn, kind, value

    def _serve(self, index: int) -> None:
        if self.isolation != "process":
            self._serve_isolated(index)
            return
        proc, conn, kind, value = self._start()
        self._ready[index].set()
        while True:
            item = self._jobs.get()
            if item is None:
                break
            future, job, approver, _ = item
            if not future.set_running_or_notify_cancel():
                continue
            if self._interrupted:
                future.set_exception(concurrent.futures.CancelledError())
                continue
            if kind == "err" or proc is None or conn is None:  # every job hears why
                future.set_exception(value)  # type: ignore[arg-type]
                continue
            started = time.monotonic()
            admitted: list[tuple[int, str, str]] = []
            self._running[index] = proc
            if self._interrupted:  # it came while this job was being taken
                proc.kill()
            try:
                conn.send(job)
                answer, result = conn.recv()
                while answer in ("admitted", "approve"):
                    if answer == "admitted":
                        admitted.append(result)  # type: ignore[arg-type]
                    else:
                        conn.send(("answer", *_ask(approver, result)))
                    answer, result = conn.recv()
            except (EOFError, OSError):
                self._running[index] = None
                future.set_result(_lost(job, time.monotonic() - started, admitted))
                conn.close()
                proc.join(timeout=1)
                proc, conn, kind, value = self._start()
                continue
            self._running[index] = None
            if answer == "ok":
                future.set_result(result)
            else:
                future.set_exception(result)  # type: ignore[arg-type]
        if proc is None or conn is None:
            return
        with contextlib.suppress(OSError):
            conn.send(None)
        proc.join(timeout=5)
        if proc.is_alive():
            proc.kill()
        conn.close()

    def _engine(self) -> EngineProcess | BaseException:
        """A new engine process with every profile's image, or why it could not start."""
        try:
            # The grants file is covered even when it sits in a folder the engine sees.
            engine = EngineProcess(self.isolation, hidden=[Path(self.grants_path)])
        except Exception as exc:
            return exc
        try:
            for profile in self._grants.profiles:
                engine.warm(_guest_grant(profile))
        except Exception as exc:
            engine.kill()
            return IsolationError(f"--isolation {self.isolation}: warming the engine failed: {exc}")
        return engine

    def _profile_for(self, sent: _Sent, caller: str) -> Profile | tuple[Profile, ...]:
        """The profile a run uses on an isolated tier, from this process's own grants."""
        if isinstance(sent, tuple):
            return tuple(self._profile_for(each, caller) for each in sent)  # type: ignore[misc]
        if isinstance(sent, Profile):
            profile = sent  # the submitter's own, key included: it never leaves this process
        else:
            found = next((p for p in self._grants.profiles if p.name == sent), None)
            if found is None:
                raise GrantsError(MSG_NOT_AVAILABLE.format(name=f'"{sent}"'))
            profile = found
        if not profile.allows(caller):
            raise GrantsError(MSG_NOT_AVAILABLE.format(name=f'"{profile.name}"'))
        return profile

    def _serve_isolated(self, index: int) -> None:
        engine = self._engine()
        if isinstance(engine, BaseException):
            self._start_error = self._start_error or engine
        self._ready[index].set()
        while True:
            item = self._jobs.get()
            if item is None:
                break
            future, job, approver, context = item
            if not future.set_running_or_notify_cancel():
                continue
            if self._interrupted:
                future.set_exception(concurrent.futures.CancelledError())
                continue
            if isinstance(engine, BaseException):
                engine = self._engine()  # a replacement that failed to start: try again
            elif not engine.alive or engine.worn:
                # It died between runs (killed, out of memory), or is near its CPU
                # limit and could die in the next: a new one.
                engine.kill()
                engine = self._engine()
            if isinstance(engine, BaseException):
                future.set_exception(engine)
                continue
            code, sent, caller, options = job
            try:
                profile = self._profile_for(sent, caller)
                scan = options.pop("scan_memory", False)
                scanned = _scanned_key(profile) if scan else None
                limits = Limits(
                    timeout_s=options.get("timeout_s", DEFAULT_TIMEOUT_S),
                    memory_mb=options.get("memory_mb", DEFAULT_MEMORY_MB),
                    clock=options.get("clock", "real"),
                )
                with self._busy_lock:
                    self._busy += 1
                    engine.spin_s = spin_for(self._busy)
                self._running[index] = engine
                if self._interrupted:  # it came while this engine was being replaced
                    engine.kill()
                try:
                    # In the submitter's context, so the run's span is a child of the
                    # span that asked for it (an MCP tools/call).
                    outcome = context.run(
                        run_isolated,
                        engine,
                        code,
                        profile,
                        caller=caller,
                        limits=limits,
                        trace_id=options.get("trace_id"),
                        scan_memory_for=scanned,
                        approver=approver,
                    )
                finally:
                    self._running[index] = None
                    with self._busy_lock:
                        self._busy -= 1
            except BaseException as exc:
                future.set_exception(exc)
            else:
                future.set_result(outcome)
            if not engine.alive:  # it died, was killed or broke the protocol: a new one
                engine.kill()
                engine = self._engine()
        if not isinstance(engine, BaseException):
            engine.close()

    def interrupt(self) -> int:
        """Stop the runs going on now by killing the processes running them (an
        operator's Ctrl-C), and start no run after it: each queued one ends with
        CancelledError. Returns how many were killed. Each killed run ends as a run
        whose worker died does: its record lists every call its broker had admitted."""
        self._interrupted = True
        killed = 0
        for running in list(self._running):
            if running is not None:
                with contextlib.suppress(Exception):
                    running.kill()
                    killed += 1
        return killed

    def warm(self) -> None:
        """Wait until every worker has loaded the engine and its images."""
        for event in self._ready:
            event.wait()

    def submit(
        self,
        code: str,
        profile: _Sent,
        *,
        caller: str,
        timeout_s: float | None = None,
        memory_mb: int | None = None,
        clock: str = "real",
        trace_id: str | None = None,
        scan_memory: bool = False,
        approver: Approver | None = None,
    ) -> concurrent.futures.Future[RunOutcome]:
        """Queue one run; the arguments mean what they mean for `run_profile`, but for
        `scan_memory`: count the profile's own key in the guest's memory after the run
        (`run_profile`'s `scan_memory_for`, with the key the worker read itself).
        `approver` stays in this process: a worker process asks it over the pipe, and on
        an isolated tier the broker, in this process too, asks it directly."""
        job = job_args(
            code,
            profile,
            caller=caller,
            timeout_s=timeout_s,
            memory_mb=memory_mb,
            clock=clock,
            trace_id=trace_id,
            scan_memory=scan_memory,
        )
        if self.isolation != "process":
            # No pipe to a key holder: the run stays in this process's hands, so the
            # submitted Profile (with its key) is used as it is.
            job = (code, profile, caller, job[3])
        if approver is not None:
            job[3]["approval_channel"] = str(getattr(approver, "channel", "parent"))
        if self._closed:
            raise RuntimeError("the RunPool is closed")
        future: concurrent.futures.Future[RunOutcome] = concurrent.futures.Future()
        self._jobs.put((future, job, approver, contextvars.copy_context()))
        return future

    def run(self, code: str, profile: _Sent, *, caller: str, **options: Any) -> RunOutcome:
        """`submit(...).result()`: a drop-in for `run_profile` on any thread."""
        return self.submit(code, profile, caller=caller, **options).result()

    def close(self) -> None:
        """Finish the queued runs, then stop every worker."""
        if self._closed:
            return
        self._closed = True
        for _ in self._threads:
            self._jobs.put(None)
        for t in self._threads:
            t.join()

    def __enter__(self) -> RunPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
