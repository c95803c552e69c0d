"""The one contract between the sandbox and whatever answers its host calls: plain data.

The sandbox knows nothing about grants, keys or HTTP; the broker knows nothing about
WebAssembly. They meet here: the sandbox decodes the guest's envelope into a
`HostRequest` and hands it to a `HostHandler`, whose answer is a `HostReply` (a status
and bytes). Both are plain frozen dataclasses, so a later change can add fields (a route
template, path parameters, a query, headers, a media type) with defaults, without
touching the sandbox (the structured call's fields were added this way), and the engine
can run in another process than the key: on the worker and gvisor tiers
(runtime/tiers/) these records cross a pipe as plain JSON and bytes.

Keeping the reply this small is deliberate: the only upstream response headers that can
reach guest code are the ones the broker put in `HostReply.headers`: a sanitised content
type and the names the operator's grant lists (`response_headers`), never a cookie or an
authentication header, never one holding the key.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, TypeAlias

#: The largest request body (bytes) a call may carry, whatever its media type: the
#: sandbox reads no more out of guest memory, the broker sends no more (10 MiB).
MAX_REQUEST_BODY_BYTES = 10 << 20


@dataclass(frozen=True, slots=True)
class ObjectValue:
    """A parameter value that is a JSON object of scalars (deepObject's `name[key]=v`)."""

    pairs: tuple[tuple[str, str], ...]


#: A query or header value as the guest sent it, every scalar as its JSON text
#: (`5`, `true`, `"a b"` -> `a b`): one value, an array of values, or an object.
ParamValue: TypeAlias = str | tuple[str, ...] | ObjectValue


@dataclass(frozen=True, slots=True)
class HostRequest:
    """One decoded host call, exactly as the guest asked for it (nothing approved yet)."""

    method: str
    #: The request target the guest wrote (path only; the broker refuses anything else).
    path: str
    #: The exact UTF-8 JSON text the guest wrote for `body`, or None when absent, so
    #: what the broker approves is what it forwards ("approve == wire").
    body: bytes | None = None
    #: A structured call: the route pattern the generated client names (`*`
    #: where a path value goes), instead of `path`. The broker builds the URL itself.
    route: str | None = None
    #: The path values, in order, one per `*` of `route`, each as text.
    values: tuple[str, ...] = ()
    #: Query and header parameters as (name, value) pairs in the guest's order,
    #: duplicates kept so the broker can refuse them.
    query: tuple[tuple[str, ParamValue], ...] = ()
    headers: tuple[tuple[str, ParamValue], ...] = ()
    #: The body's media type the guest asked for (structured calls only); None is JSON.
    media_type: str | None = None
    #: A text or binary body (structured calls only) exactly as the guest handed it,
    #: outside the envelope: a string as its UTF-8 bytes, an ArrayBuffer's or a
    #: Uint8Array's bytes. Never together with `body`. It travels beside the envelope so
    #: 10 MiB of bytes is one copy, not a JSON string escaped, scanned and decoded.
    payload: bytes | None = None
    #: The global whose client made the call (`github` for `github.repos_get(...)`), as
    #: the guest's envelope names it. A run given several profiles hands each call to
    #: the broker of the profile with that global; the guest can write any name here,
    #: so it only picks among the profiles the run was given, each deciding its own
    #: calls. A run of one profile ignores it.
    client: str | None = None


@dataclass(frozen=True, slots=True)
class HostReply:
    """What the guest gets back from one host call."""

    status: int
    body: bytes
    #: The body's media type; it decides what the guest's client makes of the body
    #: (specgen/media.py: JSON parsed, text a string, binary a Uint8Array). "" says
    #: nothing: the client parses JSON if it can and keeps the text otherwise, and a
    #: body that is not UTF-8 reaches the guest as bytes.
    content_type: str = ""
    #: Response headers the grant lets agent code read, already filtered by the broker:
    #: lower-case names, printable ASCII values, `content-type` included when present.
    headers: tuple[tuple[str, str], ...] = ()
    #: True when the upstream API answered (any status, 304 and 5xx included); False for
    #: a reply the broker or the sandbox made itself (a refusal, a failed call), which
    #: the client's `$response` form rejects instead of resolving.
    upstream: bool = False


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


__all__ = [
    "MAX_REQUEST_BODY_BYTES",
    "HostHandler",
    "HostReply",
    "HostRequest",
    "ObjectValue",
    "ParamValue",
]
