"""One run with a grant: a fresh sandbox, a fresh broker, one audit line.

This is the only place the three pieces meet (`runtime.sandbox` and `runtime.broker`
never import each other). The sandbox gets the guest's view of the
grant (global name, a copy of the allow list, the preamble) and the broker as its host
call handler; the key stays inside the broker. The broker is closed when the guest
finishes, so nothing the guest left running can use the grant afterwards.

Every run ends with its audit record, whatever happens inside: an unexpected exception
from the sandbox (a host fault no guest should be able to cause, but one did: a clock
overflow once ended runs whose granted POST had already reached the API) becomes a
`RunResult` with exit `EXIT_INTERNAL` (70) and `internal_error` naming the fault's type,
together with the broker's trace and audit line. The only exceptions these functions
raise are `Refusal`s for bad input, before the broker exists or the guest starts.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import httpx

from runtime import sandbox, telemetry
from runtime.broker import Broker, Profile, TraceSnapshot, audit_line, check_trace_id
from runtime.broker.approval import Approver
from runtime.broker.several import BrokerSet
from runtime.errors import GrantsError, Refusal, RunInputError
from runtime.messages import MSG_NOT_AVAILABLE
from runtime.profile_set import (
    Profiles,
    as_profiles,
    audit_name,
    guest_grant,
    open_broker,
    run_name,
    total_calls,
)
from runtime.run_clock import RunClock

#: Host calls the sandbox lets through beyond the broker's own budget, so that calls
#: refused for the budget are still seen (and counted denied) by the broker, while a
#: guest looping on refusals is still stopped by the sandbox.
_SANDBOX_CALL_HEADROOM = 1024


#: The clocks of the runs going on in this process, for `end_runs_now`.
_RUNNING: set[RunClock] = set()
_RUNNING_LOCK = threading.Lock()


def end_runs_now() -> int:
    """End every run going on in this process now; returns how many there were.

    For an operator's interrupt (Ctrl-C): each run's clock ends, so its broker refuses
    later calls (`run_ended`) and no wait for a reply outlasts it, and the engine's epoch
    moves past the guest's deadline, so a guest that is computing traps at its next
    check. Each run then ends as a timed-out run does, with its trace and audit record;
    a call already on the wire ends within its own timeout.
    """
    with _RUNNING_LOCK:
        clocks = list(_RUNNING)
    left = max((clock.end() for clock in clocks), default=0.0)
    if clocks:
        # A guest's epoch deadline was set from its timeout when its instance was made
        # (later than its clock started), or from its clock after a held call: past the
        # longer of the two, every one of them is reached.
        sandbox.expire_runs(max(left, sandbox.MAX_TIMEOUT_S) + 1.0)
    return len(clocks)


@dataclass(frozen=True)
class RunOutcome:
    """A finished run: the guest's result, the broker's trace and the audit line."""

    result: sandbox.RunResult
    trace: TraceSnapshot
    audit: str
    #: Occurrences of `scan_memory_for` in the guest's memory at the end (run_profile).
    memory_hits: int = 0
    #: Its operator's interrupt (`end_runs_now`, a pool's `interrupt`) ended it early.
    interrupted: bool = False


def run_with_grant(
    code: str,
    profile: Profiles,
    *,
    limits: sandbox.Limits | None = None,
    trace_id: str | None = None,
    transport: httpx.BaseTransport | None = None,
    memory_probe: Callable[[bytes], None] | None = None,
    caller: str | None = None,
    approver: Approver | None = None,
) -> RunOutcome:
    """Run `code` in a fresh sandbox whose host calls go through a broker for `profile`.

    A bad trace_id is refused (TraceIdError) before anything runs. `transport` replaces
    the broker's HTTP transport (tests); `memory_probe` receives the guest's linear
    memory at the end (key-confinement tests). `caller` is who asked for the run: a jwt
    profile mints its per-run token for it, and refuses (GrantsError) without one.
    `profile` may be a tuple of profiles (runtime/profile_set.py): each one's client is
    then its own global in the one sandbox, each call decided by its own profile's broker.
    """
    if not isinstance(code, str):
        raise RunInputError(f"code must be a str, not {type(code).__name__}")
    profiles = as_profiles(profile)
    if trace_id is not None:
        check_trace_id(trace_id)
    limits = _checked(limits if limits is not None else sandbox.Limits())
    limits = dataclasses.replace(
        limits,
        max_host_calls=max(limits.max_host_calls, total_calls(profiles) + _SANDBOX_CALL_HEADROOM),
    )
    grant = guest_grant(profiles)
    # Taken before the sandbox starts its own clock, so no upstream call outlives the run.
    deadline = time.monotonic() + limits.timeout_s
    clock = RunClock(limits.timeout_s)
    with _RUNNING_LOCK:  # from now: an interrupt while the engine loads ends it too
        _RUNNING.add(clock)
    try:
        return _run_with_clock(
            code, profiles, limits, grant, deadline, clock, trace_id, transport,
            memory_probe, caller, approver,
        )  # fmt: skip
    finally:
        with _RUNNING_LOCK:
            _RUNNING.discard(clock)


def _run_with_clock(
    code: str,
    profiles: tuple[Profile, ...],
    limits: sandbox.Limits,
    grant: sandbox.GuestGrant | tuple[sandbox.GuestGrant, ...],
    deadline: float,
    clock: RunClock,
    trace_id: str | None,
    transport: httpx.BaseTransport | None,
    memory_probe: Callable[[bytes], None] | None,
    caller: str | None,
    approver: Approver | None,
) -> RunOutcome:
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
        broker, run_name(profiles), caller=caller, tier="process", trace_id=trace_id
    )
    started = time.monotonic()
    try:
        result = sandbox.run(
            code,
            grant=grant,
            handler=broker,
            limits=limits,
            memory_probe=memory_probe,
            clock=clock,
        )
    except Refusal:
        if broker.calls:
            result = _internal(started, "EngineError")
        else:  # the engine could not be set up: nothing ran, nothing reached the API
            _close(broker)
            telemetry.end_run(span)
            raise
    except Exception as exc:
        result = _internal(started, type(exc).__name__)
    snapshot = _close(broker)
    # Calls the sandbox refused itself never reached the broker; they are denied too.
    snapshot = dataclasses.replace(snapshot, denied=snapshot.denied + result.refused_calls)
    outcome = RunOutcome(
        result=result,
        trace=snapshot,
        audit=audit_line(audit_name(profiles), snapshot, trace_id, isolation="process"),
    )
    telemetry.end_run(span, outcome)
    return outcome


def _checked(limits: sandbox.Limits) -> sandbox.Limits:
    """The caller's limits, normalised; a value no run can honour is a RunInputError."""
    if not isinstance(limits, sandbox.Limits):
        raise RunInputError(f"limits must be a Limits, not {type(limits).__name__}")
    try:
        timeout_s = float(limits.timeout_s)
        memory_mb = limits.memory_mb
        if isinstance(memory_mb, bool) or not isinstance(memory_mb, int):
            raise TypeError
    except (TypeError, ValueError):
        raise RunInputError("limits: timeout_s must be a number, memory_mb an integer") from None
    if timeout_s != timeout_s:
        raise RunInputError("limits: timeout_s must be a number, memory_mb an integer")
    if 0 < memory_mb < sandbox.MIN_MEMORY_MB:
        raise RunInputError(
            f"memory_mb {memory_mb} is below the engine's minimum of {sandbox.MIN_MEMORY_MB} MiB"
        )
    return limits.normalised()


def _internal(started: float, kind: str) -> sandbox.RunResult:
    """The result of a run a host fault ended outside the sandbox's own handling."""
    return sandbox.RunResult(
        stdout="",
        stderr="",
        stdout_truncated=False,
        stderr_truncated=False,
        exit_code=sandbox.EXIT_INTERNAL,
        timed_out=False,
        duration_s=time.monotonic() - started,
        internal_error=kind,
    )


def _close(broker: Broker | BrokerSet) -> TraceSnapshot:
    """End the broker's session; its trace survives even a failure to close the client."""
    try:
        return broker.close()
    except Exception:
        return broker.trace.snapshot()


def run_profile(
    code: str,
    profile: Profiles,
    *,
    caller: str,
    timeout_s: float = sandbox.DEFAULT_TIMEOUT_S,
    memory_mb: int = sandbox.DEFAULT_MEMORY_MB,
    clock: str = "real",
    trace_id: str | None = None,
    scan_memory_for: str | None = None,
    approver: Approver | None = None,
) -> RunOutcome:
    """`run_with_grant` for a caller, with an optional scan of guest memory for a string.

    The caller is checked again here (same message as selection), so code holding a
    Profile cannot run it for a caller the operator did not list. `scan_memory_for`
    counts the string's UTF-8 and UTF-16 occurrences in the guest's linear memory after
    the run: the example uses it to show the key is nowhere in the sandbox. With a tuple
    of profiles, every one of them must allow the caller.
    """
    for each in as_profiles(profile):
        if not each.allows(caller):
            raise GrantsError(MSG_NOT_AVAILABLE.format(name=f'"{each.name}"'))
    snapshots: list[bytes] = []
    outcome = run_with_grant(
        code,
        profile,
        limits=sandbox.Limits(timeout_s=timeout_s, memory_mb=memory_mb, clock=clock),  # type: ignore[arg-type]
        trace_id=trace_id,
        memory_probe=snapshots.append if scan_memory_for else None,
        caller=caller,
        approver=approver,
    )
    if not scan_memory_for:
        return outcome
    memory = snapshots[0] if snapshots else b""
    hits = sum(memory.count(scan_memory_for.encode(enc)) for enc in ("utf-8", "utf-16-le"))
    return dataclasses.replace(outcome, memory_hits=hits)
