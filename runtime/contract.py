"""The one contract between the sandbox and whatever answers its host calls: plain data.

The sandbox knows nothing about grants, keys or HTTP; the broker knows nothing about
WebAssembly. They meet here: the sandbox decodes the guest's envelope into a
`HostRequest` and hands it to a `HostHandler`, whose answer is a `HostReply` (a status
and bytes). Both are plain frozen dataclasses, so a later change can add fields (a route
template, path parameters, a query, headers, a media type) with defaults, without
touching the sandbox, and the engine could one day run in another process than the key.

Keeping the reply this small is deliberate: no header of the upstream response other
than a sanitised content type can ever reach guest code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class HostRequest:
    """One decoded host call, exactly as the guest asked for it (nothing approved yet)."""

    method: str
    #: The request target the guest wrote (path only; the broker refuses anything else).
    path: str
    #: The exact UTF-8 JSON text the guest wrote for `body`, or None when absent, so
    #: what the broker approves is what it forwards ("approve == wire").
    body: bytes | None = None


@dataclass(frozen=True, slots=True)
class HostReply:
    """What the guest gets back from one host call."""

    status: int
    body: bytes
    content_type: str = "text/plain; charset=utf-8"


class HostHandler(Protocol):
    """Answers one host call synchronously; the guest is blocked meanwhile.

    A handler may also have `start(request) -> Callable[[], HostReply]`, for the calls the
    guest awaits as promises: the sandbox calls `start` on the guest's thread, in the
    order the guest made its calls, and runs what it returns on a worker thread, several
    at once. Without `start`, the sandbox calls the handler itself on the worker thread.
    The broker has one, so it can decide each call (budget, rules, trace number) in the
    guest's order and only send it concurrently.
    """

    def __call__(self, request: HostRequest) -> HostReply: ...


__all__ = ["HostHandler", "HostReply", "HostRequest"]
