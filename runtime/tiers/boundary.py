"""The broker's side of the wall: an engine process, and one run through it.

The broker, the grant and the key stay in this process; the engine process
(`engine_process.py`, started by `launch.py`) gets only the guest's view of the grant
and asks for each host call over its pipe. This side decides each call with a fresh
`Broker`, exactly as `session.run_with_grant` does in-process (a started call is
decided on arrival, in the guest's order, and only sent on a thread), and keeps the
trace. A call the grant holds for approval is asked here, of the approver the run was
given (the broker and the approver are both in this process); while it is held, this
side's `RunClock` stops, and each hold is told to the engine process (`hold`, then
`release`) so the sandbox's clock there stops too. The engine cannot do the reverse:
a `hold` from it is a protocol error, and this side ends the run by its own clock.
Whatever the engine process does (dies, is killed, stalls, sends a malformed
or oversized frame) the run ends with its audit line here, listing every call the
broker admitted; the engine process is then killed and a new one started.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
import itertools
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

from runtime import sandbox, telemetry
from runtime.broker import Broker, Profile, audit_line
from runtime.broker.approval import Approver
from runtime.broker.handler import MAX_IN_FLIGHT
from runtime.broker.several import BrokerSet
from runtime.contract import HostReply, HostRequest
from runtime.identity_memo import IdentityMemo
from runtime.profile_set import (
    as_profiles,
    audit_name,
    guest_grant,
    open_broker,
    run_name,
    total_calls,
)
from runtime.run_clock import RunClock
from runtime.sandbox.terms import MAX_PENDING_CALLS
from runtime.session import _SANDBOX_CALL_HEADROOM, RunOutcome, _checked
from runtime.tiers import launch, wire

#: How long an engine process may take to start (imports, engine, a cold gVisor).
START_TIMEOUT_S = 60.0
#: How long one frame to the engine may wait for room in its pipe.
SEND_TIMEOUT_S = 5.0
#: How long past a run's deadline the broker waits for the engine's `done`.
DONE_GRACE_S = 3.0
#: Grants one engine process keeps (each with its memory image, which the engine's own
#: image cache bounds too); past this the least recently used is forgotten on both sides.
MAX_GRANTS = 64
#: CPU seconds after which a pool retires an engine process (`EngineProcess.worn`):
#: half its lifetime limit (`launch.CPU_LIMIT_S`, past which the kernel kills it), far
#: more than any one run can use, so no run is begun on an engine that might die in it.
RETIRE_CPU_S = launch.CPU_LIMIT_S / 2
#: `internal_error` of a run whose engine process died, stalled or broke the protocol.
ENGINE_DIED = "EngineDied"
ENGINE_PROTOCOL = "EngineProtocolError"
_STDERR_KEPT = 2048
#: Started calls the broker holds decided before the engine says go: the sandbox's own
#: bound on unsettled calls.
MAX_UNSENT_CALLS = MAX_PENDING_CALLS


#: A grant as content: per grant, its global name, allow list and preamble.
_GrantKey = tuple[tuple[str, tuple[tuple[str, str], ...], str], ...]


def _content_key(grants: tuple[sandbox.GuestGrant, ...]) -> _GrantKey:
    return tuple(
        (g.global_name, tuple((r.method, r.path) for r in g.allow), g.preamble) for g in grants
    )


class EngineProcess:
    """One warm engine process on a tier; one run at a time."""

    def __init__(
        self,
        tier: str,
        *,
        hidden: Iterable[Path] = (),
        escape_hook: bool = False,
    ) -> None:
        self.tier = tier
        argv = launch.command(tier, hidden, escape_hook=escape_hook)
        #: The grants the engine process holds (each with its image built), by content,
        #: to the number it knows each by; least recently used first (MAX_GRANTS).
        self._grants: collections.OrderedDict[_GrantKey, int] = collections.OrderedDict()
        #: Content keys by the identity of the objects a grant is made of: a profile
        #: hands every run the same allow tuple and preamble string, so a run looks its
        #: grant up without walking its allow list.
        self._keys: IdentityMemo[_GrantKey] = IdentityMemo(MAX_GRANTS)
        self._refs = itertools.count(1)
        self._writing = threading.Lock()
        self._stderr = b""
        try:
            self.proc = launch.popen(argv)
        except OSError as exc:
            raise launch.IsolationError(
                f"--isolation {tier}: could not start the engine process: {exc.strerror or exc}"
            ) from None
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._in = self.proc.stdout.fileno()
        os.set_blocking(self._in, False)
        self._reader = wire.FrameReader(self._in, spin_s=wire.spin_for(1))
        #: The CPU seconds the engine process said it had used, at its last run's end:
        #: its own word, so it only decides when to retire it (one that understates it
        #: is killed by its limit instead, which ends that run as ENGINE_DIED).
        self.cpu_s = 0.0
        self._out = self.proc.stdin.fileno()
        os.set_blocking(self._out, False)
        drain = threading.Thread(target=self._drain_stderr, daemon=True)
        drain.start()
        try:
            hello, _ = self._reader.read(deadline=time.monotonic() + START_TIMEOUT_S)
            if hello.get("t") != "hello" or not isinstance(hello.get("pid"), int):
                raise wire.WireError("no hello")
        except wire.WireError:
            self.kill()
            drain.join(timeout=2)  # its last words, if it said any
            why = self._stderr.decode("utf-8", "replace").strip().splitlines()
            raise launch.IsolationError(
                f"--isolation {tier}: the engine process did not start"
                + (f": {why[-1][:200]!r}" if why else "")
            ) from None
        #: The engine's pid as it sees itself (inside its pid namespace); the process
        #: this side started is `proc.pid` (bwrap).
        self.inner_pid: int = hello["pid"]

    def _drain_stderr(self) -> None:
        """Keep the last bytes of its stderr (for a start that failed); never block it."""
        stream = self.proc.stderr
        assert stream is not None
        with contextlib.suppress(OSError, ValueError):
            while chunk := stream.read1(4096):  # type: ignore[attr-defined]
                self._stderr = (self._stderr + chunk)[-_STDERR_KEPT:]

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    @property
    def worn(self) -> bool:
        """Whether it has used enough CPU to be replaced before its next run."""
        return self.cpu_s >= RETIRE_CPU_S

    @property
    def spin_s(self) -> float:
        """How long each side looks for the other's next frame before it sleeps: set
        per run (`wire.spin_for`), told to the engine process in the run's frame."""
        return self._reader.spin_s

    @spin_s.setter
    def spin_s(self, value: float) -> None:
        self._reader.set_spin(value)

    def begin_run(self) -> None:
        """A run starts: whether a wait is worth a spin is guessed afresh."""
        self._reader.set_spin(self._reader.spin_s)

    def send(self, header: dict[str, Any], blob: bytes = b"") -> None:
        """One whole frame; a lock per process, so frames from the threads answering
        calls (this run's or a late one of the last) never interleave. An engine that
        stops reading is given SEND_TIMEOUT_S (a sound one reads whenever a frame is due
        to it: some thread of it waits for every reply it asked for), then a
        WireTimeout, never a broker blocked for ever on a full pipe."""
        with self._writing:
            wire.write_frame(self._out, header, blob, deadline=time.monotonic() + SEND_TIMEOUT_S)

    def read(self, deadline: float, *, max_blob: int = wire.MAX_BLOB_BYTES) -> tuple[dict, bytes]:
        return self._reader.read(deadline=deadline, max_blob=max_blob)

    def warm(self, grant: sandbox.GuestGrant | tuple[sandbox.GuestGrant, ...]) -> int:
        """The number the engine process knows the grant (or several grants) by, its
        memory image built there: sent and built once, so a run's frame names the grant
        by this number instead of carrying its allow list and preamble again (GitHub's
        are ~0.3 MB, which every run decoded and composed anew)."""
        grants = grant if isinstance(grant, tuple) else (grant,)
        key = self._key_of(grants)
        ref = self._grants.get(key)
        if ref is not None:
            self._grants.move_to_end(key)
            return ref
        forget = []
        while len(self._grants) >= MAX_GRANTS:
            forget.append(self._grants.popitem(last=False)[1])
        ref = next(self._refs)
        self.send({"t": "warm", "ref": ref, "forget": forget, "grant": wire.grant_fields(grant)})
        ready, _ = self.read(time.monotonic() + START_TIMEOUT_S)
        if ready.get("t") != "ready":
            raise wire.WireError("no ready")
        self._grants[key] = ref
        return ref

    def _key_of(self, grants: tuple[sandbox.GuestGrant, ...]) -> _GrantKey:
        """The grants' content key, found by the identity of their parts when each allow
        list is a tuple (which cannot change, as a profile's cannot); read afresh else."""
        if not all(type(g.allow) is tuple for g in grants):
            return _content_key(grants)
        parts = tuple(part for g in grants for part in (g.global_name, g.allow, g.preamble))
        return self._keys.get(parts, lambda: _content_key(grants))

    def kill(self) -> None:
        """End it and everything it started (its own session, so its group)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)
        for stream in (self.proc.stdin, self.proc.stdout):
            with contextlib.suppress(OSError):
                if stream is not None:
                    stream.close()

    def close(self) -> None:
        self.kill()


def _decided(broker: Broker | BrokerSet, request: HostRequest) -> Callable[[], HostReply]:
    """A started call decided now (in the guest's order): what sends it, or a 500."""
    try:
        return broker.start(request)
    except Exception:
        return functools.partial(HostReply, status=500, body=b"")


def _safe(work: Callable[[], HostReply]) -> HostReply:
    """A broker fault becomes a 500 with no detail, as the in-process bridge does."""
    try:
        return work()
    except Exception:
        return HostReply(status=500, body=b"")


class _ToldClock(RunClock):
    """The broker's run clock, each of whose holds the engine process is told of.

    `hold` goes once the hold is open here and `release` just before it closes, so the
    engine's clock stops for no longer than this one does; a frame that cannot be sent
    (the engine stopped reading, or died) is dropped, and the engine then only runs out
    of time sooner, never later.
    """

    def __init__(self, timeout_s: float, engine: EngineProcess) -> None:
        super().__init__(timeout_s)
        self._engine = engine

    def _tell(self, kind: str) -> None:
        with contextlib.suppress(OSError, wire.WireError):
            self._engine.send({"t": kind})

    @contextlib.contextmanager
    def hold(self) -> Iterator[None]:
        with super().hold():
            self._tell("hold")
            try:
                yield
            finally:
                self._tell("release")


def _read(engine: EngineProcess, clock: RunClock, max_blob: int) -> tuple[dict[str, Any], bytes]:
    """The engine's next frame, waited for until the run's deadline (this side's clock,
    moved only by this side's holds) and a grace: a frame-less engine is given no more."""
    while True:
        try:
            return engine.read(clock.deadline() + DONE_GRACE_S, max_blob=max_blob)
        except wire.WireTimeout:
            if clock.deadline() + DONE_GRACE_S <= time.monotonic():
                raise


def run_isolated(
    engine: EngineProcess,
    code: str,
    profile: Profile | tuple[Profile, ...],
    *,
    caller: str | None,
    limits: sandbox.Limits | None = None,
    trace_id: str | None = None,
    transport: httpx.BaseTransport | None = None,
    scan_memory_for: str | None = None,
    approver: Approver | None = None,
) -> RunOutcome:
    """`run_with_grant`, with the engine in `engine`'s process and the broker here.

    Raises only `Refusal`s for bad input, before the broker exists; every run that
    starts ends with an outcome and its audit line (which names the tier). After a run
    whose engine process failed, `engine.alive` is False: the caller starts another.
    `approver` is asked about the calls the grant holds, here, as in-process.
    """
    if trace_id is not None:
        from runtime.broker import check_trace_id

        check_trace_id(trace_id)
    profiles = as_profiles(profile)
    limits = _checked(limits if limits is not None else sandbox.Limits())
    limits = dataclasses.replace(
        limits,
        max_host_calls=max(limits.max_host_calls, total_calls(profiles) + _SANDBOX_CALL_HEADROOM),
    )
    grant = guest_grant(profiles)
    if not engine.alive:
        raise launch.IsolationError(f"--isolation {engine.tier}: the engine process has ended")
    deadline = time.monotonic() + limits.timeout_s
    clock = _ToldClock(limits.timeout_s, engine)
    broker = open_broker(
        profiles,
        deadline=deadline,
        transport=transport,
        caller=caller,
        run_timeout_s=limits.timeout_s,
        run_clock=clock,
        approver=approver,
    )
    span = telemetry.start_run(
        broker, run_name(profiles), caller=caller, tier=engine.tier, trace_id=trace_id
    )
    started = time.monotonic()
    senders: ThreadPoolExecutor | None = None
    probe = scan_memory_for is not None
    memory = b""

    def answer(call_id: int, reply: HostReply) -> None:
        header, body = wire.reply_frame(call_id, reply)
        try:
            engine.send(header, body)
        except OSError:
            return  # the engine is gone: the run's loop reads as much next

    def send_later(call_id: int, work: Callable[[], HostReply]) -> None:
        answer(call_id, _safe(work))

    result: sandbox.RunResult | None = None
    failure = ""
    #: Started calls the broker decided and the engine has not said `go` for yet.
    decided: dict[int, Callable[[], HostReply]] = {}
    try:
        ref = engine.warm(grant)  # at once when the pool warmed it; else built now
        engine.begin_run()
        engine.send(
            {
                "t": "run",
                "code": code,
                "grant": ref,
                "limits": wire.limits_fields(limits),
                "probe": probe,
                "spin_us": round(engine.spin_s * 1e6),
            }
        )
        max_blob = (limits.memory_mb << 20) + (1 << 20) if probe else wire.MAX_BLOB_BYTES
        while result is None:
            frame, blob = _read(engine, clock, max_blob)
            kind, call_id = frame["t"], frame.get("id")
            if kind == "done":
                result = wire.result_from(
                    frame.get("result") or {}, output_bytes=limits.output_bytes
                )
                memory = blob
                used = frame.get("cpu_s")
                if isinstance(used, int | float) and not isinstance(used, bool):
                    engine.cpu_s = float(used)
            elif kind in ("call", "start") and isinstance(call_id, int):
                request = wire.request_from(frame, blob)
                if kind == "call":
                    answer(call_id, _safe(functools.partial(broker, request)))
                    continue
                go = frame.get("go", False)
                if type(go) is not bool:
                    raise wire.WireError("a start's go is not a boolean")
                if go:  # started and sent at once, the guest waiting for this call alone
                    answer(call_id, _safe(_decided(broker, request)))
                    continue
                if call_id in decided or len(decided) >= MAX_UNSENT_CALLS:
                    # A sandbox holds at most MAX_PENDING_CALLS unsettled; an engine
                    # claiming more is not one (and would grow this table for ever).
                    raise wire.WireError("a call id used twice, or too many calls unsent")
                # Decided now, in the guest's order; sent when the engine says go.
                decided[call_id] = _decided(broker, request)
            elif kind == "go" and isinstance(call_id, int) and call_id in decided:
                work = decided.pop(call_id)
                if frame.get("inline") is True:  # the guest waits for this call alone
                    answer(call_id, _safe(work))
                    continue
                if senders is None:
                    senders = ThreadPoolExecutor(MAX_IN_FLIGHT, thread_name_prefix="plimsoll-send")
                senders.submit(send_later, call_id, work)
            else:
                raise wire.WireError(f"unexpected frame {kind[:20]!r}")
    except wire.WireError as exc:
        failure = (
            ENGINE_DIED if isinstance(exc, wire.PeerGone | wire.WireTimeout) else ENGINE_PROTOCOL
        )
    except (OSError, ValueError):
        failure = ENGINE_DIED
    except Exception:
        # Any other fault while reading the engine's frames (a decoder that missed a
        # shape) is the engine's breach too: the run still ends here, with its audit line.
        failure = ENGINE_PROTOCOL
    if result is None:
        engine.kill()  # whatever it was doing, it does no more
        result = sandbox.RunResult(
            stdout="",
            stderr="",
            stdout_truncated=False,
            stderr_truncated=False,
            exit_code=sandbox.EXIT_INTERNAL,
            timed_out=False,
            duration_s=time.monotonic() - started,
            internal_error=failure or ENGINE_DIED,
        )
    try:
        snapshot = broker.close()
    except Exception:
        snapshot = broker.trace.snapshot()
    if senders is not None:
        # Closing the broker ended every call (cancelled, or answered within its grace),
        # so the threads that answer them are done or about to be.
        senders.shutdown(wait=True, cancel_futures=True)
    snapshot = dataclasses.replace(snapshot, denied=snapshot.denied + result.refused_calls)
    hits = 0
    if scan_memory_for:
        hits = sum(memory.count(scan_memory_for.encode(enc)) for enc in ("utf-8", "utf-16-le"))
    outcome = RunOutcome(
        result=result,
        trace=snapshot,
        audit=audit_line(audit_name(profiles), snapshot, trace_id, isolation=engine.tier),
        memory_hits=hits,
    )
    telemetry.end_run(span, outcome)
    return outcome
