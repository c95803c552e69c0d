"""One run with a grant: a fresh sandbox, a fresh broker, one audit line.

This is the only place the three pieces meet (`runtime.sandbox` and `runtime.broker`
never import each other). The sandbox gets the guest's view of the
grant (global name, a copy of the allow list, the preamble) and the broker as its host
call handler; the key stays inside the broker. The broker is closed when the guest
finishes, so nothing the guest left running can use the grant afterwards.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass

import httpx

from runtime import sandbox
from runtime.broker import Broker, Profile, TraceSnapshot, audit_line, check_trace_id
from runtime.errors import GrantsError
from runtime.messages import MSG_NOT_AVAILABLE

#: Host calls the sandbox lets through beyond the broker's own budget, so that calls
#: refused for the budget are still seen (and counted denied) by the broker, while a
#: guest looping on refusals is still stopped by the sandbox.
_SANDBOX_CALL_HEADROOM = 1024


@dataclass(frozen=True)
class RunOutcome:
    """A finished run: the guest's result, the broker's trace and the audit line."""

    result: sandbox.RunResult
    trace: TraceSnapshot
    audit: str
    #: Occurrences of `scan_memory_for` in the guest's memory at the end (run_profile).
    memory_hits: int = 0


def run_with_grant(
    code: str,
    profile: Profile,
    *,
    limits: sandbox.Limits | None = None,
    trace_id: str | None = None,
    transport: httpx.BaseTransport | None = None,
    memory_probe: Callable[[bytes], None] | None = None,
) -> RunOutcome:
    """Run `code` in a fresh sandbox whose host calls go through a broker for `profile`.

    A bad trace_id is refused (TraceIdError) before anything runs. `transport` replaces
    the broker's HTTP transport (tests); `memory_probe` receives the guest's linear
    memory at the end (key-confinement tests).
    """
    if trace_id is not None:
        check_trace_id(trace_id)
    limits = (limits or sandbox.Limits()).normalised()
    limits = dataclasses.replace(
        limits,
        max_host_calls=max(limits.max_host_calls, profile.max_calls + _SANDBOX_CALL_HEADROOM),
    )
    grant = sandbox.GuestGrant(
        global_name=profile.global_name, allow=profile.allow, preamble=profile.preamble
    )
    # Taken before the sandbox starts its own clock, so no upstream call outlives the run.
    deadline = time.monotonic() + limits.timeout_s
    broker = Broker(profile, deadline=deadline, transport=transport)
    try:
        result = sandbox.run(
            code, grant=grant, handler=broker, limits=limits, memory_probe=memory_probe
        )
    finally:
        snapshot = broker.close()
    return RunOutcome(
        result=result, trace=snapshot, audit=audit_line(profile.name, snapshot, trace_id)
    )


def run_profile(
    code: str,
    profile: Profile,
    *,
    caller: str,
    timeout_s: float = sandbox.DEFAULT_TIMEOUT_S,
    memory_mb: int = sandbox.DEFAULT_MEMORY_MB,
    clock: str = "real",
    trace_id: str | None = None,
    scan_memory_for: str | None = None,
) -> RunOutcome:
    """`run_with_grant` for a caller, with an optional scan of guest memory for a string.

    The caller is checked again here (same message as selection), so code holding a
    Profile cannot run it for a caller the operator did not list. `scan_memory_for`
    counts the string's UTF-8 and UTF-16 occurrences in the guest's linear memory after
    the run: the example uses it to show the key is nowhere in the sandbox.
    """
    if not profile.allows(caller):
        raise GrantsError(MSG_NOT_AVAILABLE.format(name=f'"{profile.name}"'))
    snapshots: list[bytes] = []
    outcome = run_with_grant(
        code,
        profile,
        limits=sandbox.Limits(timeout_s=timeout_s, memory_mb=memory_mb, clock=clock),  # type: ignore[arg-type]
        trace_id=trace_id,
        memory_probe=snapshots.append if scan_memory_for else None,
    )
    if not scan_memory_for:
        return outcome
    memory = snapshots[0] if snapshots else b""
    hits = sum(memory.count(scan_memory_for.encode(enc)) for enc in ("utf-8", "utf-16-le"))
    return dataclasses.replace(outcome, memory_hits=hits)
