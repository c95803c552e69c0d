"""Calls a person must approve before they are sent: the question, the answer, the wait.

The grant marks routes (an allow entry's `"approve": true`, a profile's `"approve"`:
true or a list of methods) whose calls go out only after a person says yes. The broker
decides this from the matched entry alone: nothing in the guest's envelope, headers or
body can mark a call approved, because no field of `HostRequest` is read here.

The question is made from the request the broker already built (`httpx.Request`), the
same object it sends after a yes, so what the person reads is what goes on the wire:
method, route template, path as sent, query and header parameters (the guest's, never
the credential, which the broker adds to the request but not to the question), body
media type, size, SHA-256 and a preview capped at PREVIEW_BYTES with every control,
format and line-separator character escaped, so a body cannot draw a fake question.

An `Approver` is the channel (the terminal, an MCP client's elicitation, a pool
worker's parent); it answers within the timeout or its answer counts as a timeout.
`Gate` is one run's state: the "yes for the rest of this run" routes, and the record of
each held call (verdict, channel, seconds waited) that the trace keeps.
"""

from __future__ import annotations

import enum
import hashlib
import threading
import time
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import httpx

#: Body bytes a question shows; the size and the SHA-256 cover the whole body.
PREVIEW_BYTES = 2048
#: How long a person is waited for when the grant does not say (seconds).
DEFAULT_APPROVAL_TIMEOUT_S = 120.0
#: The longest wait a grant may ask for (seconds).
MAX_APPROVAL_TIMEOUT_S = 3600.0
#: Characters a preview writes as escapes: controls, format characters (bidi
#: overrides, zero-width joiners), line and paragraph separators.
_ESCAPED_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"})


class Answer(enum.Enum):
    """What a person (or the channel on their behalf) said."""

    YES = "yes"
    NO = "no"
    #: Yes, and yes to every later call of this route in this run (a loop's writes).
    ALWAYS = "always"


class Verdict(enum.StrEnum):
    """What happened to a held call, as the trace and the audit record it."""

    APPROVED = "approved"
    DECLINED = "declined"
    TIMED_OUT = "timed_out"
    #: No channel could ask anyone (no terminal, a client without elicitation).
    UNAVAILABLE = "unavailable"


@dataclass(frozen=True)
class Question:
    """Exactly what will be sent, as plain text fields (the key is never among them)."""

    profile: str
    caller: str
    method: str
    route: str
    path: str
    query: tuple[tuple[str, str], ...]
    headers: tuple[tuple[str, str], ...]
    body_type: str
    body_bytes: int
    body_sha256: str
    preview: str
    preview_truncated: bool

    def text(self) -> str:
        """The question as a person reads it: one field per line, values escaped."""
        # Every field is escaped here, the preview too (escaping is idempotent: an
        # escaped text has only printable characters), so a question read back with
        # `from_dict` from another process's pipe cannot draw on the terminal either.
        lines = [
            f"approve this call? profile {escape(self.profile)}, caller {escape(self.caller)}",
            f"  {escape(self.method)} {escape(self.route)}",
            f"  path:  {escape(self.path)}",
        ]
        lines += [f"  query: {escape(n)}={escape(v)}" for n, v in self.query]
        lines += [f"  header: {escape(n)}: {escape(v)}" for n, v in self.headers]
        if self.body_bytes:
            lines.append(
                f"  body:  {escape(self.body_type) or '(no type)'}, {self.body_bytes} bytes, "
                f"sha256 {escape(self.body_sha256)}"
            )
            more = f"  [first {PREVIEW_BYTES} bytes shown]" if self.preview_truncated else ""
            lines.append(f"  {escape(self.preview)}{more}")
        else:
            lines.append("  body:  none")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, object]:
        """Plain data for a pipe (the pool's worker asks its parent)."""
        return {
            "profile": self.profile,
            "caller": self.caller,
            "method": self.method,
            "route": self.route,
            "path": self.path,
            "query": [list(p) for p in self.query],
            "headers": [list(p) for p in self.headers],
            "body_type": self.body_type,
            "body_bytes": self.body_bytes,
            "body_sha256": self.body_sha256,
            "preview": self.preview,
            "preview_truncated": self.preview_truncated,
        }

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Question:
        """The question `to_dict` wrote (a pool worker's, read by its parent)."""
        return cls(
            profile=str(raw["profile"]),
            caller=str(raw["caller"]),
            method=str(raw["method"]),
            route=str(raw["route"]),
            path=str(raw["path"]),
            query=_pairs(raw["query"]),
            headers=_pairs(raw["headers"]),
            body_type=str(raw["body_type"]),
            body_bytes=int(raw["body_bytes"]),
            body_sha256=str(raw["body_sha256"]),
            preview=str(raw["preview"]),
            preview_truncated=bool(raw["preview_truncated"]),
        )


def _pairs(raw: Any) -> tuple[tuple[str, str], ...]:
    return tuple((str(name), str(value)) for name, value in raw)


class CannotAsk(Exception):
    """An approver's way to say no one can be asked after all (the channel is gone):
    the call is refused as `unavailable`, not as a person's no."""


class Approver(Protocol):
    """A channel that asks a person; `channel` names it on the record."""

    channel: str

    def __call__(self, question: Question, timeout_s: float) -> Answer | None:
        """The person's answer, or None when none came within `timeout_s`."""
        ...


def escape(text: str) -> str:
    """`text` with every character a terminal or a client could act on written as an
    escape (`\\n`, `\\x1b`, `\\u202e`), so it reads as one line and cannot move the
    cursor, clear the screen or reorder what follows.

    Backslashes are kept as they are, so a JSON body reads as its wire text (a JSON
    string cannot hold a raw control character, only its `\\u` escape); for the other
    bodies the size and SHA-256 in the question bind the exact bytes."""
    out: list[str] = []
    for ch in text:
        if unicodedata.category(ch) in _ESCAPED_CATEGORIES:
            code = ord(ch)
            out.append(
                {"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(ch)
                or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")
            )
        else:
            out.append(ch)
    return "".join(out)


def question_for(
    request: httpx.Request,
    *,
    profile: str,
    caller: str,
    method: str,
    route: str,
    path: str,
    query: str,
    headers: tuple[tuple[str, str], ...],
) -> Question:
    """The question for a built request: `path`, `query` and `headers` are the plan's
    (what the guest asked for, before the credential was added), the body is the
    request's own bytes, the ones that will be sent."""
    content = request.content
    shown = content[:PREVIEW_BYTES]
    return Question(
        profile=profile,
        caller=caller,
        method=method.upper(),
        route=route,
        path=path,
        query=tuple(_query_pairs(query)),
        headers=headers,
        body_type=request.headers.get("content-type", "") if content else "",
        body_bytes=len(content),
        body_sha256=hashlib.sha256(content).hexdigest(),
        preview=escape(shown.decode("utf-8", errors="backslashreplace")),
        preview_truncated=len(content) > PREVIEW_BYTES,
    )


def _query_pairs(query: str) -> list[tuple[str, str]]:
    """The query as sent, split into (name, value) as written on the wire (still
    percent-encoded: the person sees the exact bytes)."""
    out: list[tuple[str, str]] = []
    for item in query.split("&") if query else ():
        name, _, value = item.partition("=")
        out.append((name, value))
    return out


@dataclass(frozen=True)
class Held:
    """One held call's outcome, for its trace row."""

    verdict: Verdict
    channel: str
    waited_s: float


@dataclass
class Gate:
    """One run's approvals: who asks, how long they may take, what was said for good."""

    approver: Approver | None
    timeout_s: float = DEFAULT_APPROVAL_TIMEOUT_S
    clock: Callable[[], float] = time.monotonic
    _always: set[tuple[str, str]] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    #: Approvals are asked one at a time: a person answers one question at a time, and
    #: a terminal or a pipe carries one conversation.
    _asking: threading.Lock = field(default_factory=threading.Lock)

    def decide(
        self, key: tuple[str, str], question: Question, wanted: Callable[[], bool] = lambda: True
    ) -> Held:
        """Ask (unless this route was approved for the run); the verdict and the wait.

        `wanted` is looked at once this call's turn to ask comes: a run that ended while
        it waited behind another question does not put a stale one to the person."""
        with self._lock:
            if key in self._always:
                return Held(Verdict.APPROVED, "run", 0.0)
        if self.approver is None:
            return Held(Verdict.UNAVAILABLE, "none", 0.0)
        started = self.clock()
        with self._asking:
            with self._lock:  # another held call of this route may have said "always"
                if key in self._always:
                    return Held(Verdict.APPROVED, "run", self.clock() - started)
            if not wanted():
                return Held(Verdict.TIMED_OUT, "none", self.clock() - started)
            left = self.timeout_s - (self.clock() - started)
            try:
                answer = self.approver(question, left) if left > 0 else None
            except CannotAsk:
                return Held(Verdict.UNAVAILABLE, "none", self.clock() - started)
            except Exception:  # a broken channel is a no, never a yes
                answer = Answer.NO
        waited = self.clock() - started
        channel = getattr(self.approver, "channel", "unknown")
        if answer is None or waited > self.timeout_s:
            return Held(Verdict.TIMED_OUT, channel, waited)
        if answer is Answer.ALWAYS:
            with self._lock:
                self._always.add(key)
        if answer in (Answer.YES, Answer.ALWAYS):
            return Held(Verdict.APPROVED, channel, waited)
        return Held(Verdict.DECLINED, channel, waited)


__all__ = [
    "DEFAULT_APPROVAL_TIMEOUT_S",
    "MAX_APPROVAL_TIMEOUT_S",
    "PREVIEW_BYTES",
    "Answer",
    "Approver",
    "CannotAsk",
    "Gate",
    "Held",
    "Question",
    "Verdict",
    "escape",
    "question_for",
]
