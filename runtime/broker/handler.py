"""The broker: the only code that decides a guest's host call and the only holder of the key.

One `Broker` is one session, i.e. one run. The sandbox calls it once per guest host call
(it is a `runtime.contract.HostHandler`): either `broker(request)`, the guest blocked
until it answers, or `broker.start(request)` for a call the guest awaits as a promise,
which decides the call at once, in the guest's order (budget, rules, the trace's
sequence number), and returns the slow part, sending and reading the reply, for one of
the sandbox's worker threads. Up to MAX_IN_FLIGHT of those are on the wire at once;
later ones wait for a slot instead of failing. Each call
goes through the reference's checks in the reference's order, and only a call that
passed all of them is sent, on a request the policy built (`policy.py`) from nothing the
guest controls except the approved path and the body bytes: fixed headers, the
operator's origin, and the credential (`credentials.py`) added last. Refusals never
reach the API; sending and reading the reply is `upstream.py`'s.

The key is revealed only by the credential, after approval. No reply to the guest, trace
row or error text is derived from it, and no exception text from the HTTP stack (which
could name the URL) is ever shown to the guest. An upstream reply that carries the key
back (an echo endpoint, a debug page reflecting the Authorization header), verbatim,
encoded or in long pieces (`reflection.py`), is not delivered: the guest gets 502.

Between the allow match and the body check sit the reference's per-route caps
(`caps.py`, 429) and backpressure breaker (`breaker.py`, 503 while an upstream 429/503
cooldown lasts, with an optional health probe); a delivered 429 or 503 opens it.
"""

from __future__ import annotations

import dataclasses
import functools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx

from runtime.broker import connections, quotas, upstream
from runtime.broker.approval import Approver, Gate, Held, Verdict, question_for
from runtime.broker.breaker import PROBE_TIMEOUT_S
from runtime.broker.breaker import Breaker as BackpressureBreaker
from runtime.broker.calls import CallRefused
from runtime.broker.credentials import credential_for
from runtime.broker.grants import Profile
from runtime.broker.policy import Plan, Policy
from runtime.broker.slots import Slots
from runtime.broker.trace import CallTrace, ProfileTrace, TraceSnapshot
from runtime.broker.transport import DeadlineTransport
from runtime.broker.upstream import MAX_RESPONSE_BODY, Failure, Fault, Upstream
from runtime.contract import MAX_REQUEST_BODY_BYTES, HostReply, HostRequest
from runtime.messages import (
    MSG_APPROVAL_DECLINED,
    MSG_APPROVAL_UNAVAILABLE,
    MSG_ENDED,
    MSG_UPSTREAM,
    MSG_UPSTREAM_BAD_RESPONSE,
    MSG_UPSTREAM_TIMEOUT,
    MSG_UPSTREAM_TLS,
    MSG_UPSTREAM_TOO_LARGE,
    MSG_UPSTREAM_UNREACHABLE,
    reply_text,
)
from runtime.refusals import RULES, guest_text
from runtime.run_clock import RunClock
from specgen.routes import Route

#: Calls that may be in flight at once in one session.
MAX_IN_FLIGHT = 16
#: Connections the runs of one profile in this process share (each run keeps at most
#: MAX_IN_FLIGHT of them busy), so concurrent runs do not wait for each other's.
SHARED_CONNECTIONS = 4 * MAX_IN_FLIGHT
#: Largest request body forwarded upstream (bytes), whatever its media type (10 MiB).
MAX_REQUEST_BODY = MAX_REQUEST_BODY_BYTES
#: Request bytes the admitted, unanswered calls of one run may hold on the host at
#: once (waiting for a slot or on the wire). Host memory is outside the guest's
#: `--memory-mb`: without this bound, 9,990 started calls of 1 MiB each held 6.96 GB
#: while waiting for the 16 slots. Past it a call is refused (429, counted as denied).
MAX_HELD_REQUEST_BYTES = 32 << 20
#: Time allowed for one upstream call, headers and body together (seconds).
UPSTREAM_TIMEOUT_S = 60.0
#: How long ending a session waits for calls still in flight (seconds).
END_GRACE_S = 2.0
#: What a call whose socket close() shut fails with; any other fault (a reply too large,
#: one the upstream sent with a status) is the upstream's, whenever it came.
_ABORT_FAULTS = frozenset({Failure.BAD_RESPONSE, Failure.UNREACHABLE, Failure.TIMEOUT})
#: How often a started call waiting for a free slot looks whether the session ended.
_SLOT_POLL_S = 0.01

_TEXT = "text/plain; charset=utf-8"

#: What the guest gets for each failure: a status and a short fixed text.
#: A reflected key gets the generic text, so the guest learns nothing about the check.
FAILURE_REPLIES: dict[Failure, tuple[int, str]] = {
    Failure.UNREACHABLE: (502, MSG_UPSTREAM_UNREACHABLE),
    Failure.TIMEOUT: (504, MSG_UPSTREAM_TIMEOUT),
    Failure.TLS: (502, MSG_UPSTREAM_TLS),
    Failure.TOO_LARGE: (502, MSG_UPSTREAM_TOO_LARGE),
    Failure.BAD_RESPONSE: (502, MSG_UPSTREAM_BAD_RESPONSE),
    Failure.KEY_REFLECTED: (502, MSG_UPSTREAM),
    Failure.CANCELLED: (503, MSG_ENDED),
}


def refusal(status: int, message: str) -> HostReply:
    """A broker-made reply: fixed text plus newline, never upstream bytes."""
    return HostReply(status=status, body=reply_text(message), content_type=_TEXT)


@dataclass(eq=False)
class _Admitted:
    """A call that passed every check and holds its trace number, not yet answered."""

    route: Route
    request: httpx.Request
    bytes_sent: int
    seq: int
    since: float = field(default_factory=time.monotonic)
    #: Names of the query and header parameters sent (the trace keeps these, never values).
    params: tuple[str, ...] = ()
    #: The approved plan: which response headers the reply may carry back.
    plan: Plan | None = None
    #: How a person's approval went, for a call the grant holds (None: not held).
    held: Held | None = None


def _approval_of(call: _Admitted) -> tuple[str, str, float] | None:
    held = call.held
    return None if held is None else (held.verdict.value, held.channel, held.waited_s)


def _bytes_or_none(part: object) -> bool:
    return part is None or isinstance(part, bytes | bytearray | memoryview)


def _as_bytes(part: bytes | bytearray | memoryview | None) -> bytes | None:
    return None if part is None else bytes(part)


def _answered(reply: HostReply) -> HostReply:
    """What a started call refused at once hands back to the worker that runs it."""
    return reply


class Broker:
    """One run's session: a fresh HTTP client, budget, slots and trace.

    Build it just before the guest starts and `close()` it when the run ends; after
    that every call gets 503 `host api grant has ended`. `deadline` is the run's end on
    the `time.monotonic()` clock: no upstream call outlives it. `caller` and
    `run_timeout_s` bind a jwt profile's per-run token (minted here, before any guest
    code runs; GrantsError when it cannot be); `clock` drives the breaker (tests).
    `trace` is the profile's view of a trace shared with other profiles' brokers of the
    same run (runtime/broker/several.py); by default the broker has its own.
    """

    def __init__(
        self,
        profile: Profile,
        *,
        deadline: float | None = None,
        upstream_timeout_s: float = UPSTREAM_TIMEOUT_S,
        transport: httpx.BaseTransport | None = None,
        caller: str | None = None,
        run_timeout_s: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        run_clock: RunClock | None = None,
        approver: Approver | None = None,
        quota_store: quotas.QuotaStore | None = None,
        trace: CallTrace | ProfileTrace | None = None,
    ) -> None:
        self._profile = profile
        #: Where the profile's quotas are counted; opened at the first call they apply to
        #: (runtime/broker/quotas.py: --quota-store, $PLIMSOLL_QUOTA_STORE, or the default).
        self._quota_store = quota_store
        self._caller = caller or ""
        #: The run's clock (runtime/run_clock.py): it stops while a call is held for
        #: approval, and then gives the deadline instead of `deadline`.
        self._run_clock = run_clock
        self._gate = Gate(approver, profile.approval_timeout_s)
        credential = credential_for(profile, caller=caller, run_timeout_s=run_timeout_s)
        self._policy = Policy(profile, credential)
        self._caps = profile.route_caps.budget()
        self._breaker = BackpressureBreaker(clock=clock)
        self._budget = profile.max_calls
        self._deadline = deadline
        self._timeout_s = upstream_timeout_s
        self._slots = Slots(MAX_IN_FLIGHT)
        self._lock = threading.Lock()
        self._calls = 0
        self._ended = False
        #: close() shut the sockets of the calls on the wire (a transport that can).
        self._aborted = False
        #: Admitted calls not yet answered, by seq: what close() records as cancelled.
        self._open: dict[int, _Admitted] = {}
        #: Request bytes those calls hold (see MAX_HELD_REQUEST_BYTES).
        self._held = 0
        #: Its own trace, or (a run of several profiles) its view of the run's one trace.
        self.trace = trace if trace is not None else CallTrace()
        # Connections are the profile's, kept across runs in this process; the transport
        # (deadline, abort) and the channel are this run's own.
        self._transport = (
            transport
            if transport is not None
            else DeadlineTransport(pool=connections.pool_for(profile, SHARED_CONNECTIONS))
        )
        self._channel = upstream.new_channel(MAX_IN_FLIGHT, self._transport)

    # -- the HostHandler --------------------------------------------------------------

    def __call__(self, call: HostRequest) -> HostReply:
        """A blocking call (the raw host call): the reference's order, 429 when all
        MAX_IN_FLIGHT slots are taken."""
        if self._ended or self._expired():
            return self._refuse("run_ended")
        if not self._slots.take(0):
            return self._refuse("capacity")
        try:
            decided = self._decide(call)
            if isinstance(decided, HostReply):
                return decided
            refused = self._hold(decided)
            if refused is not None:
                return refused
            return self._send(decided)
        finally:
            self._slots.give()

    def start(self, call: HostRequest) -> Callable[[], HostReply]:
        """Decide a call now; return what sends it, for a worker thread to run.

        Everything but the upstream exchange happens here, on the caller's thread and in
        the order the guest made its calls, so budget, rules and the trace's sequence
        number do not depend on thread scheduling. The returned function waits for one
        of the MAX_IN_FLIGHT slots (never refuses for capacity), sends, and records the
        row; it returns a refusal at once when the call was refused here.
        """
        if self._ended or self._expired():
            return functools.partial(_answered, self._refuse("run_ended"))
        decided = self._decide(call)
        if isinstance(decided, HostReply):
            return functools.partial(_answered, decided)
        return functools.partial(self._send_when_free, decided)

    def _send_when_free(self, call: _Admitted) -> HostReply:
        # Asked before a slot is taken: a call waiting for a person holds no slot, so
        # the run's other calls go on meanwhile.
        refused = self._hold(call)
        if refused is not None:
            return refused
        while not self._slots.take(_SLOT_POLL_S):
            if self._ended or self._expired():
                return self._cancel(call)
        try:
            return self._send(call)
        finally:
            self._slots.give()

    def _refuse(self, rule: str, route: Route | None = None, name: str = "") -> HostReply:
        """Count the call as denied under `rule` and answer with that rule's text."""
        self.trace.deny(rule, route)
        return refusal(RULES[rule].status, guest_text(rule, name))

    def _take_quota(self, route: Route) -> HostReply | None:
        """This call's units of the profile's quotas, or the refusal (none taken then).
        Last of the broker's checks, so a call refused for any other reason never uses
        a unit; a call a person then declines has used one."""
        try:
            if self._quota_store is None:
                self._quota_store = quotas.open_store()
            taken = quotas.take(
                self._quota_store, self._profile.quotas, self._profile.name, self._caller, route
            )
        except (quotas.StoreDown, quotas.StoreUrlError):
            return self._refuse("quota_store_down", route)
        if taken.ok:
            for quota, left in taken.left:
                self.trace.quota(quota.label(), left=left)
            return None
        assert taken.quota is not None
        self.trace.quota(taken.quota.label())
        return self._refuse(
            "quota", route, f"{taken.quota.label()}; retry after {taken.retry_after_s} s"
        )

    def _decide(self, call: HostRequest) -> HostReply | _Admitted:
        with self._lock:
            self._calls += 1
            over_budget = self._calls > self._budget
        if over_budget:
            return self._refuse("budget_exhausted")

        body, payload = call.body, call.payload
        if not (_bytes_or_none(body) and _bytes_or_none(payload)):
            # Not what the HostHandler contract promises; forwarding a guess would send
            # bytes nobody approved.
            return self._refuse("call_malformed")
        if type(body) not in (bytes, type(None)) or type(payload) not in (bytes, type(None)):
            # A bytearray or memoryview as the bytes it holds: a memoryview's len() counts
            # its items, which would size the body and its Content-Length wrongly.
            call = dataclasses.replace(call, body=_as_bytes(body), payload=_as_bytes(payload))
            body, payload = call.body, call.payload
        plan = self._policy.decide(call)
        if isinstance(plan, CallRefused):
            return self._refuse(plan.rule, plan.route, plan.name)
        route, path = plan.route, plan.path
        if not self._caps.charge(route.method, path):
            return self._refuse("route_cap_exhausted", route)
        if not self._breaker.admit(self._probe if self._profile.health_check else None):
            self.trace.shed(route)
            return refusal(RULES["breaker_open"].status, guest_text("breaker_open"))
        if (body is not None and len(body) > MAX_REQUEST_BODY) or (
            payload is not None and len(payload) > MAX_REQUEST_BODY
        ):
            return self._refuse("body_too_large", route)

        try:
            request = self._policy.build(
                route.method, path, plan.payload, self._call_timeout(), plan
            )
        except Exception:
            request = None
        if request is None:
            return self._refuse("call_malformed", route)
        payload = request.content
        if len(payload) > MAX_REQUEST_BODY:
            return self._refuse("body_too_large", route)

        if self._ended or self._expired():
            return self._refuse("run_ended", route)
        if self._profile.quotas:
            refused = self._take_quota(route)
            if refused is not None:
                return refused

        with self._lock:
            over_held = self._held + len(payload) > MAX_HELD_REQUEST_BYTES
            if not over_held:
                self._held += len(payload)
        if over_held:
            return self._refuse("held_bytes", route)

        admitted = _Admitted(
            route,
            request,
            len(payload),
            self.trace.reserve(route),
            params=plan.param_names,
            plan=plan,
        )
        with self._lock:
            self._open[admitted.seq] = admitted
        return admitted

    def _hold(self, call: _Admitted) -> HostReply | None:
        """For a route the grant holds: ask, with the run's clock stopped; None when the
        call may go (approved), else the refusal, its row recorded.

        Whether to ask is the grant's decision (`Profile.needs_approval` on the matched
        entry) and the question is made of the built request, the object `_send` then
        sends: nothing of the guest's call can mark it approved or change what is sent.
        """
        if not self._profile.needs_approval(call.route):
            return None
        plan = call.plan
        if plan is None:  # never the case for an admitted call; fail closed if it were
            self._cancel(call)
            return refusal(403, MSG_APPROVAL_DECLINED)
        question = question_for(
            call.request,
            profile=self._profile.name,
            caller=self._caller,
            method=call.route.method,
            route=call.route.path,
            path=plan.path,
            query=plan.query,
            headers=plan.headers,
        )
        key = (call.route.method.upper(), call.route.path)
        if self._ended:
            return self._cancel(call)
        wanted = self._still_open
        if self._run_clock is not None:
            with self._run_clock.hold():
                held = self._gate.decide(key, question, wanted)
        else:
            held = self._gate.decide(key, question, wanted)
        call.held = held
        if held.verdict is Verdict.APPROVED:
            return None
        if self._close_out(call):
            self.trace.record(
                call.route,
                seq=call.seq,
                params=call.params,
                status=0,
                delivered=False,
                bytes_sent=0,
                bytes_back=0,
                latency_s=time.monotonic() - call.since,
                failure=f"approval_{held.verdict.value}",
                approval=(held.verdict.value, held.channel, held.waited_s),
            )
        if held.verdict is Verdict.UNAVAILABLE:
            return refusal(403, MSG_APPROVAL_UNAVAILABLE)
        return refusal(403, MSG_APPROVAL_DECLINED)

    def _still_open(self) -> bool:
        return not self._ended

    def _send(self, call: _Admitted) -> HostReply:
        """Send an admitted call and record its row (unless close() already did)."""
        if self._ended or self._expired():
            return self._cancel(call)
        started = time.monotonic()
        up: Upstream | None
        failure: Failure | None = None
        try:
            up = upstream.send(self._channel, call.request, self._call_timeout())
            status = up.status
        except Fault as fault:
            up, status, failure = None, fault.status, fault.reason
            if self._aborted and status == 0 and failure in _ABORT_FAULTS:
                # close() shut its socket: the run ended while it was on the wire
                failure = Failure.CANCELLED
        # The content type is the one upstream header every reply carries back, so a key
        # in it withholds the whole reply; any other header holding the key is dropped
        # from the reply by Policy.reply_headers.
        if up is not None and (
            self._reflects_key(up.body) or self._reflects_key(up.content_type.encode())
        ):
            failure = Failure.KEY_REFLECTED
        delivered = up is not None and failure is None
        if self._close_out(call):
            self.trace.record(
                call.route,
                seq=call.seq,
                params=call.params,
                status=status,
                delivered=delivered,
                bytes_sent=call.bytes_sent,
                bytes_back=len(up.body) if up is not None and delivered else 0,
                latency_s=time.monotonic() - started,
                failure=failure,
                approval=_approval_of(call),
            )
        if up is None or failure is not None:
            status, text = FAILURE_REPLIES[failure or Failure.BAD_RESPONSE]
            return refusal(status, text)
        self._breaker.observe(up.status, up.retry_after)
        return HostReply(
            status=up.status,
            body=up.body,
            content_type=up.content_type,
            headers=self._policy.reply_headers(call.plan, up.headers, up.content_type),
            upstream=True,
        )

    def _close_out(self, call: _Admitted) -> bool:
        """Take an admitted call off the open list; False if someone already did."""
        with self._lock:
            if self._open.pop(call.seq, None) is None:
                return False
            self._held -= call.bytes_sent
            return True

    def _cancel(self, call: _Admitted) -> HostReply:
        """The session ended before the call was sent: a row with no upstream status."""
        if self._close_out(call):
            self._record_cancelled(call)
        return refusal(503, MSG_ENDED)

    def _record_cancelled(self, call: _Admitted) -> None:
        self.trace.record(
            call.route,
            seq=call.seq,
            params=call.params,
            status=0,
            delivered=False,
            bytes_sent=0,
            bytes_back=0,
            latency_s=time.monotonic() - call.since,
            failure=Failure.CANCELLED,
            approval=_approval_of(call),
        )

    def _probe(self) -> tuple[int, str | None]:
        """GET the health route with the credential; (status, Retry-After), 0 on no reply.

        Neither recorded nor charged (as in the reference); its body is read (bounded) and
        dropped, never shown to the guest.
        """
        health = self._profile.health_check
        if health is None:
            return 0, None
        timeout = min(PROBE_TIMEOUT_S, self._call_timeout())
        request = self._policy.build("GET", health.path, b"", timeout)
        if request is None:
            return 0, None
        try:
            up = upstream.send(self._channel, request, timeout)
        except Fault as fault:
            return fault.status, None
        return up.status, up.retry_after

    def _reflects_key(self, body: bytes) -> bool:
        """Does the reply hold the key, verbatim, encoded or in pieces (reflection.py)?"""
        return self._policy.reflects_key(body)

    # -- time -------------------------------------------------------------------------

    def _run_deadline(self) -> float | None:
        return self._run_clock.deadline() if self._run_clock is not None else self._deadline

    def _call_timeout(self) -> float:
        deadline = self._run_deadline()
        if deadline is None:
            return self._timeout_s
        return max(0.001, min(self._timeout_s, deadline - time.monotonic()))

    def _expired(self) -> bool:
        deadline = self._run_deadline()
        return deadline is not None and time.monotonic() >= deadline

    # -- lifetime ---------------------------------------------------------------------

    def close(self) -> TraceSnapshot:
        """End the session: refuse every later call and cancel the ones still open.

        Calls on the wire are aborted (their sockets shut down, so the worker threads
        sending them return at once) and each keeps its row, status 0 and not
        delivered; admitted calls never sent get the same row. So an audit written
        after close() shows every call the guest made, however the run ended.
        """
        self._ended = True
        abort = getattr(self._transport, "abort", None)
        if callable(abort):
            self._aborted = True
            abort()
        taken = self._slots.drain(END_GRACE_S)
        try:
            with self._lock:
                still_open = sorted(self._open.values(), key=lambda call: call.seq)
                self._open.clear()
                self._held = 0
            for call in still_open:
                self._record_cancelled(call)
            self._channel.close()
        finally:
            self._slots.give(taken)
        return self.trace.snapshot()

    def __enter__(self) -> Broker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def calls(self) -> int:
        """Calls counted against the budget so far (denied ones included)."""
        return self._calls

    def __repr__(self) -> str:
        return f"Broker(profile={self._profile.name!r}, calls={self._calls})"


__all__ = [
    "END_GRACE_S",
    "FAILURE_REPLIES",
    "MAX_HELD_REQUEST_BYTES",
    "MAX_IN_FLIGHT",
    "MAX_REQUEST_BODY",
    "MAX_RESPONSE_BODY",
    "UPSTREAM_TIMEOUT_S",
    "Broker",
    "refusal",
]
