"""The pipe between the broker and an engine process: frames of plain data, both ways.

A frame is two big-endian u32 lengths, a JSON object (orjson) and a blob of raw bytes
(a request or reply body, a memory image), so bodies cross without base64. Nothing is
ever pickled: the broker treats every byte from the engine process as hostile, so
every frame it reads is bounded in size before it is read (`read_frame`'s limits) and
every field is checked for its type when decoded (`WireError` otherwise, which ends
that run). This module imports nothing from `runtime.broker`: the engine process
loads it.
"""

from __future__ import annotations

import os
import select
import struct
import time
from typing import Any

import orjson

from runtime.contract import (
    MAX_REQUEST_BODY_BYTES,
    HostReply,
    HostRequest,
    ObjectValue,
    ParamValue,
)
from runtime.sandbox import GuestGrant, Limits, RunResult
from specgen.routes import Route

_HEAD = struct.Struct(">II")
#: Largest JSON part of a frame the broker reads from an engine process: a request's
#: envelope is at most ~1.1 MiB (the sandbox's MAX_ENVELOPE_BYTES), its body travels
#: in the blob, and a run's output is at most 64 KiB per stream, escaped.
MAX_JSON_BYTES = 4 << 20
#: Largest blob from an engine process, but for the memory image a scan asked for: a
#: call's text or binary body, which the sandbox caps at MAX_REQUEST_BODY_BYTES.
MAX_BLOB_BYTES = MAX_REQUEST_BODY_BYTES
#: How long a reader on either side looks for the next frame before it sleeps
#: (`FrameReader._spin`): longer than the broker takes to answer a call it decides
#: itself (a refusal, ~50-150 us) and than a guest takes between awaited calls, shorter
#: than an upstream round trip. A wait that outlasts it turns the spin off for that
#: reader until a wait is short again, so a run of upstream calls is slept through.
SPIN_S = 300e-6


def spin_for(busy: int) -> float:
    """The spin for a run while `busy` runs (this one included) are on engine processes.

    Each run has two readers that spin while they wait, its engine process and its
    broker's thread; a spin pays only when each has a CPU to itself, and when they
    outnumber the CPUs a spinning reader takes the CPU from one with work (two busy
    pool workers on two CPUs ran a fifth slower with it). So: SPIN_S while twice
    `busy` fits the CPUs this process may use, else none."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # no affinity outside Linux
        cpus = os.cpu_count() or 1
    return SPIN_S if 2 * busy <= cpus else 0.0


class WireError(Exception):
    """A frame that is cut short, too large or not what the protocol says."""


class PeerGone(WireError):
    """The other end closed its pipe (it exited or was killed)."""


class WireTimeout(WireError):
    """No whole frame arrived before the deadline."""


def encode(header: dict[str, Any], blob: bytes = b"") -> bytes:
    data = orjson.dumps(header)
    return _HEAD.pack(len(data), len(blob)) + data + blob


def write_frame(
    fd: int, header: dict[str, Any], blob: bytes = b"", *, deadline: float | None = None
) -> None:
    """Write one frame. With a deadline, `fd` must be non-blocking: a peer that stops
    reading (its pipe full) is a WireTimeout at the deadline, never a writer stuck.

    The write is tried first and waited for only when the pipe is full: a pipe with
    room (nearly every frame) costs one system call, not a `select` and a write."""
    view = memoryview(encode(header, blob))
    while True:
        try:
            view = view[os.write(fd, view) :]
            if not view:
                return
        except BlockingIOError:
            if deadline is None:
                continue
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([], [fd], [], left)[1]:
                raise WireTimeout("the peer stopped reading")


class FrameReader:
    """Frames from one pipe, read in large pieces: one `read` usually brings a whole
    frame (or several), where reading the head, the JSON and the blob each on its own
    cost a system call apiece on every host call.

    On a non-blocking `fd` the read is tried first and waited for (`select`) only when
    nothing is there yet: a reply that arrived while its reader was busy costs one
    system call, and one that comes within `spin_s` is looked for again rather than
    slept for (`_spin`), unless the last wait outlasted the spin and no wait since was
    short. On a blocking one, a deadline is waited for before each read, as a blocking
    read could outlast it."""

    def __init__(self, fd: int, *, spin_s: float = 0.0) -> None:
        self.fd = fd
        self._buffer = bytearray()
        self._eager = not os.get_blocking(fd)
        #: How long a wait looks before it sleeps; on a non-blocking fd only, as a read
        #: on a blocking one waits. The owner may change it between frames.
        self.spin_s = spin_s
        #: False after a wait the spin did not cover, until a wait is short again: the
        #: next wait is likely as long (an upstream call after an upstream call), and
        #: spinning through its start would cost a CPU for nothing.
        self._spin_next = True

    def set_spin(self, spin_s: float) -> None:
        """A new window, and a fresh guess (a new run's waits are not the last one's)."""
        self.spin_s = spin_s
        self._spin_next = True

    def _fill(self, n: int, deadline: float | None) -> None:
        """Until the buffer holds `n` bytes; a deadline bounds the whole wait."""
        while len(self._buffer) < n:
            if not self._eager:
                self._wait(deadline)
                self._read_some(n)
            elif self._read_some(n):
                continue
            elif self.spin_s <= 0:
                self._wait(deadline)
            elif self._spin_next:
                if not self._spin(n, deadline):
                    self._spin_next = False
                    self._wait(deadline)
            else:
                begun = time.monotonic()
                self._wait(deadline)
                self._spin_next = time.monotonic() - begun <= self.spin_s

    def _spin(self, n: int, deadline: float | None) -> bool:
        """Look again for up to `spin_s` before sleeping: True once bytes came.

        A frame that comes within that window is read without this process being put
        to sleep and woken on another CPU, which on a virtual machine costs more than
        the whole frame's work (tens of microseconds each way). Each look yields the
        CPU first, so a peer waiting to run on this one runs; the window is short, so
        a reply that takes longer (an upstream call) is slept for as before.
        """
        end = time.monotonic() + self.spin_s
        if deadline is not None:
            end = min(end, deadline)
        while time.monotonic() < end:
            try:
                os.sched_yield()
            except OSError:  # refused (a filter): looking without yielding would
                self.spin_s = 0.0  # starve a peer on this CPU, so sleep from now on
                return False
            if self._read_some(n):
                return True
        return False

    def _read_some(self, n: int) -> bool:
        """One read towards `n` bytes: False when a non-blocking pipe had none yet."""
        try:
            chunk = os.read(self.fd, max(1 << 16, min(n - len(self._buffer), 16 << 20)))
        except BlockingIOError:
            return False
        if not chunk:
            raise PeerGone("the pipe closed")
        self._buffer += chunk
        return True

    def _wait(self, deadline: float | None) -> None:
        """Until the pipe can be read (a WireTimeout at the deadline)."""
        if deadline is None:
            if self._eager:
                select.select([self.fd], [], [])
            return
        left = max(0.0, deadline - time.monotonic())  # at the deadline, one last look
        if not select.select([self.fd], [], [], left)[0]:
            raise WireTimeout("no frame before the deadline")

    def read(
        self,
        *,
        deadline: float | None = None,
        max_json: int = MAX_JSON_BYTES,
        max_blob: int = MAX_BLOB_BYTES,
    ) -> tuple[dict[str, Any], bytes]:
        """One frame: its JSON object and blob. Sizes are checked before the rest is read."""
        buffer = self._buffer
        if len(buffer) < _HEAD.size:
            self._fill(_HEAD.size, deadline)
        size, blob_size = _HEAD.unpack_from(buffer)
        if size > max_json or blob_size > max_blob:
            raise WireError(f"frame of {size} + {blob_size} bytes is over the limit")
        start = _HEAD.size + size
        end = start + blob_size
        if len(buffer) < end:
            self._fill(end, deadline)
        with memoryview(buffer) as view:  # each part copied once, straight from the buffer
            try:
                header = orjson.loads(view[_HEAD.size : start])
            except orjson.JSONDecodeError:
                raise WireError("frame is not JSON") from None
            blob = bytes(view[start:end]) if blob_size else b""
        del buffer[:end]
        if not isinstance(header, dict) or not isinstance(header.get("t"), str):
            raise WireError("frame is not an object with a type")
        return header, blob


# -- typed fields ------------------------------------------------------------------------


def _get(d: dict[str, Any], key: str, kind: type | tuple[type, ...]) -> Any:
    value = d.get(key)
    if not isinstance(value, kind) or (isinstance(value, bool) and kind in (int, (int, float))):
        raise WireError(f"field {key!r} is not {getattr(kind, '__name__', kind)}")
    return value


def _opt_str(d: dict[str, Any], key: str) -> str | None:
    value = d.get(key)
    if value is not None and not isinstance(value, str):
        raise WireError(f"field {key!r} is not a string")
    return value


def _strings(value: Any, what: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise WireError(f"{what} is not a list of strings")
    return tuple(value)


def _pair(value: Any, what: str) -> tuple[str, str]:
    """Exactly two strings: a longer or shorter list is the peer's fault (WireError),
    never a ValueError from unpacking that the broker would take for a dead engine."""
    pair = _strings(value, what)
    if len(pair) != 2:
        raise WireError(f"{what} is not a pair")
    return pair[0], pair[1]


# -- host calls --------------------------------------------------------------------------


def _param_out(value: ParamValue) -> Any:
    if isinstance(value, ObjectValue):
        return {"o": [list(p) for p in value.pairs]}
    return value if isinstance(value, str) else list(value)


def _param_in(value: Any) -> ParamValue:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return _strings(value, "a parameter's values")
    if isinstance(value, dict) and set(value) == {"o"} and isinstance(value["o"], list):
        pairs = []
        for pair in value["o"]:
            pairs.append(_pair(pair, "an object parameter's pair"))
        return ObjectValue(tuple(pairs))
    raise WireError("a parameter value is not a string, list or object")


def _params_in(value: Any, what: str) -> tuple[tuple[str, ParamValue], ...]:
    if type(value) is not list:
        raise WireError(f"{what} is not a list")
    if not value:
        return ()
    out = []
    for item in value:
        if not isinstance(item, list) or len(item) != 2 or not isinstance(item[0], str):
            raise WireError(f"{what} holds something that is not a (name, value) pair")
        out.append((item[0], _param_in(item[1])))
    return tuple(out)


def request_frame(kind: str, call_id: int, request: HostRequest) -> tuple[dict[str, Any], bytes]:
    """A `call` or `start` frame: a HostRequest's JSON fields and blob (engine side).

    The blob is the call's JSON `body` or its text or binary `payload` (never both: the
    sandbox refuses a call with the two), and `has_body`/`has_payload` say which."""
    header = {
        "t": kind,
        "id": call_id,
        "method": request.method,
        "path": request.path,
        "has_body": request.body is not None,
        "has_payload": request.payload is not None,
        "route": request.route,
        "values": list(request.values),
        "query": [[n, _param_out(v)] for n, v in request.query] if request.query else [],
        "headers": [[n, _param_out(v)] for n, v in request.headers] if request.headers else [],
        "media_type": request.media_type,
        "client": request.client,
    }
    if request.body is not None:
        return header, request.body
    return header, request.payload or b""


def request_from(d: dict[str, Any], blob: bytes) -> HostRequest:
    """A HostRequest from an engine process's frame: every field checked (broker side).

    Types are compared exactly (`type(x) is str`): JSON decodes to nothing else, and
    this runs on every host call."""
    get = d.get
    method, path, has_body = get("method"), get("path"), get("has_body")
    has_payload = get("has_payload")
    if type(method) is not str or type(path) is not str or type(has_body) is not bool:
        raise WireError("a call's method, path or has_body is not of its type")
    if type(has_payload) is not bool or (has_body and has_payload):
        raise WireError("a call's has_payload is not a boolean, or comes with has_body")
    if blob and not (has_body or has_payload):
        raise WireError("a body without has_body or has_payload")
    route, media_type, client = get("route"), get("media_type"), get("client")
    if (
        (route is not None and type(route) is not str)
        or (media_type is not None and type(media_type) is not str)
        or (client is not None and type(client) is not str)
    ):
        raise WireError("a call's route, media_type or client is not a string")
    values = get("values")
    if type(values) is not list or any(type(v) is not str for v in values):
        raise WireError("values is not a list of strings")
    return HostRequest(
        method=method,
        path=path,
        body=blob if has_body else None,
        route=route,
        values=tuple(values),
        query=_params_in(get("query"), "query"),
        headers=_params_in(get("headers"), "headers"),
        media_type=media_type,
        payload=blob if has_payload else None,
        client=client,
    )


def reply_frame(call_id: int, reply: HostReply) -> tuple[dict[str, Any], bytes]:
    """The `reply` frame to one call: its JSON fields and its body (broker side)."""
    header = {
        "t": "reply",
        "id": call_id,
        "status": int(reply.status),
        "content_type": reply.content_type,
        "headers": [list(h) for h in reply.headers] if reply.headers else [],
        "upstream": bool(reply.upstream),
    }
    return header, bytes(reply.body)


def reply_from(d: dict[str, Any], blob: bytes) -> HostReply:
    """A HostReply from the broker's `reply` frame, every field checked (engine side)."""
    get = d.get
    status, content_type, upstream = get("status"), get("content_type"), get("upstream")
    if type(status) is not int or type(content_type) is not str or type(upstream) is not bool:
        raise WireError("a reply's status, content_type or upstream is not of its type")
    headers = get("headers")
    if type(headers) is not list:
        raise WireError("reply headers are not a list")
    pairs = tuple(_pair(pair, "a reply header") for pair in headers) if headers else ()
    return HostReply(status, blob, content_type, pairs, upstream)


# -- runs --------------------------------------------------------------------------------


def grant_fields(grant: GuestGrant | tuple[GuestGrant, ...]) -> dict[str, Any]:
    """The guest's view of a grant: global name, allow list, preamble; never a key.
    Several grants (a run of several profiles) travel as `{"grants": [...]}`."""
    if isinstance(grant, tuple):
        return {"grants": [grant_fields(g) for g in grant]}
    return {
        "global_name": grant.global_name,
        "allow": [[r.method, r.path] for r in grant.allow],
        "preamble": grant.preamble,
    }


def grant_from(d: dict[str, Any]) -> GuestGrant | tuple[GuestGrant, ...]:
    if "grants" in d:
        many = d["grants"]
        if not isinstance(many, list) or not many or not all(isinstance(g, dict) for g in many):
            raise WireError("grants is not a list of grants")
        return tuple(_one_grant(g) for g in many)
    return _one_grant(d)


def _one_grant(d: dict[str, Any]) -> GuestGrant:
    allow = d.get("allow")
    if not isinstance(allow, list):
        raise WireError("allow is not a list")
    routes = []
    for entry in allow:
        method, path = _pair(entry, "an allow entry")
        routes.append(Route(path=path, method=method))
    return GuestGrant(
        global_name=_get(d, "global_name", str),
        allow=tuple(routes),
        preamble=_get(d, "preamble", str),
    )


def limits_fields(limits: Limits) -> dict[str, Any]:
    return {
        "timeout_s": limits.timeout_s,
        "memory_mb": limits.memory_mb,
        "output_bytes": limits.output_bytes,
        "max_host_calls": limits.max_host_calls,
        "clock": limits.clock,
    }


def limits_from(d: dict[str, Any]) -> Limits:
    clock = _get(d, "clock", str)
    return Limits(
        timeout_s=float(_get(d, "timeout_s", (int, float))),
        memory_mb=_get(d, "memory_mb", int),
        output_bytes=_get(d, "output_bytes", int),
        max_host_calls=_get(d, "max_host_calls", int),
        clock="fixed" if clock == "fixed" else "real",
    ).normalised()


def result_fields(result: RunResult) -> dict[str, Any]:
    return {
        "stdout": result.stdout,
        "stderr": result.stderr,
        "stdout_truncated": result.stdout_truncated,
        "stderr_truncated": result.stderr_truncated,
        "exit_code": result.exit_code,
        "timed_out": result.timed_out,
        "duration_s": result.duration_s,
        "refused_calls": result.refused_calls,
        "internal_error": result.internal_error,
    }


def result_from(d: dict[str, Any], *, output_bytes: int) -> RunResult:
    """A run's result as an engine process reports it, checked and bounded: the exit
    code is one byte's range (or the host's own codes), output no longer than the run's
    limit allows, counts not negative. Anything but an object is refused here, so a
    forged `done` ends the run as a protocol error with its audit line, never with an
    AttributeError out of the broker's loop."""
    if not isinstance(d, dict):
        raise WireError("the run's result is not an object")
    stdout, stderr = _get(d, "stdout", str), _get(d, "stderr", str)
    # The sandbox decodes each stream's capped bytes with errors="replace": at most one
    # character per byte.
    if len(stdout) > output_bytes or len(stderr) > output_bytes:
        raise WireError("the run's output is longer than its limit")
    exit_code = _get(d, "exit_code", int)
    refused = _get(d, "refused_calls", int)
    duration = float(_get(d, "duration_s", (int, float)))
    if not 0 <= exit_code <= 255 or not 0 <= refused < 1 << 31 or not 0 <= duration < 1e6:
        raise WireError("the run's exit code, count or duration is out of range")
    internal = _get(d, "internal_error", str)
    if len(internal) > 64 or (internal and not internal.replace("_", "").isalnum()):
        raise WireError("the run's internal_error is not a type name")
    return RunResult(
        stdout=stdout,
        stderr=stderr,
        stdout_truncated=_get(d, "stdout_truncated", bool),
        stderr_truncated=_get(d, "stderr_truncated", bool),
        exit_code=exit_code,
        timed_out=_get(d, "timed_out", bool),
        duration_s=duration,
        refused_calls=refused,
        internal_error=internal,
    )
