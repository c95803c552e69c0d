"""Approvals on the 2026-07-28 protocol: a held call's question rides an `input_required`
result, and the client's retry of the same `execute` carries the person's answer.

That protocol has no server-to-client requests, so `Context.elicit` cannot reach the
person mid-run. A held call belongs to a live sandbox run, which cannot be replayed (its
earlier calls were sent) nor rebuilt from a token, so the run stays here: it goes on in a
thread of its own, its approver parks the question and waits, and the execute returns
`InputRequiredResult` with a form elicitation and a `requestState` naming the parked run.
The client asks its person and calls `execute` again with the answer; that request waits
for the run's next question or its end.

The state is a random handle, nothing the run could be rebuilt from, and the SDK seals it
(AES-GCM under this process's key, bound to the tool, its arguments and the authenticated
principal, with an expiry), so a client can neither forge one nor move one to other code
or another caller; the handle is also checked against the caller here. Only the answer to
the question asked is read, as the strict `Decision` form; anything else is a no. A
client that never comes back leaves the question to time out as a no, and the run ends
and is audited without it.
"""

from __future__ import annotations

import contextlib
import itertools
import queue
import secrets
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field

import anyio
import anyio.from_thread
import anyio.lowlevel
import orjson
from mcp.server.elicitation import render_elicitation_schema
from mcp.server.mcpserver import Context
from mcp.types import (
    CallToolResult,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    InputRequiredResult,
    TextContent,
)
from mcp_types.version import is_version_at_least
from pydantic import ValidationError

from runtime import Answer, CannotAsk, Question
from runtime.mcp.approval import Decision

#: The first protocol revision whose requests carry `input_required` round trips.
INPUT_REQUIRED_VERSION = "2026-07-28"
#: How long a finished run's answer waits for the client's last retry (seconds).
KEEP_FINISHED_S = 120.0
#: Parked runs kept at once (running ones are bounded by the server's run slots; this
#: bounds the finished ones nobody came back for).
MAX_PARKED = 64


def uses_input_required(ctx: Context) -> bool:
    """Does this request's protocol put questions in `input_required` results?"""
    version = ctx.protocol_version
    return version is not None and is_version_at_least(version, INPUT_REQUIRED_VERSION)


def declares_form(ctx: Context) -> bool:
    """Did this request's client declare form elicitation (a bare `elicitation: {}` is
    form; url-only is not)?"""
    try:
        elicitation = ctx.client_capabilities.elicitation  # type: ignore[union-attr]
    except Exception:
        return False
    return elicitation is not None and (elicitation.form is not None or elicitation.url is None)


def answer_of(response: object) -> Answer:
    """The person's answer, from the client's response to the form: only an accepted
    form of JSON booleans approves; anything else is a no."""
    if not isinstance(response, ElicitResult) or response.action != "accept":
        return Answer.NO
    try:
        decision = Decision.model_validate(response.content)
    except ValidationError:
        return Answer.NO
    if not decision.approve:
        return Answer.NO
    return Answer.ALWAYS if decision.whole_run else Answer.YES


def _text(text: str, is_error: bool = False) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=is_error)


#: What a retry whose run is no longer parked is told.
GONE = (
    "execute: no run is waiting for this answer (it finished and its answer was already "
    "given, it waited too long, or the server restarted); run the code again"
)


@dataclass(eq=False)  # hashed by identity: the run-slot limiter borrows on its behalf
class Parked:
    """One run whose questions go out as `input_required` results."""

    handle: str
    caller: str | None
    token: anyio.lowlevel.EventLoopToken
    send: anyio.abc.ObjectSendStream
    receive: anyio.abc.ObjectReceiveStream
    #: The question asked and not yet answered: its key and the box its answer goes in.
    asking: dict[str, queue.Queue[Answer]] = field(default_factory=dict)
    lock: anyio.Lock = field(default_factory=anyio.Lock)
    finished_at: float | None = None
    numbers: itertools.count = field(default_factory=lambda: itertools.count(1))


class RoundTripApprover:
    """A parked run's approver: called from the run's thread (or a pool's dispatching
    thread), it hands the question to the event loop and waits for the retry's answer."""

    channel = "mcp-input-required"

    def __init__(self, parked: Parked) -> None:
        self._parked = parked

    def __call__(self, question: Question, timeout_s: float) -> Answer | None:
        parked = self._parked
        key = f"approve-{next(parked.numbers)}"
        box: queue.Queue[Answer] = queue.Queue(maxsize=1)
        parked.asking[key] = box
        try:
            try:
                anyio.from_thread.run_sync(
                    parked.send.send_nowait, ("ask", key, question), token=parked.token
                )
            except Exception:  # the server is shutting down: no one to ask
                raise CannotAsk from None
            try:
                return box.get(timeout=timeout_s)
            except queue.Empty:
                return None
        finally:
            parked.asking.pop(key, None)


#: Every server's round trips in this process, for `end_parked`.
_ALL: weakref.WeakSet[RoundTrips] = weakref.WeakSet()


def end_parked(timeout_s: float) -> None:
    """The server is stopping (Ctrl-C): each parked run's open question is answered no,
    so the run, whose clock was ended too, ends and writes its audit line; waited for
    up to `timeout_s` in all. A run's thread is a daemon: the process would otherwise
    leave without the record of a run still waiting for its client."""
    until = time.monotonic() + timeout_s
    for trips in list(_ALL):
        trips.end(until)


class RoundTrips:
    """The server's parked runs, by handle."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._parked: dict[str, Parked] = {}
        self._clock = clock
        #: The threads of runs going on, for `end_parked`.
        self._threads: set[threading.Thread] = set()
        _ALL.add(self)

    def open(self, caller: str | None) -> Parked:
        """A new parked run for `caller`; call on the event loop."""
        self._forget_stale()
        send, receive = anyio.create_memory_object_stream[tuple](max_buffer_size=16)
        parked = Parked(
            secrets.token_urlsafe(18), caller, anyio.lowlevel.current_token(), send, receive
        )
        self._parked[parked.handle] = parked
        return parked

    def start(
        self,
        parked: Parked,
        work: Callable[[RoundTripApprover], object],
        finish: Callable[[object], CallToolResult],
        release: Callable[[], None],
    ) -> None:
        """Run `work` in its own thread and give its outcome (or exception) to `finish`
        there, which writes the audit line and makes the answer; then, on the event
        loop, `release` frees the run's slot and the answer waits for the run's last
        retry. The audit does not depend on the loop or on the client coming back."""

        def go() -> None:
            try:
                outcome: object = work(RoundTripApprover(parked))
            except BaseException as exc:  # finish turns it into an answer and an audit line
                outcome = exc
            try:
                result = finish(outcome)
            except Exception as exc:  # the slot is released whatever finish did
                result = _text(
                    f"execute: internal error ({type(exc).__name__}); the run's answer was lost",
                    is_error=True,
                )

            def done() -> None:
                release()
                parked.finished_at = self._clock()
                parked.send.send_nowait(("done", result))

            # If the server has stopped, the record is already written.
            with contextlib.suppress(Exception):
                anyio.from_thread.run_sync(done, token=parked.token)

        def run() -> None:
            try:
                go()
            finally:
                self._threads.discard(thread)

        thread = threading.Thread(target=run, name=f"held-run-{parked.handle[:6]}", daemon=True)
        self._threads.add(thread)
        thread.start()

    def end(self, until: float) -> None:
        """Answer no to every question a parked run waits on, and wait (until the
        monotonic time `until`) for each run to end and write its audit line."""
        for parked in list(self._parked.values()):
            for box in list(parked.asking.values()):
                with contextlib.suppress(queue.Full):
                    box.put_nowait(Answer.NO)
        for thread in list(self._threads):
            thread.join(max(0.0, until - time.monotonic()))

    async def next_answer(self, parked: Parked) -> CallToolResult | InputRequiredResult:
        """Wait for the run's next question (an `input_required` result) or its end."""
        if parked.lock.locked():
            return _text(
                "execute: this run is already being waited for by another retry", is_error=True
            )
        async with parked.lock:
            while True:
                kind, *rest = await parked.receive.receive()
                # A question that timed out before anyone fetched it is not asked.
                if kind == "done" or rest[0] in parked.asking:
                    break
        if kind == "done":
            self._parked.pop(parked.handle, None)
            result: CallToolResult = rest[0]
            return result
        key, question = rest
        form = ElicitRequestFormParams(
            message=question.text(), requested_schema=render_elicitation_schema(Decision)
        )
        state = orjson.dumps({"run": parked.handle, "ask": key}).decode()
        return InputRequiredResult(
            input_requests={key: ElicitRequest(params=form)}, request_state=state
        )

    async def resume(
        self, ctx: Context, caller: str | None
    ) -> CallToolResult | InputRequiredResult:
        """A retry: give the parked run the answer to the question its state names,
        then wait for what comes next."""
        try:
            state = orjson.loads(ctx.request_state or "")
            handle, key = state["run"], state["ask"]
        except (orjson.JSONDecodeError, KeyError, TypeError):
            return _text(GONE, is_error=True)
        parked = self._parked.get(handle) if isinstance(handle, str) else None
        if parked is None or parked.caller != caller:
            return _text(GONE, is_error=True)
        box = parked.asking.get(key) if isinstance(key, str) else None
        if box is not None:
            responses = ctx.input_responses or {}
            with contextlib.suppress(queue.Full):  # a second retry answering it again
                box.put_nowait(answer_of(responses.get(key)))
        return await self.next_answer(parked)

    def _forget_stale(self) -> None:
        now = self._clock()
        for handle, parked in list(self._parked.items()):
            if parked.finished_at is not None and now - parked.finished_at > KEEP_FINISHED_S:
                del self._parked[handle]
        finished = [p for p in self._parked.values() if p.finished_at is not None]
        for parked in sorted(finished, key=lambda p: p.finished_at or 0.0)[
            : max(0, len(self._parked) - MAX_PARKED)
        ]:
            del self._parked[parked.handle]


__all__ = [
    "INPUT_REQUIRED_VERSION",
    "RoundTripApprover",
    "RoundTrips",
    "answer_of",
    "declares_form",
    "uses_input_required",
]
