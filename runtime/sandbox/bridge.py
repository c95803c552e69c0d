"""The host side of the guest's one exit: one envelope in, one `{status, body, type}` out
(and `headers`, a JSON string of the response headers the broker let through, when the
upstream API answered).

Two native functions share it. `__coderunner_host_call(envelope)` is the reference's
blocking call: it returns the reply while the guest waits. `__coderunner_host_start
(envelope)` returns a promise of the same reply at once, so calls the guest makes before
it awaits are in flight together (the injected client's methods use it). Both read the
envelope string out of guest memory (bounded before any copy) and decode it
(`envelope.py`) synchronously, so the envelope's toString and the sandbox's own refusals
(no handler, its host-call budget, nesting) behave the same for both. A started call is
then handed to the handler's `start` (or, for a plain handler, the handler itself) and
the slow part runs on one of the run's worker threads, at most MAX_CONCURRENT_CALLS at
once; more wait their turn in the pool's queue (a lone call the guest is idly waiting
for is answered on the guest's thread instead: see `dispatch`). The run loop
(`runner.py`) waits for the first reply to arrive and settles its promise in the guest
(`settle`). Nothing a
handler raises or returns can crash the host or reach the guest as anything but a
status and at most 4 MiB of bytes.

Bodies by kind (`specgen/media.py`): a call's text or binary body is the native
function's second argument (a string or a Uint8Array), copied out of guest memory once
and bounded before the copy; a reply whose type is binary (or that has no type and is
not UTF-8) reaches the guest as a Uint8Array of exactly its bytes, any other as a string,
with `type` the reply's media type (lower-case, no parameters; "" when it had none).

It also keeps the rejection tracker's state: unhandled promise rejections are held here
until the run ends, bounded so a guest cannot grow host memory without limit.
"""

from __future__ import annotations

import contextvars
import functools
import math
import queue
import re
import struct
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import orjson

from runtime.contract import MAX_REQUEST_BODY_BYTES, HostHandler, HostReply, HostRequest
from runtime.messages import (
    MSG_BROKER_UNAVAILABLE,
    MSG_BUDGET,
    MSG_ENVELOPE_REQUIRED,
    MSG_INVALID_RESPONSE,
    MSG_NESTED,
    MSG_TOO_MANY_PENDING,
)
from runtime.run_clock import RunClock
from runtime.sandbox import envelope as envelope_mod
from runtime.sandbox import vm as qjs_vm
from runtime.sandbox import wasi
from runtime.sandbox.engine import EPOCH_TICK_S
from runtime.sandbox.terms import MAX_PENDING_CALLS
from specgen import media

#: The largest reply body the bridge hands to the guest: the reference's limit.
MAX_REPLY_BYTES = 4 << 20
HOST_CALL_NAME = "__coderunner_host_call"
HOST_START_NAME = "__coderunner_host_start"
#: Started host calls one run has on their way at once (its worker threads). The same
#: number as the broker's in-flight limit; calls beyond it wait in the pool's queue.
MAX_CONCURRENT_CALLS = 16
#: Host calls that may be under way at once in one run. Only reading the envelope runs
#: guest code inside a host call (its toString), and that code may call the host again;
#: each level stacks Python, ctypes and wasmtime frames on the thread's native stack, so
#: unbounded nesting ended in a RecursionError escaping run() or a segfault.
MAX_HOST_CALL_NESTING = 8
#: Unhandled rejections whose promise and reason the host keeps for the end-of-run report.
#: Each costs host memory outside the guest's limit, so beyond this many only a count is
#: kept (a guest rejecting millions of promises grew the host by hundreds of MiB).
MAX_TRACKED_REJECTIONS = 1000

_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "plimsoll_host_call_deadline", default=None
)


def host_call_deadline() -> float | None:
    """`time.monotonic()` value at which the current run ends, for a handler to honour.

    Set only while a handler runs inside a sandbox host call; the broker should cap its
    upstream timeout at `deadline - time.monotonic()`. Epoch interruption ends the guest
    as soon as the handler returns after the deadline, but cannot preempt Python code.
    """
    return _DEADLINE.get()


_BROKEN = HostReply(500, b"")
#: Most bytes of the `headers` JSON one reply hands the guest (the broker sends far less).
MAX_REPLY_HEADER_BYTES = 64 * 1024
#: A call's text or binary body as the bridge read it: its bytes, None for none, or the
#: refusal it earned while being read (too large, not a string or a Uint8Array).
_Payload = bytes | HostReply | None
#: A string's tags in QuickJS-NG's NaN boxing (a flat string and a rope).
_STRING_TAGS = frozenset({-7, -6})


def _refusal(status: int, text: str) -> HostReply:
    """The sandbox's own refusal: fixed text, typed as such."""
    return HostReply(status, text.encode(), "text/plain; charset=utf-8")


def _checked(work: Callable[[], HostReply], deadline: float) -> HostReply:
    """Run a handler's work; its reply, plain values only, or 500 for anything broken.

    Headers are kept only on an upstream answer, and checked here (`_headers_json`), so a
    handler's malformed pairs are a broken reply, never guessed at."""
    token = _DEADLINE.set(deadline)
    try:
        reply = work()
        status, body = int(reply.status), bytes(reply.body)
        content_type = reply.content_type
        if not isinstance(content_type, str):
            return _BROKEN
        upstream = reply.upstream is True
        headers = tuple(reply.headers) if upstream else ()
        if upstream:
            _headers_json(headers)
    except Exception:  # a broken handler must not crash the host or leak detail
        return _BROKEN
    finally:
        _DEADLINE.reset(token)
    if len(body) > MAX_REPLY_BYTES:
        return _BROKEN
    return HostReply(status, body, content_type, headers, upstream)


def _headers_json(headers: tuple[tuple[str, str], ...]) -> bytes:
    """The reply's headers as one JSON object of lower-case name -> value (UTF-8).

    Handed to the guest as one string property, so a call costs one string more, not
    one property per header; the client parses it only for the `$response` form. A
    handler's malformed pairs are a broken reply (ValueError), never guessed at.
    """
    out: dict[str, str] = {}
    for name, value in headers:
        if not isinstance(name, str) or not isinstance(value, str) or name != name.lower():
            raise ValueError("reply headers are (lower-case name, value) strings")
        out[name] = value
    text = orjson.dumps(out)  # a tenth of json.dumps's cost, paid on every answered call
    if len(text) > MAX_REPLY_HEADER_BYTES:
        raise ValueError("reply headers too large")
    return text


class Bridge:
    """Per-run host side of the host calls, started calls, and the rejection tracker."""

    def __init__(
        self,
        handler: HostHandler | None,
        max_host_calls: int,
        deadline: float,
        clock: RunClock | None = None,
    ) -> None:
        self.handler = handler
        self.calls_left = max_host_calls
        self._deadline = deadline
        #: The run's clock when calls may be held for approval: its deadline moves while
        #: a person is asked, and the guest's epoch deadline is moved with it.
        self._clock = clock
        self._held_seen = 0.0
        self.vm: qjs_vm.Vm | None = None
        self.depth = 0
        self.rejections: dict[int, tuple[int, int]] = {}
        self.untracked_rejections = 0
        #: Started calls whose promise is not settled yet: id -> (resolve, reject).
        self.pending: dict[int, tuple[int, int]] = {}
        self._replies: queue.SimpleQueue[tuple[int, HostReply]] = queue.SimpleQueue()
        self._pool: ThreadPoolExecutor | None = None
        #: Started calls not yet handed to a worker (see `dispatch`).
        self._unsent: list[tuple[int, Callable[[], HostReply]]] = []
        self._next_id = 0
        #: Calls refused here, before any handler saw them; the audit counts them denied.
        self.refused = 0

    @property
    def deadline(self) -> float:
        """The run's end on the monotonic clock (later by the time calls were held)."""
        return self._deadline if self._clock is None else self._clock.deadline()

    def catch_up(self) -> None:
        """Move the guest Store's epoch deadline by the time calls were held since the
        last look, so a run resumes after a person answered instead of trapping at once.

        Called only where the guest is not running (after a blocking call returns, after
        the host waited for replies), so guest code that computes while a call is held
        still meets its epoch deadline; once it waits, the deadline moves by the whole
        time held, so overlapping work can gain at most that (each hold is bounded).
        """
        if self._clock is None or self.vm is None:
            return
        held = self._clock.held_s
        if held <= self._held_seen:
            return
        self._held_seen = held
        left = max(0.0, self._clock.deadline() - time.monotonic())
        self.vm.store.set_epoch_deadline(max(1, math.ceil(left / EPOCH_TICK_S) + 1))

    def _refused(self, raw: bytes, payload: _Payload = None) -> HostReply | HostRequest:
        """The sandbox's own refusal of an envelope (or of the body beside it, already
        refused as it was read), or the request to hand on.

        Spends one of the run's host calls when the request goes on to the handler.
        """
        if isinstance(payload, HostReply):
            self.refused += 1
            return payload
        decoded = envelope_mod.decode(raw, payload)
        if isinstance(decoded, envelope_mod.EnvelopeRefusal):
            self.refused += 1
            return _refusal(decoded.status, decoded.text)
        if self.handler is None:
            self.refused += 1
            return _refusal(503, MSG_BROKER_UNAVAILABLE + "\n")
        if self.calls_left <= 0:
            self.refused += 1
            return _refusal(429, MSG_BUDGET + "\n")
        self.calls_left -= 1
        return decoded

    def answer(self, raw: bytes, payload: _Payload = None) -> HostReply:
        """The reply to one envelope; never raises for guest-controlled input."""
        decided = self._refused(raw, payload)
        if isinstance(decided, HostReply):
            return decided
        assert self.handler is not None
        reply = _checked(functools.partial(self.handler, decided), self.deadline)
        self.catch_up()
        return reply

    # -- started calls ------------------------------------------------------------------

    def begin(self, call_id: int, raw: bytes, payload: _Payload = None) -> None:
        """Start one call; its reply arrives on the queue `next_reply` reads.

        The handler's `start` decides the call here, on the guest's thread and in the
        guest's order; only what it returns (the upstream exchange) runs on a worker.
        """
        decided = self._refused(raw, payload)
        if isinstance(decided, HostReply):
            self._replies.put((call_id, decided))
            return
        handler = self.handler
        starter = getattr(handler, "start", None)
        if starter is not None:
            begun = _checked_start(starter, decided, self.deadline)
            if isinstance(begun, HostReply):
                self._replies.put((call_id, begun))
                return
            work = begun
        else:
            assert handler is not None
            work = functools.partial(handler, decided)
        self._unsent.append((call_id, work))

    def dispatch(self, *, guest_idle: bool) -> None:
        """Send the calls started since the guest last yielded to the loop.

        A guest idle with one call outstanding and nothing else to run (a `for ...
        await` loop) has it answered here, on its own thread, as a blocking call would
        be: a worker thread would add a hand-off per call and overlap nothing. Any other
        batch goes to the workers, to be in flight together.
        """
        if not self._unsent:
            return
        if guest_idle and len(self._unsent) == 1 and len(self.pending) == 1:
            ((call_id, work),) = self._unsent
            self._unsent.clear()
            self._work(call_id, work)
            return
        if self._pool is None:
            self._pool = ThreadPoolExecutor(
                MAX_CONCURRENT_CALLS, thread_name_prefix="plimsoll-host-call"
            )
        for call_id, work in self._unsent:
            self._pool.submit(self._work, call_id, work)
        self._unsent.clear()

    def _work(self, call_id: int, work: Callable[[], HostReply]) -> None:
        self._replies.put((call_id, _checked(work, self.deadline)))

    def new_id(self) -> int:
        self._next_id += 1
        return self._next_id

    def next_reply(self, timeout_s: float | None) -> tuple[int, HostReply] | None:
        """The next reply to settle: waits up to `timeout_s` (None: only one already here)."""
        try:
            if timeout_s is None:
                return self._replies.get_nowait()
            return self._replies.get(timeout=max(0.0, timeout_s))
        except queue.Empty:
            return None

    def close(self) -> None:
        """The run is over: drop started calls not yet begun; running ones are the
        handler's to end (the broker cancels them when the session closes)."""
        self._unsent.clear()
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)


def _checked_start(
    starter: Callable[[HostRequest], Callable[[], HostReply]],
    request: HostRequest,
    deadline: float,
) -> Callable[[], HostReply] | HostReply:
    token = _DEADLINE.set(deadline)
    try:
        work = starter(request)
    except Exception:  # as for a blocking call: no crash, no detail
        return _BROKEN
    finally:
        _DEADLINE.reset(token)
    if not callable(work):
        return _BROKEN
    return work


def _throw(vm: qjs_vm.Vm, ctx: int, kind: str, message: str) -> int:
    """JS_Throw<kind>Error(ctx, "%s", message); returns JS_EXCEPTION."""
    msg = vm.alloc(message.encode())
    fmt = vm.alloc(b"%s")
    va = vm.alloc(struct.pack("<I", msg), nul=False)
    try:
        return vm.call(f"JS_Throw{kind}Error", ctx, fmt, va)
    finally:
        for p in (va, fmt, msg):
            vm.free(p)


def _well_formed(body: bytes) -> bytes:
    """The reply's bytes as UTF-8 the guest's string can hold as the standard decodes it.

    JS_NewStringLen does not: an encoded surrogate (ED A0 80, which UTF-8 forbids)
    became a lone surrogate in the guest's string, and a truncated sequence one U+FFFD
    per byte. The Unicode standard's practice, which TextDecoder and `Response.text()`
    follow, is one U+FFFD per maximal ill-formed subpart; Python's "replace" does the
    same. Valid UTF-8 (nearly every reply) is passed on as it is.
    """
    if body.isascii():
        return body
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        return body.decode("utf-8", "replace").encode("utf-8")
    return body


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _usv_bytes(text: bytes) -> bytes:
    """A guest string's bytes as UTF-8, each lone surrogate one U+FFFD.

    JS_ToCStringLen2 writes a lone surrogate as its own three bytes (ED A0 80), which
    UTF-8 forbids, so a text body holding one went upstream as bytes no decoder accepts.
    A string becomes a body as `fetch` and TextEncoder make it (the standard's USVString
    conversion): a lone surrogate is U+FFFD, the same three-byte length. Valid UTF-8
    (nearly every body) is passed on as it is.
    """
    if text.isascii():
        return text
    try:
        text.decode("utf-8")
    except UnicodeDecodeError:
        decoded = text.decode("utf-8", "surrogatepass")
        return _LONE_SURROGATE.sub("\ufffd", decoded).encode("utf-8")
    return text


def _is_binary(content_type: str, body: bytes) -> bool:
    """Is this reply body bytes for the guest (a Uint8Array), not text?"""
    if content_type.strip():
        return media.kind(content_type) == "binary"
    try:  # no type at all: text when it reads as UTF-8, as the guest got it before
        body.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


def _reply_object(vm: qjs_vm.Vm, ctx: int, reply: HostReply) -> int:
    """A plain `{status, body}` with a non-enumerable `type` (the reply's media type),
    plus a non-enumerable `headers` (a JSON string) when the upstream answered, made by
    the glue's `plimsoll_reply` (host_glue.c) from one buffer: the body's bytes, the
    type's, the headers'. A reply the broker or the sandbox made itself has no
    `headers`: that absence is how the client tells a refusal from an answer. Returns
    the pending exception when the guest's memory runs out."""
    binary = _is_binary(reply.content_type, reply.body)
    body = reply.body if binary else _well_formed(reply.body)
    kind = media.essence(reply.content_type).encode("ascii", "replace")
    names = _headers_json(reply.headers) if reply.upstream else b""
    text = body + kind + names
    headers_len = len(names) if reply.upstream else -1
    if len(text) <= qjs_vm.SCRATCH["string"]:
        ptr = vm.scratch("string")
        vm.write(ptr, text)
        return vm.call(
            "plimsoll_reply", ctx, reply.status, ptr, len(body), binary, len(kind), headers_len
        )
    ptr = vm.alloc(text, nul=False)
    try:
        return vm.call(
            "plimsoll_reply", ctx, reply.status, ptr, len(body), binary, len(kind), headers_len
        )
    finally:
        vm.free(ptr)


def prepare_constants(vm: qjs_vm.Vm) -> None:
    """Allocate every constant and scratch buffer a host call uses (an image takes them
    along, so a restored run never mallocs them)."""
    for key in qjs_vm.SCRATCH:
        vm.scratch(key)


def _host_call(state: wasi.WasiState, context, vals) -> None:
    """Native `__coderunner_host_call(envelope)`: (ctx, this, argc, argv) -> JSValue."""
    bridge: Bridge = state.extra  # type: ignore[assignment]
    vm = bridge.vm
    assert vm is not None
    ctx, argc, argv = vals[0].i32 & 0xFFFFFFFF, vals[2].i32, vals[3].i32 & 0xFFFFFFFF
    raw = _read_envelope(bridge, vm, ctx, argc, argv)
    if isinstance(raw, int):
        vals[0].i64 = qjs_vm.s64(raw)
        return
    reply = bridge.answer(raw, _read_payload(vm, ctx, argc, argv))
    if not 100 <= reply.status <= 599:
        vals[0].i64 = qjs_vm.s64(_throw(vm, ctx, "Internal", MSG_INVALID_RESPONSE))
        return
    vals[0].i64 = qjs_vm.s64(_reply_object(vm, ctx, reply))


def _read_envelope(bridge: Bridge, vm: qjs_vm.Vm, ctx: int, argc: int, argv: int) -> bytes | int:
    """The envelope's bytes, or the JSValue (an exception) the native function returns."""
    if argc < 1:
        return _throw(vm, ctx, "Type", MSG_ENVELOPE_REQUIRED)
    if bridge.depth >= MAX_HOST_CALL_NESTING:
        return _throw(vm, ctx, "Range", MSG_NESTED)
    (arg,) = struct.unpack("<q", vm.read(argv, 8))
    bridge.depth += 1
    try:
        raw = vm.to_bytes(ctx, arg, limit=envelope_mod.MAX_ENVELOPE_BYTES)
    finally:
        bridge.depth -= 1
    if raw is None:  # ToString threw: let that exception propagate to the guest
        return qjs_vm.JS_EXCEPTION
    return raw


_PAYLOAD_INVALID = _refusal(envelope_mod.STATUS_INVALID, envelope_mod.TEXT_INVALID)
_PAYLOAD_TOO_LARGE = _refusal(envelope_mod.STATUS_TOO_LARGE, envelope_mod.TEXT_BODY_TOO_LARGE)


def _read_payload(vm: qjs_vm.Vm, ctx: int, argc: int, argv: int) -> _Payload:
    """The call's second argument, a text or binary body: a string's UTF-8 bytes (a lone
    surrogate as U+FFFD, `_usv_bytes`) or a Uint8Array's bytes, None when absent (or undefined), else the refusal to answer with.

    Runs no guest code (no ToString, no getter), and the size is known before the one
    copy out of guest memory, so an over-cap body is refused without being copied.
    """
    if argc < 2:
        return None
    (arg,) = struct.unpack("<q", vm.read(argv + 8, 8))
    tag = qjs_vm.tag_of(arg)
    if tag == qjs_vm.TAG_UNDEFINED:
        return None
    size_out = vm.scratch("to_bytes length")
    if tag in _STRING_TAGS:
        ptr = vm.call("JS_ToCStringLen2", ctx, size_out, arg, 0)
        if ptr == 0:  # out of memory: the exception is dropped, the call refused
            vm.call("JS_FreeValue", ctx, vm.call("JS_GetException", ctx))
            return _PAYLOAD_INVALID
        try:
            size = vm.u32(size_out)
            if size > MAX_REQUEST_BODY_BYTES:
                return _PAYLOAD_TOO_LARGE
            return _usv_bytes(vm.read(ptr, size))
        finally:
            vm.call("JS_FreeCString", ctx, ptr)
    if tag != qjs_vm.TAG_OBJECT:
        return _PAYLOAD_INVALID
    # The glue's, not JS_GetUint8Array: that one's count is stale for a view that tracks
    # a resizable buffer, and read past the buffer's end after it shrank (host_glue.c).
    ptr = vm.call("plimsoll_uint8_bytes", ctx, size_out, arg)
    if ptr == 0:  # not a Uint8Array, or its buffer is detached: a TypeError is pending
        vm.call("JS_FreeValue", ctx, vm.call("JS_GetException", ctx))
        return _PAYLOAD_INVALID
    size = vm.u32(size_out)
    return _PAYLOAD_TOO_LARGE if size > MAX_REQUEST_BODY_BYTES else vm.read(ptr, size)


def _host_start(state: wasi.WasiState, context, vals) -> None:
    """Native `__coderunner_host_start(envelope)`: a promise of `{status, body}`."""
    bridge: Bridge = state.extra  # type: ignore[assignment]
    vm = bridge.vm
    assert vm is not None
    ctx, argc, argv = vals[0].i32 & 0xFFFFFFFF, vals[2].i32, vals[3].i32 & 0xFFFFFFFF
    if len(bridge.pending) >= MAX_PENDING_CALLS:
        vals[0].i64 = qjs_vm.s64(_throw(vm, ctx, "Range", MSG_TOO_MANY_PENDING))
        return
    raw = _read_envelope(bridge, vm, ctx, argc, argv)
    if isinstance(raw, int):
        vals[0].i64 = qjs_vm.s64(raw)
        return
    payload = _read_payload(vm, ctx, argc, argv)
    funcs = vm.scratch("promise functions")  # runs no guest code
    promise = vm.call("JS_NewPromiseCapability", ctx, funcs)
    if qjs_vm.tag_of(promise) != qjs_vm.TAG_EXCEPTION:
        resolve, reject = struct.unpack("<qq", vm.read(funcs, 16))
    if qjs_vm.tag_of(promise) == qjs_vm.TAG_EXCEPTION:
        vals[0].i64 = qjs_vm.s64(promise)
        return
    call_id = bridge.new_id()
    bridge.pending[call_id] = (resolve, reject)
    bridge.begin(call_id, raw, payload)
    vals[0].i64 = qjs_vm.s64(promise)


def settle(bridge: Bridge, vm: qjs_vm.Vm, ctx: int, settled: tuple[int, HostReply]) -> None:
    """Resolve a started call's promise with `{status, body, type}` (reject: invalid
    status).

    Only queues the promise's reactions; the guest's code runs when the loop runs jobs.
    """
    call_id, reply = settled
    funcs = bridge.pending.pop(call_id, None)
    if funcs is None:
        return
    resolve, reject = funcs
    if 100 <= reply.status <= 599:
        value = _reply_object(vm, ctx, reply)
    else:
        value = _throw(vm, ctx, "Internal", MSG_INVALID_RESPONSE)
    if qjs_vm.tag_of(value) == qjs_vm.TAG_EXCEPTION:  # an invalid status, or out of memory
        value = vm.call("JS_GetException", ctx)
        vm.call("plimsoll_settle", ctx, reject, resolve, value)
    else:
        vm.call("plimsoll_settle", ctx, resolve, reject, value)


def _rejection_tracker(state: wasi.WasiState, context, vals) -> None:
    """(ctx, promise, reason, is_handled, opaque): remember rejections nobody handled."""
    bridge: Bridge = state.extra  # type: ignore[assignment]
    vm = bridge.vm
    assert vm is not None
    ctx, promise, reason, handled = vals[0].i32 & 0xFFFFFFFF, vals[1].i64, vals[2].i64, vals[3].i32
    key = promise & 0xFFFFFFFF
    if handled:
        held = bridge.rejections.pop(key, None)
        if held is not None:
            vm.call("JS_FreeValue", ctx, held[0])
            vm.call("JS_FreeValue", ctx, held[1])
        elif bridge.untracked_rejections:
            bridge.untracked_rejections -= 1  # only untracked ones are reported handled
    elif key in bridge.rejections:
        pass
    elif len(bridge.rejections) >= MAX_TRACKED_REJECTIONS:
        bridge.untracked_rejections += 1
    else:
        bridge.rejections[key] = (
            vm.call("JS_DupValue", ctx, promise),
            vm.call("JS_DupValue", ctx, reason),
        )


HOST_CALL_CALLBACK = wasi.guarded(_host_call)
HOST_START_CALLBACK = wasi.guarded(_host_start)
TRACKER_CALLBACK = wasi.guarded(_rejection_tracker)
HOST_CALL_SIGNATURE = (("i32", "i64", "i32", "i32"), ("i64",))
TRACKER_SIGNATURE = (("i32", "i64", "i64", "i32", "i32"), ())
