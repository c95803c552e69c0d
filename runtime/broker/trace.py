"""The broker's record of a run: metadata only, by construction.

A row has a field for the allow entry a call matched (the operator's own text), its
status, sizes and latency, the names of the parameters it sent, and nothing else. There
is no field for the raw path, a parameter's value, a body, a header value or the key, so no later change to what the broker sees can
make the trace (or the audit line built from it) carry them. A refused call gets
no row: it is counted (`denied`, or `shed` for the breaker) and listed with the id of
the rule that refused it (runtime.refusals) and, when it matched an allow entry, that
entry; a name the guest chose (an unlisted parameter's) is never kept.

Calls may be in flight together (the sandbox fans a guest's `Promise.all` out), so a row's
`seq` is reserved when the broker admits the call, in the order the guest made its calls,
and the snapshot lists rows by `seq`: what a trace records does not depend on which
upstream answered first. Each row keeps its own latency.

Rows stop at MAX_ROWS so an audit line stays bounded, but no call that reached the API
goes unaccounted: a counter per (method, allow entry) keeps counting past the cap (its
size is bounded by the grant's allow list, not by the guest).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import orjson

from runtime.errors import TraceIdError
from specgen.routes import Route

#: Rows a trace keeps; later calls are still made but only counted as dropped. The cap
#: does not grow with a raised max_calls, so an audit line stays bounded.
MAX_ROWS = 256

_TRACE_ID = re.compile(r"[A-Za-z0-9._:\-]{1,128}\Z")

#: Told of each call as it is admitted: (seq, METHOD, allow entry), on the thread that
#: admitted it. A pool worker (runtime/pool.py) forwards these to its parent as they
#: happen, so the audit of a run whose worker dies still names the calls it made.
AdmissionListener = Callable[[int, str, str], None]
_listener: AdmissionListener | None = None


def listen_for_admissions(listener: AdmissionListener | None) -> None:
    """Set (or, with None, clear) this process's admission listener."""
    global _listener
    _listener = listener


@dataclass(frozen=True, slots=True)
class TraceRow:
    """One call that was sent upstream."""

    seq: int
    method: str
    route: str
    status: int
    delivered: bool
    bytes_sent: int
    bytes_back: int
    latency_ms: float
    #: Why nothing was delivered (runtime.broker.upstream.Failure's value), else None.
    #: An enum value only, never a URL or an exception's text.
    failure: str | None = None
    #: Names of the query and header parameters the call sent, never their
    #: values; omitted from the audit line when there are none.
    params: tuple[str, ...] = ()
    #: For a call the grant held for a person's approval: approved, declined, timed_out
    #: or unavailable (runtime.broker.approval.Verdict), the channel that asked, and how
    #: long it waited. None for every other call, and then absent from the audit line.
    approval: str | None = None
    approval_channel: str | None = None
    approval_wait_ms: float | None = None
    #: The profile whose broker sent the call, in a run given several profiles; None
    #: (and absent from the audit line) in a run of one, whose record names it once.
    profile: str | None = None


@dataclass(frozen=True, slots=True)
class RefusedCall:
    """One call the broker refused (or the breaker shed): the rule, and the allow entry
    the call matched when it got that far (the operator's text, never the guest's)."""

    rule: str
    method: str = ""
    route: str = ""
    #: The profile whose broker refused it, in a run of several profiles (else None).
    profile: str | None = None


@dataclass(frozen=True, slots=True)
class QuotaState:
    """One quota as a run met it: the units the run took, the calls it refused, and the
    room left in its window after the run's latest take (None when it took none)."""

    quota: str
    taken: int
    refused: int
    left: int | None
    #: The profile the quota belongs to, in a run of several profiles (else None).
    profile: str | None = None


@dataclass(frozen=True, slots=True)
class RouteCount:
    """Every call sent upstream for one (method, allow entry), rows kept or not."""

    method: str
    route: str
    calls: int
    delivered: int
    #: The profile, in a run of several profiles (else None, and absent from the line).
    profile: str | None = None


@dataclass(frozen=True, slots=True)
class TraceSnapshot:
    """What a run's trace holds when the run ends."""

    rows: tuple[TraceRow, ...]
    denied: int
    dropped: int
    #: One entry per (method, route) that reached the API, sorted; beyond the row cap too.
    routes: tuple[RouteCount, ...] = ()
    #: Calls the backpressure breaker refused (never sent).
    shed: int = 0
    #: The broker's refusals in the order it made them, each with its rule
    #: (runtime.refusals.RULES), up to MAX_ROWS; denied and shed count them all.
    refused: tuple[RefusedCall, ...] = ()
    #: Held calls by verdict ((verdict, count), sorted); empty when none was held.
    approvals: tuple[tuple[str, int], ...] = ()
    #: Each of the profile's quotas that applied to a call of the run, by label.
    quotas: tuple[QuotaState, ...] = ()
    #: Every refusal the broker made, counted by rule ((rule, count), in first-seen
    #: order): `refused` stops at MAX_ROWS, these counts do not.
    refused_by_rule: tuple[tuple[str, int], ...] = ()

    def to_dict(self) -> dict[str, object]:
        record: dict[str, object] = {
            "calls": [_row_dict(r) for r in self.rows],
            "denied": self.denied,
            "dropped": self.dropped,
            "routes": [_count_dict(c) for c in self.routes],
        }
        if self.refused:
            # Only when there were refusals: a run with none keeps the line it always had.
            record["refused"] = [_refused_dict(r) for r in self.refused]
        if self.shed:
            # Only when > 0, as the reference's host_calls_shed: a run the breaker never
            # touched keeps the audit line it always had.
            record["shed"] = self.shed
        if self.approvals:
            record["approvals"] = dict(self.approvals)
        if self.quotas:
            record["quotas"] = [_quota_dict(q) for q in self.quotas]
        return record


def _quota_dict(state: QuotaState) -> dict[str, object]:
    out = asdict(state)
    if state.profile is None:
        del out["profile"]
    return out


def _count_dict(count: RouteCount) -> dict[str, object]:
    out = asdict(count)
    if count.profile is None:
        del out["profile"]
    return out


def _refused_dict(refused: RefusedCall) -> dict[str, object]:
    out: dict[str, object] = {"rule": refused.rule}
    if refused.route:
        out.update(method=refused.method, route=refused.route)
    if refused.profile is not None:
        out["profile"] = refused.profile
    return out


def _row_dict(row: TraceRow) -> dict[str, object]:
    out = asdict(row)
    if not row.params:
        del out["params"]  # rows of calls without parameters read as they always did
    else:
        out["params"] = list(row.params)
    if row.approval is None:
        for key in ("approval", "approval_channel", "approval_wait_ms"):
            del out[key]
    if row.profile is None:
        del out["profile"]
    return out


class CallTrace:
    """Thread-safe accumulator the broker writes into during one run.

    `observer`, when set (runtime/telemetry.py, only while telemetry is on), hears of
    each refusal and each row with the same metadata the row keeps, outside the lock.
    """

    observer: Any = None

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rows: list[TraceRow] = []
        self._seq = 0
        self._denied = 0
        self._dropped = 0
        self._counts: dict[tuple[str | None, str, str], list[int]] = {}
        self._shed = 0
        self._refused: list[RefusedCall] = []
        self._by_rule: dict[str, int] = {}
        self._approvals: dict[str, int] = {}
        #: (profile, quota label) -> [taken, refused, left after the latest take]
        self._quotas: dict[tuple[str | None, str], list[int | None]] = {}

    def quota(self, label: str, *, left: int | None = None, profile: str | None = None) -> None:
        """Note one quota's part in a call: a unit taken with `left` room after it, or
        (left None) the call it refused."""
        with self._lock:
            state = self._quotas.setdefault((profile, label), [0, 0, None])
            if left is None:
                state[1] = (state[1] or 0) + 1
            else:
                state[0] = (state[0] or 0) + 1
                state[2] = left

    def deny(
        self,
        rule: str = "route_not_granted",
        route: Route | None = None,
        *,
        profile: str | None = None,
    ) -> None:
        """Count a refused call under `rule`; `route` is the allow entry it matched, if any."""
        with self._lock:
            self._denied += 1
            self._refuse(rule, route, profile)
        self._observe_refusal(rule, route, profile)

    def _observe_refusal(self, rule: str, route: Route | None, profile: str | None) -> None:
        observer = self.observer
        if observer is not None:
            method, path = (route.method.upper(), route.path) if route is not None else ("", "")
            observer.denied(rule, method, path, profile)

    def _refuse(self, rule: str, route: Route | None, profile: str | None = None) -> None:
        self._by_rule[rule] = self._by_rule.get(rule, 0) + 1
        if len(self._refused) < MAX_ROWS:
            method, path = (route.method.upper(), route.path) if route is not None else ("", "")
            self._refused.append(RefusedCall(rule, method, path, profile))

    def reserve(self, route: Route | None = None) -> int:
        """The next sequence number, taken when a call is admitted (in the guest's order);
        the admission listener, if any, hears of it with the matched `route`."""
        with self._lock:
            self._seq += 1
            seq = self._seq
        listener = _listener
        if listener is not None and route is not None:
            listener(seq, route.method.upper(), route.path)
        return seq

    def shed(self, route: Route | None = None, *, profile: str | None = None) -> None:
        """Count a call the breaker refused; like a denied one, it has no row."""
        with self._lock:
            self._shed += 1
            self._refuse("breaker_open", route, profile)
        self._observe_refusal("breaker_open", route, profile)

    def record(
        self,
        route: Route,
        *,
        params: tuple[str, ...] = (),
        status: int,
        delivered: bool,
        bytes_sent: int,
        bytes_back: int,
        latency_s: float,
        seq: int | None = None,
        failure: str | None = None,
        approval: tuple[str, str, float] | None = None,
        profile: str | None = None,
    ) -> None:
        """Add a row for a call that went upstream; only the matched template is kept.

        `seq` is the number `reserve()` gave the call when it was admitted; without one
        the call takes the next number now. Rows past MAX_ROWS by `seq` are only counted,
        so which rows are kept does not depend on the order calls finished in.
        """
        observer = self.observer
        if observer is not None:  # rows past the cap too: every call is exported
            observer.row(
                route.method.upper(),
                route.path,
                status,
                latency_s,
                str(failure) if failure is not None else None,
                approval,
                profile,
            )
        with self._lock:
            if seq is None:
                self._seq += 1
                seq = self._seq
            if approval is not None:
                self._approvals[approval[0]] = self._approvals.get(approval[0], 0) + 1
            count = self._counts.setdefault((profile, route.method.upper(), route.path), [0, 0])
            count[0] += 1
            count[1] += 1 if delivered else 0
            if seq > MAX_ROWS:
                self._dropped += 1
                return
            self._rows.append(
                TraceRow(
                    seq=seq,
                    method=route.method.upper(),
                    route=route.path,
                    status=status,
                    delivered=delivered,
                    bytes_sent=bytes_sent,
                    bytes_back=bytes_back if delivered else 0,
                    latency_ms=round(latency_s * 1000.0, 3),
                    failure=str(failure) if failure is not None else None,
                    params=params,
                    approval=approval[0] if approval is not None else None,
                    approval_channel=approval[1] if approval is not None else None,
                    approval_wait_ms=round(approval[2] * 1000.0, 3)
                    if approval is not None
                    else None,
                    profile=profile,
                )
            )

    def snapshot(self) -> TraceSnapshot:
        with self._lock:
            rows = tuple(sorted(self._rows, key=lambda row: row.seq))
            routes = tuple(
                RouteCount(method, route, calls, delivered, profile)
                for (profile, method, route), (calls, delivered) in sorted(
                    self._counts.items(), key=lambda kv: (kv[0][0] or "", kv[0][2], kv[0][1])
                )
            )
            return TraceSnapshot(
                rows,
                self._denied,
                self._dropped,
                routes,
                self._shed,
                tuple(self._refused),
                tuple(sorted(self._approvals.items())),
                tuple(
                    QuotaState(label, taken or 0, refused or 0, left, profile)
                    for (profile, label), (taken, refused, left) in sorted(
                        self._quotas.items(), key=lambda kv: (kv[0][0] or "", kv[0][1])
                    )
                ),
                tuple(self._by_rule.items()),
            )


class ProfileTrace:
    """One profile's view of a trace that several profiles' brokers of one run share.

    Each broker of a run given several profiles writes through its own view, so every
    row, refusal and route count names the profile that decided it, while the sequence
    numbers stay one sequence in the guest's order across all of them."""

    def __init__(self, shared: CallTrace, profile: str) -> None:
        self.shared = shared
        self.profile = profile

    def deny(self, rule: str = "route_not_granted", route: Route | None = None) -> None:
        self.shared.deny(rule, route, profile=self.profile)

    def reserve(self, route: Route | None = None) -> int:
        return self.shared.reserve(route)

    def shed(self, route: Route | None = None) -> None:
        self.shared.shed(route, profile=self.profile)

    def quota(self, label: str, *, left: int | None = None) -> None:
        self.shared.quota(label, left=left, profile=self.profile)

    def record(self, route: Route, **fields: object) -> None:
        self.shared.record(route, profile=self.profile, **fields)  # type: ignore[arg-type]

    def snapshot(self) -> TraceSnapshot:
        return self.shared.snapshot()


def check_trace_id(trace_id: str) -> str:
    """Accept a caller's trace id only if it is a short plain token.

    The id is the caller's own correlation key; restricting its alphabet keeps the audit
    line from becoming a channel for arbitrary text (a path, a body) under another name.
    """
    if not _TRACE_ID.match(trace_id):
        raise TraceIdError("trace_id must be 1 to 128 characters from A-Z a-z 0-9 . _ : -")
    return trace_id


def audit_line(
    profile: str | tuple[str, ...],
    snapshot: TraceSnapshot,
    trace_id: str | None = None,
    *,
    isolation: str | None = None,
) -> str:
    """The run's one audit record: a single line of JSON, keys in a fixed order.

    Fields: `profile`, `trace_id` (only when the caller gave one), `isolation` (the
    tier the engine ran on: process, worker or gvisor; every run names it), `calls` (the rows),
    `denied`, `dropped`, `routes` (every call sent upstream, counted per method and
    allow entry, past the row cap too), `refused` (only when a call was refused: each
    refusal's rule id, and the allow entry it matched when it matched one), `shed`
    (only when the breaker refused a call). Nothing else exists to be filled in.

    A run given several profiles passes their names as a tuple: `profile` is then the
    names joined by "," (a reader of one-profile lines still finds a string there) and
    `profiles` lists them; each row, refusal and route count names its own profile.
    """
    if isinstance(profile, tuple) and len(profile) == 1:
        profile = profile[0]
    record: dict[str, object] = {
        "profile": ",".join(profile) if isinstance(profile, tuple) else profile
    }
    if isinstance(profile, tuple):
        record["profiles"] = list(profile)
    if trace_id is not None:
        record["trace_id"] = check_trace_id(trace_id)
    if isolation is not None:
        record["isolation"] = isolation
    record.update(snapshot.to_dict())
    return orjson.dumps(record).decode("utf-8")


def _approval_cell(row: TraceRow) -> str:
    if row.approval is None:
        return ""
    return f"{row.approval} ({row.approval_channel}, {(row.approval_wait_ms or 0) / 1000:.1f} s)"


def format_table(snapshot: TraceSnapshot) -> str:
    """The trace as the text table `specgen run` prints on stderr."""
    lines = ["trace:"]
    if snapshot.rows:
        header: tuple[str, ...] = (
            "#",
            "method",
            "route",
            "status",
            "delivered",
            "sent",
            "back",
            "ms",
            "failure",
        )
        body = [
            (
                str(r.seq),
                r.method,
                r.route,
                str(r.status),
                "yes" if r.delivered else "no",
                str(r.bytes_sent),
                str(r.bytes_back),
                f"{r.latency_ms:.1f}",
                r.failure or "",
            )
            for r in snapshot.rows
        ]
        if any(r.profile is not None for r in snapshot.rows):
            # Runs of several profiles only: which profile's broker decided each call.
            header = (header[0], "profile", *header[1:])
            body = [
                (cells[0], r.profile or "", *cells[1:])
                for cells, r in zip(body, snapshot.rows, strict=True)
            ]
        if any(r.approval is not None for r in snapshot.rows):
            # Held calls only: a run without approvals keeps the table it always had.
            header = (*header, "approval")
            body = [
                (*cells, _approval_cell(r)) for cells, r in zip(body, snapshot.rows, strict=True)
            ]
        widths = [max(len(row[i]) for row in [header, *body]) for i in range(len(header))]
        for row in [header, *body]:
            lines.append(
                "  " + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
            )
    else:
        lines.append("  no call recorded")
    counts = f"  denied {snapshot.denied}, dropped {snapshot.dropped}"
    if snapshot.shed:
        counts += f", shed {snapshot.shed}"
    lines.append(counts)
    if snapshot.refused_by_rule:
        counts = snapshot.refused_by_rule
        lines.append("  refused by rule: " + ", ".join(f"{r} {n}" for r, n in counts))
    if snapshot.dropped:
        lines.append("  every call sent, by route (rows past the cap included):")
        for c in snapshot.routes:
            lines.append(f"    {c.method} {c.route}: {c.calls} sent, {c.delivered} delivered")
    return "\n".join(lines) + "\n"
