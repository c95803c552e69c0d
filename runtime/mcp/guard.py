"""Bounds on what one MCP client can make the server hold, on both transports.

The SDK leaves these open: a JSON-RPC id reused while its first request is in flight
(over HTTP the second request takes over the first one's response stream, and both are
left unanswered), any number of requests in flight on one session, request bodies read
and held without a total, and stdin lines of any length. Here:

- `InFlight` keeps one session's request ids while they are in flight: a duplicate is
  answered at once with a JSON-RPC error (ids are unique per session), and past
  MAX_IN_FLIGHT a request is refused the same way. A cancelled request frees its id
  (MCP never answers one).
- `HttpGuard` (ASGI, in front of the SDK's app) first refuses what the SDK's Host and
  Origin check refuses (with the same settings), so a rebinding or cross-origin request
  never reaches the bookkeeping below; then it reads each POST body itself, at most
  MAX_MESSAGE_BYTES of it (413 past that), counts every body held by a request still
  being answered against MAX_HELD_BYTES (503 past that, before the body is parsed), and
  applies `InFlight` per session id. It also keeps the open sessions in use order: with
  MAX_SESSIONS open, a new client's initialize first ends the least recently used one
  that has nothing in progress, so sessions nobody uses cannot lock new clients out
  (the SDK would answer 503 until they expired).
- `BoundedStdin` hands the SDK's stdio transport one line at a time, never more than
  MAX_MESSAGE_BYTES of it: a longer line is skipped to its newline and answered with a
  JSON-RPC error; `guard_streams` applies `InFlight` to the stdio session.
"""

from __future__ import annotations

import json
import os
import re
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.abc
import orjson
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from mcp.shared.dispatcher import coerce_request_id
from mcp.shared.message import SessionMessage
from mcp.types import (
    ErrorData,
    JSONRPCError,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
)
from pydantic import ValidationError
from starlette.requests import Request

#: Bytes of one JSON-RPC message (an HTTP body, a stdin line): room for an execute's
#: code at its limit of 1 Mi characters while they average under 4 bytes as JSON; code
#: that does not fit is refused as a message too large, not as code too long.
MAX_MESSAGE_BYTES = 4 << 20
#: Bytes of request bodies the HTTP server holds at once, over all clients (parsed, the
#: SDK keeps about four times that in memory); a full queue of executes of 1.5 MiB fits.
MAX_HELD_BYTES = 32 << 20
#: Requests one session may have in flight at once.
MAX_IN_FLIGHT = 32
#: Seconds a streamable HTTP session may sit with no request before the SDK closes it
#: (its client then opens a new one), and how many may be open at once.
SESSION_IDLE_S = 300.0
MAX_SESSIONS = 256

INVALID_REQUEST = -32600
PARSE_ERROR = -32700
#: The notification `BoundedStdin` yields in place of a line it skipped; `guard_streams`
#: answers it with an error (a client that sends it itself just gets that error too).
_TOO_LONG = "notifications/plimsoll/line_too_long"
#: The notification `BoundedStdin` yields in place of a request with an id MCP refuses.
_BAD_ID = "notifications/plimsoll/bad_request_id"
_BAD_ID_LINE = orjson.dumps({"jsonrpc": "2.0", "method": _BAD_ID}).decode()
#: The longest line whose request id `_bad_id` checks.
_ID_CHECKED_BYTES = 64 << 10
#: An id at the start of a skipped line (first or second key, as JSON-RPC clients write
#: it), so that the request's own caller gets the error instead of waiting forever.
_LEADING_ID = re.compile(
    rb'\A\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*(-?[0-9]{1,18}|"[^"\\]{0,128}")'
)


def _key(request_id: str | int) -> str:
    """The collision domain of both of the SDK's tables: its dispatcher reads "7" and 7
    as one id, its HTTP transport keys streams by str(id)."""
    return str(coerce_request_id(request_id))


def _error(request_id: str | int | None, message: str, code: int = INVALID_REQUEST) -> JSONRPCError:
    return JSONRPCError(jsonrpc="2.0", id=request_id, error=ErrorData(code=code, message=message))


def _unreadable(exc: Exception) -> JSONRPCError | None:
    """The answer JSON-RPC 2.0 gives a line the SDK's stdio transport could not read as a
    message (it hands the server the exception, which drops it, so a client that sent a
    request in a bad shape waited for ever): a parse error for what is not JSON; an
    invalid request for JSON that is not a message, with its id when it has a usable one
    and a method (none for a broken response: responses are never answered)."""
    if not isinstance(exc, ValidationError):
        return None
    problems = exc.errors()
    if any(p["type"] == "json_invalid" for p in problems):
        return _error(None, "not JSON", PARSE_ERROR)
    # The message itself is the input of an error about the whole of it (its `loc` one
    # name: the union member) or about a field it lacks (two); a field's own error has
    # that field's value as its input, which may be an object with an "id" of its own.
    sent = next(
        (
            p["input"]
            for p in problems
            if isinstance(p.get("input"), dict)
            and (len(p["loc"]) == 1 or (len(p["loc"]) == 2 and p["type"] == "missing"))
        ),
        None,
    )
    if isinstance(sent, dict) and "method" not in sent and ("result" in sent or "error" in sent):
        return None
    raw = sent.get("id") if isinstance(sent, dict) else None
    request_id = raw if isinstance(raw, str | int) and not isinstance(raw, bool) else None
    return _error(request_id, "not a JSON-RPC 2.0 message MCP knows")


class InFlight:
    """One session's request ids that have not been answered yet."""

    def __init__(self, limit: int = MAX_IN_FLIGHT) -> None:
        self._ids: set[str] = set()
        self._limit = limit

    def admit(self, request_id: str | int) -> str | None:
        """Take the id, or the reason it is refused (a text that never echoes it)."""
        key = _key(request_id)
        if key in self._ids:
            return "request id already in flight on this session; ids are unique per session"
        if len(self._ids) >= self._limit:
            return f"{self._limit} requests already in flight on this session; wait for one"
        self._ids.add(key)
        return None

    def release(self, request_id: str | int) -> None:
        self._ids.discard(_key(request_id))

    def __len__(self) -> int:
        return len(self._ids)


# --- stdio -------------------------------------------------------------------------


class BoundedStdin:
    """stdin as the SDK's stdio transport reads it (`async for line in stdin`), a line
    at a time and never more than `limit` bytes of one in memory.

    It takes fd 0 over as the SDK would (a private duplicate for reading, the null
    device in its place), so nothing else in the process reads the client's messages.
    """

    def __init__(self, fd: int = 0, limit: int = MAX_MESSAGE_BYTES) -> None:
        private = os.dup(fd)
        null = os.open(os.devnull, os.O_RDONLY)
        try:
            os.dup2(null, fd)
        finally:
            os.close(null)
        self._file = os.fdopen(private, "rb", closefd=True)
        self._limit = limit

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[str]:
        while True:
            line = await anyio.to_thread.run_sync(self._read_line, abandon_on_cancel=True)
            if line is None:
                return
            yield line

    def _read_line(self) -> str | None:
        line = self._file.readline(self._limit + 1)
        while line.isspace():  # a blank line is no message, so nothing answers it
            line = self._file.readline(self._limit + 1)
        if not line:
            return None
        if line.endswith(b"\n") or len(line) <= self._limit:
            if _bad_id(line):
                return _BAD_ID_LINE
            return line.decode("utf-8", "replace")
        found = _LEADING_ID.match(line)
        while line and not line.endswith(b"\n"):  # skip the rest, a bounded chunk at a time
            line = self._file.readline(1 << 16)
        request_id = orjson.loads(found.group(1)) if found else None
        return orjson.dumps(
            {"jsonrpc": "2.0", "method": _TOO_LONG, "params": {"id": request_id}}
        ).decode()


def _bad_id(line: bytes) -> bool:
    """A request whose id is not a string or an integer (MCP: never null either). The
    SDK reads it as a notification, dropping the id, and never answers it; JSON-RPC
    answers it with an invalid-request error whose id is null.

    It parses the line a second time (the SDK parses it too), so only a line up to
    _ID_CHECKED_BYTES is looked at: ids are wrong in pings and small requests, not in
    the large executes whose second parse would cost 0.4 ms per MiB."""
    if len(line) > _ID_CHECKED_BYTES:
        return False
    try:
        message = orjson.loads(line)
    except orjson.JSONDecodeError:
        return False  # not JSON: answered as a parse error (`_unreadable`)
    if not isinstance(message, dict) or "method" not in message or "id" not in message:
        return False
    request_id = message["id"]
    if isinstance(request_id, float):  # orjson reads an integer past 64 bits as a float
        request_id = json.loads(line)["id"]
    return not isinstance(request_id, str | int) or isinstance(request_id, bool)


@asynccontextmanager
async def guard_streams(
    read: Any, write: Any, limit: int = MAX_IN_FLIGHT
) -> AsyncIterator[tuple[Any, Any]]:
    """The stdio session's streams with `InFlight` between the client and the server."""
    in_flight = InFlight(limit)
    to_server, server_read = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    server_write, from_server = anyio.create_memory_object_stream[SessionMessage](0)

    async def inbound() -> None:
        async with to_server:
            async for item in read:
                refusal = _refusal(item, in_flight)
                if refusal is not None:
                    await write.send(SessionMessage(refusal))
                else:
                    await to_server.send(item)

    async def outbound() -> None:
        async with from_server:
            async for item in from_server:
                message = item.message
                if isinstance(message, JSONRPCResponse | JSONRPCError) and message.id is not None:
                    in_flight.release(message.id)
                await write.send(item)

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(inbound)
            tg.start_soon(outbound)
            try:
                yield server_read, server_write
            finally:
                tg.cancel_scope.cancel()
    finally:
        # The transport's writer runs until its stream closes; the SDK's session closes
        # the stream it was given, which here is ours, so the transport's is closed here
        # or the process would outlive its client's EOF.
        await write.aclose()


def _refusal(item: SessionMessage | Exception, in_flight: InFlight) -> JSONRPCError | None:
    if isinstance(item, Exception):
        return _unreadable(item)
    message = item.message
    if isinstance(message, JSONRPCNotification) and message.method == _TOO_LONG:
        raw = (message.params or {}).get("id")
        request_id = raw if isinstance(raw, str | int) and not isinstance(raw, bool) else None
        return _error(request_id, f"message over {MAX_MESSAGE_BYTES} bytes; not read")
    if isinstance(message, JSONRPCNotification) and message.method == _BAD_ID:
        return _error(None, "a request's id must be a string or an integer")
    if isinstance(message, JSONRPCNotification) and message.method == "notifications/cancelled":
        # A cancelled request is never answered (MCP), so its id is free again now; the
        # SDK keeps a late handler of the old one from answering for the new one.
        raw = (message.params or {}).get("requestId")
        if isinstance(raw, str | int) and not isinstance(raw, bool):
            in_flight.release(raw)
    if isinstance(message, JSONRPCRequest):
        why = in_flight.admit(message.id)
        if why is not None:
            return _error(message.id, why)
    return None


# --- streamable HTTP -----------------------------------------------------------------

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class HttpGuard:
    """ASGI middleware in front of the SDK's streamable HTTP app (see the module doc)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        security: TransportSecuritySettings | None = None,
        max_body: int | None = None,
        max_held: int | None = None,
        max_in_flight: int | None = None,
    ) -> None:
        self.app = app
        #: The SDK's own Host/Origin check, with the settings the app was given, made
        #: here first: a request the SDK would refuse (a page's cross-origin POST, a
        #: rebinding Host) must not make this guard end a session or hold its body.
        self.security = TransportSecurityMiddleware(security) if security is not None else None
        self.max_body = MAX_MESSAGE_BYTES if max_body is None else max_body
        self.max_held = MAX_HELD_BYTES if max_held is None else max_held
        self.max_in_flight = MAX_IN_FLIGHT if max_in_flight is None else max_in_flight
        self.held = 0
        self.sessions: dict[str, InFlight] = {}
        self.max_sessions = MAX_SESSIONS
        #: Open sessions, least recently used first, with their requests in progress.
        self.opened: OrderedDict[str, int] = OrderedDict()
        self.opening = 0  # initialize requests not answered yet

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.security is not None:
            refused = await self.security.validate_request(Request(scope))
            if refused is not None:
                await refused(scope, receive, send)
                return
        headers = {k.lower(): v for k, v in scope.get("headers", [])}
        session = headers.get(b"mcp-session-id", b"").decode("latin-1")
        if session in self.opened:
            self.opened[session] += 1
            self.opened.move_to_end(session)
            try:
                await self._request(scope, headers, receive, send)
            finally:
                if session in self.opened:
                    self.opened[session] -= 1
                    if scope.get("method") == "DELETE":
                        del self.opened[session]
            return
        if not session and scope.get("method") == "POST":
            await self._make_room(scope)
            self.opening += 1
            try:
                await self._request(scope, headers, receive, self._recording(send))
            finally:
                self.opening -= 1
            return
        await self._request(scope, headers, receive, send)

    async def _make_room(self, scope: Scope) -> None:
        """With the table full, end the least recently used session that has nothing in
        progress (a DELETE, as its client could send it), so a new client gets in; its
        own client, if any, gets 404 and opens a new session, as MCP says it must."""
        while len(self.opened) + self.opening >= self.max_sessions:
            idle = next((sid for sid, busy in self.opened.items() if not busy), None)
            if idle is None:
                return  # every session is busy: the SDK refuses the new one (503)
            del self.opened[idle]
            await self._end(scope, idle)

    async def _end(self, scope: Scope, idle: str) -> None:
        headers = [(k, v) for k, v in scope.get("headers", []) if k.lower() in (b"host", b"origin")]
        ending = {
            **scope,
            "method": "DELETE",
            "headers": [*headers, (b"mcp-session-id", idle.encode("latin-1"))],
        }

        async def nothing() -> Message:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def discard(message: Message) -> None:
            pass

        await self.app(ending, nothing, discard)

    def _recording(self, send: Send) -> Send:
        """`send` that notes the session an initialize answer opens."""

        async def record(message: Message) -> None:
            if message["type"] == "http.response.start" and message.get("status") == 200:
                for name, value in message.get("headers", []):
                    if name.lower() == b"mcp-session-id":
                        self.opened[value.decode("latin-1")] = 0
            await send(message)

        return record

    async def _request(
        self, scope: Scope, headers: dict[bytes, bytes], receive: Receive, send: Send
    ) -> None:
        if scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        declared = headers.get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self.max_body:
            await _plain(send, 413, "request body too large")
            return
        body = bytearray()
        length = reserved = 0
        over_budget = False
        try:
            while True:
                message = await receive()
                if message["type"] != "http.request":
                    return  # the client went away before its body arrived
                chunk = message.get("body", b"")
                length += len(chunk)
                if length > self.max_body:
                    await _plain(send, 413, "request body too large")
                    return
                if not over_budget and self.held + len(chunk) > self.max_held:
                    # Read the rest without keeping it, so the client gets the 503
                    # rather than a connection reset halfway through its body.
                    over_budget = True
                    self.held -= reserved
                    reserved = 0
                    body = bytearray()
                if not over_budget:
                    self.held += len(chunk)
                    reserved += len(chunk)
                    body += chunk
                if not message.get("more_body", False):
                    break
            if over_budget:
                await _plain(send, 503, "server busy: too many request bytes held; try again")
                return
            await self._serve(scope, bytes(body), headers, receive, send)
        finally:
            self.held -= reserved

    async def _serve(
        self, scope: Scope, body: bytes, headers: dict[bytes, bytes], receive: Receive, send: Send
    ) -> None:
        request_id = _request_id(body)
        session = headers.get(b"mcp-session-id", b"").decode("latin-1")
        in_flight = None
        if request_id is not None and session:
            in_flight = self.sessions.setdefault(session, InFlight(self.max_in_flight))
            why = in_flight.admit(request_id)
            if why is not None:
                error = _error(request_id, why).model_dump_json(by_alias=True, exclude_unset=True)
                await _plain(send, 409, error, "application/json")
                return
        sent = False

        async def replay() -> Message:
            # The body once, then the client's own receive: it reports the disconnect the
            # SDK listens for while it streams the answer.
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        released = False

        def release() -> None:
            nonlocal released
            if in_flight is not None and not released:
                released = True
                in_flight.release(request_id)  # type: ignore[arg-type]
                if not len(in_flight) and self.sessions.get(session) is in_flight:
                    self.sessions.pop(session, None)

        async def answering(message: Message) -> None:
            # The id is free from the moment its answer leaves: a client may send its
            # next request with the same id as soon as it has read this one.
            if message["type"] == "http.response.body" and _answers(
                message.get("body", b""), request_id
            ):
                release()
            await send(message)

        try:
            await self.app(scope, replay, answering if in_flight is not None else send)
        finally:
            release()


def _answers(chunk: bytes, request_id: str | int | None) -> bool:
    """Does this piece of a response (an SSE event, or a JSON body) carry the JSON-RPC
    answer, result or error, to `request_id`?"""
    if request_id is None or (b'"result"' not in chunk and b'"error"' not in chunk):
        return False
    texts = [chunk] if chunk.lstrip().startswith(b"{") else []
    texts += [line[5:] for line in chunk.splitlines() if line.startswith(b"data:")]
    for text in texts:
        try:
            value = orjson.loads(text)
        except orjson.JSONDecodeError:
            continue
        if (
            isinstance(value, dict)
            and ("result" in value or "error" in value)
            and isinstance(value.get("id"), str | int)
            and _key(value["id"]) == _key(request_id)
        ):
            return True
    return False


def _request_id(body: bytes) -> str | int | None:
    """The id of a JSON-RPC request body, or None for anything else (notifications,
    responses, batches, bodies that do not parse: the SDK answers those itself)."""
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(value, dict) or "method" not in value:
        return None
    request_id = value.get("id")
    if isinstance(request_id, bool) or not isinstance(request_id, str | int):
        return None
    return request_id


async def _plain(send: Send, status: int, text: str, media: str = "text/plain") -> None:
    body = text.encode("utf-8")
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", f"{media}; charset=utf-8".encode()),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
