"""The broker's decision: is this call allowed, and what exactly goes on the wire.

Why apart from sending: every rule that turns a guest's request into an upstream one
lives here (and in `calls.py`, which rebuilds a structured call's pieces) and nowhere
else, with no HTTP client of its own. A call is approved only if its method is a grant
verb in ASCII letters and its target matches an allow entry; the request is built from
nothing the guest controls except what that entry permits: the path (a raw call's
canonical path, or a structured call's values each encoded as one segment), the query
and header parameters the entry lists (pins added), and a body of a media type the
entry permits. Fixed headers, the operator's origin and the credential's headers are
added last; the credential's query parameter, if it has one, is appended after
approval (the guest may never send a parameter of that name), and a request whose wire
form is not what was approved is refused.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from urllib.parse import quote

import httpx

from runtime.broker import calls
from runtime.broker.calls import Body, CallRefused
from runtime.broker.credentials import Credential, credential_for
from runtime.broker.grants import Profile
from runtime.broker.reflection import Reflection
from runtime.contract import HostRequest
from specgen.allow import AllowEntry, response_header_readable
from specgen.routes import GRANT_METHODS, Route
from specgen.version import installed_version


def _user_agent() -> str:
    """`plimsoll-specgen/<version>`: some APIs (GitHub's) refuse a call without one."""
    version = installed_version()
    return f"plimsoll-specgen/{version}" if version else "plimsoll-specgen"


#: The User-Agent every call carries unless the profile's `headers` set one.
USER_AGENT = _user_agent()
#: Most bytes of response headers (names and values) one reply hands agent code.
MAX_REPLY_HEADER_BYTES = 16 * 1024


@dataclass(frozen=True)
class Plan:
    """An approved call: the entry it matched and the wire pieces built for it."""

    route: Route
    #: The request path as sent (ASCII, percent-encoded where values needed it).
    path: str
    #: The query string without `?` ("" for none), in the entry's order.
    query: str = ""
    headers: tuple[tuple[str, str], ...] = ()
    body: Body | None = None
    #: Names of the query and header parameters sent (the trace keeps these, never values).
    param_names: tuple[str, ...] = ()
    #: Response header names (lower-case, `*` a prefix) agent code may read on this
    #: call: the profile's list and the matched entry's.
    readable: tuple[str, ...] = ()

    @property
    def payload(self) -> bytes:
        """The JSON, text or binary bytes as forwarded (b"" for none or a built form body)."""
        return self.body.content or b"" if self.body is not None else b""

    @property
    def target(self) -> str:
        return self.path + ("?" + self.query if self.query else "")


class Policy:
    """One profile's rules: approve a call, build its request, check a reply for the key."""

    def __init__(self, profile: Profile, credential: Credential | None = None) -> None:
        """`credential` is the run's (a jwt profile mints one per run); by default the
        profile's static one."""
        self._profile = profile
        self._base_url = profile.base_url
        self._routes = profile.route_index
        self._origin = _origin(profile.base_url)
        self._credential: Credential | None = (
            credential if credential is not None else credential_for(profile)
        )
        # The needles are built once per broker, not per reply.
        self._reflection = Reflection(self._credential.secrets() if self._credential else ())
        # What every request carries before the plan's own headers, and the names the
        # guest may never set, are the profile's and the credential's: made once here.
        fixed = profile.headers
        given = {name.lower() for name, _ in fixed}
        leading = [] if "accept" in given else [("Accept", "application/json")]
        leading.append(("Accept-Encoding", "identity"))
        if "user-agent" not in given:
            leading.append(("User-Agent", USER_AGENT))
        self._leading: tuple[tuple[str, str], ...] = (*leading, *fixed)
        credential_headers = self._credential.headers() if self._credential else []
        credential_query = self._credential.query() if self._credential else []
        self._reserved_header_names = tuple(name for name, _ in fixed) + tuple(
            name for name, _ in credential_headers
        )
        self._reserved_query_names = tuple(name for name, _ in credential_query)

    def approve(self, method: object, path: object) -> Route | None:
        """The allow entry admitting this raw call, or None to refuse it.

        The method must be a grant verb in ASCII letters: `str.upper()` maps some
        non-ASCII letters onto ASCII ones (`"poſt".upper() == "POST"`), and a verb
        spelled that way is not one the operator wrote.
        """
        if not isinstance(method, str) or not isinstance(path, str):
            return None
        if not method.isascii() or method.upper() not in GRANT_METHODS:
            return None
        return self._routes.first_match(method.upper(), path)

    def plan(self, call: HostRequest) -> Plan | None:
        """The approved wire pieces of a host call, raw or structured, or None to refuse."""
        decided = self.decide(call)
        return decided if isinstance(decided, Plan) else None

    def decide(self, call: HostRequest) -> Plan | CallRefused:
        """The approved wire pieces, or the refusal naming its rule (runtime.refusals):
        `route_not_granted` when no allow entry matches the method and path."""
        try:
            plan = self._plan(call)
        except CallRefused as refused:
            return refused
        if plan is None:
            return CallRefused("no allow entry matches", "route_not_granted")
        return plan

    def _plan(self, call: HostRequest) -> Plan | None:
        method = call.method
        if not isinstance(method, str) or not method.isascii():
            return None
        method = method.upper()
        if method not in GRANT_METHODS:
            return None
        if call.route is None:
            route = self.approve(method, call.path)
            path = call.path
        else:
            path, from_value = calls.build_path(call.route, call.values)
            route = calls.match_wire(self._routes, method, path, from_value)
        if route is None:
            return None
        entry: AllowEntry = self._profile.entry_for(route)
        try:
            query = calls.build_query(entry, call.query, self._reserved_query_names)
            headers = calls.build_headers(entry, call.headers, self._reserved_header_names)
            body = calls.build_body(entry, call.body, call.media_type, call.payload)
        except CallRefused as refused:
            refused.route = route
            raise
        if len((path + "?" + query).encode("utf-8", "surrogatepass")) > calls.MAX_TARGET_BYTES:
            refused = CallRefused("the request target is too long")
            refused.route = route
            raise refused
        sent = {name for name, _ in call.query} | {
            p.name for p in entry.query if p.value is not None
        }
        names = tuple(p.name for p in entry.query if p.name in sent)
        given_headers = {name.lower() for name, _ in call.headers}
        names += tuple(
            p.name for p in entry.headers if p.value is not None or p.name.lower() in given_headers
        )
        readable = self._profile.response_headers + entry.response_headers
        return Plan(route, path, query, tuple(headers), body, names, readable)

    def build(
        self,
        method: str,
        path: str,
        payload: bytes,
        timeout_s: float,
        plan: Plan | None = None,
    ) -> httpx.Request | None:
        """The upstream request, or None when its wire form is not what was approved.

        Without `plan` this is a bare request for `path` with a JSON `payload` (the
        health probe); with one, every piece comes from the plan.
        """
        if plan is None:
            plan = Plan(Route(path, method), path, body=Body("application/json", payload or None))
        target = plan.target
        url = httpx.URL(self._base_url + target)
        if (
            url.raw_path != target.encode("ascii")
            or url.query != plan.query.encode("ascii")
            or url.fragment
            or url.scheme != self._origin.scheme
            or url.host != self._origin.host
            or url.port != self._origin.port
            or url.userinfo
        ):
            return None
        wire_query = plan.query
        credential_query = self._credential_query()
        if credential_query:
            # Appended after approval and after the checks above, which compared the
            # query with the plan's: the guest never names this parameter (calls.py
            # refuses it), so the only credential on the wire is the broker's.
            wire_query = plan.query + "&" + credential_query if plan.query else credential_query
            url = url.copy_with(query=wire_query.encode("ascii"))
        wire_target = plan.path + ("?" + wire_query if wire_query else "")
        body = plan.body
        headers = self._headers(body, plan.headers)
        timeout = {"connect": timeout_s, "read": timeout_s, "write": timeout_s, "pool": timeout_s}
        if body is not None and (body.fields or body.parts):
            request = _encoded_request(method, url, headers, body, timeout)
        else:
            request = _bytes_request(method, url, headers, body.content if body else None, timeout)
        if request.url.raw_path != wire_target.encode("ascii") or request.method != method:
            return None
        if body is not None and (body.fields or body.parts):
            sent_type = request.headers.get("content-type", "")
            if sent_type.partition(";")[0] != body.media_type:
                return None
        return request

    def _credential_query(self) -> str:
        """The credential's query parameters, every byte outside unreserved encoded."""
        if self._credential is None:
            return ""
        return "&".join(
            quote(name, safe="") + "=" + quote(value, safe="")
            for name, value in self._credential.query()
        )

    def _headers(
        self, body: Body | None, extra: tuple[tuple[str, str], ...]
    ) -> list[tuple[str, str]]:
        headers = [*self._leading, *extra]
        if body is not None and body.content:
            kind = body.media_type
            headers.append(
                ("Content-Type", kind + ("; charset=utf-8" if kind == "text/plain" else ""))
            )
        if self._credential is not None:
            headers += self._credential.headers()
        return headers

    def reply_headers(
        self, plan: Plan | None, raw: tuple[tuple[str, str], ...], content_type: str
    ) -> tuple[tuple[str, str], ...]:
        """The response headers agent code may read: lower-case names, in upstream order.

        Only names the plan's lists admit, and Content-Type whenever the upstream sent
        one (as the sanitised `content_type`); never a FORBIDDEN_RESPONSE_HEADERS name,
        never a value that is not printable ASCII. A header whose name or value holds
        the key (reflection.py), in any of its copies as received or joined, is dropped
        and the rest of the reply delivered; when only the listed headers' values put
        together hold it, every listed header is dropped. Repeated names are joined with
        ", " (RFC 9110 5.3); past MAX_REPLY_HEADER_BYTES the remaining headers are dropped.
        """
        readable = plan.readable if plan is not None else ()
        merged: dict[str, list[str]] = {}
        tainted: set[str] = set()
        received: list[tuple[str, str]] = []  # every admitted (name, value), upstream order
        typed = False
        for name, value in raw:
            low = name.lower()
            if low == "content-type":
                typed = True
                continue
            if not response_header_readable(low, readable):
                continue
            if not all(ch == "\t" or 0x20 <= ord(ch) <= 0x7E for ch in value):
                continue
            # As received: lower-casing the name could hide a mixed-case key in it.
            if self._reflection.found(f"{name}: {value}".encode("latin-1")):
                tainted.add(low)
            merged.setdefault(low, []).append(value.strip(" \t"))
            received.append((low, value.strip(" \t")))
        out: list[tuple[str, str]] = []
        if typed and not self._reflection.found(content_type.encode("ascii")):
            out.append(("content-type", content_type))
        size = sum(len(n) + len(v) for n, v in out)
        for low, values in merged.items():
            value = ", ".join(values)
            if low in tainted or self._reflection.found(f"{low}: {value}".encode("ascii")):
                continue
            size += len(low) + len(value)
            if size > MAX_REPLY_HEADER_BYTES:
                break
            out.append((low, value))
        # The key cut into pieces over several headers (or repeats of one) shows only
        # when they are put back together: then no listed header is delivered at all.
        kept = {name for name, _ in out if name != "content-type"}
        pieces = "".join(value for low, value in received if low in kept)
        if kept and self._reflection.found(pieces.encode("ascii")):
            return tuple((name, value) for name, value in out if name == "content-type")
        return tuple(out)

    def reflects_key(self, body: bytes) -> bool:
        """Does the reply hold the key, verbatim, encoded or in pieces (reflection.py)?"""
        return self._reflection.found(body)


@functools.lru_cache(maxsize=64)
def _origin(base_url: str) -> httpx.URL:
    """A profile's origin, parsed once per process, not once per run (URLs are
    immutable, so every policy of the profile can share it)."""
    return httpx.URL(base_url)


def _bytes_request(
    method: str,
    url: httpx.URL,
    headers: list[tuple[str, str]],
    content: bytes | None,
    timeout: dict[str, float],
) -> httpx.Request:
    """A request with no body or a body of bytes (never a view: the broker takes every
    body as `bytes` on entry, so len() is its size), its headers exactly those httpx would
    add (Host first, Content-Length last, or `0` first for a bodiless POST, PUT or
    PATCH), made as one stream instead of through httpx's content encoding, which would
    normalise every header twice and copy the body again."""
    host = ("Host", url.netloc.decode("ascii"))
    if content:
        lines = [host, *headers, ("Content-Length", str(len(content)))]
    elif method in ("POST", "PUT", "PATCH"):
        lines = [host, ("Content-Length", "0"), *headers]
    else:
        lines = [host, *headers]
    request = httpx.Request(
        method,
        url,
        headers=lines,
        stream=httpx.ByteStream(content or b""),
        extensions={"timeout": timeout},
    )
    request.read()
    return request


def _encoded_request(
    method: str,
    url: httpx.URL,
    headers: list[tuple[str, str]],
    body: Body,
    timeout: dict[str, float],
) -> httpx.Request:
    """A form or multipart request, encoded by httpx (its boundary, its Content-Type)."""
    fields: dict[str, list[str]] = {}
    for name, value in body.fields:
        fields.setdefault(name, []).append(value)
    request = httpx.Request(
        method,
        url,
        headers=headers,
        data=fields or None,
        files=list(body.parts) if body.parts else None,
        extensions={"timeout": timeout},
    )
    request.read()  # form and multipart bodies are streams; the size check needs bytes
    return request


__all__ = ["MAX_REPLY_HEADER_BYTES", "USER_AGENT", "Plan", "Policy"]
