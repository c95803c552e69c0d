"""The host side of `__coderunner_host_call`: one envelope in, one `{status, body}` out.

The guest's only exit. The native function reads the envelope string out of guest memory
(bounded before any copy), decodes it (`envelope.py`), refuses what the sandbox itself
refuses (no handler, its own host-call budget), and otherwise hands a `HostRequest` to the
run's `HostHandler` while the guest is blocked. Nothing a handler raises or returns can
crash the host or reach the guest as anything but a status and at most 4 MiB of bytes.
It also keeps the rejection tracker's state: unhandled promise rejections are held here
until the run ends, bounded so a guest cannot grow host memory without limit.
"""

from __future__ import annotations

import contextvars
import struct

from runtime.contract import HostHandler
from runtime.messages import (
    MSG_BROKER_UNAVAILABLE,
    MSG_BUDGET,
    MSG_ENVELOPE_REQUIRED,
    MSG_INVALID_RESPONSE,
    MSG_NESTED,
)
from runtime.sandbox import envelope as envelope_mod
from runtime.sandbox import vm as qjs_vm
from runtime.sandbox import wasi

#: The largest reply body the bridge hands to the guest (reference 5.3, 6.2).
MAX_REPLY_BYTES = 4 << 20
HOST_CALL_NAME = "__coderunner_host_call"
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


class Bridge:
    """Per-run host side of `__coderunner_host_call` and of the rejection tracker."""

    def __init__(self, handler: HostHandler | None, max_host_calls: int, deadline: float) -> None:
        self.handler = handler
        self.calls_left = max_host_calls
        self.deadline = deadline
        self.vm: qjs_vm.Vm | None = None
        self.depth = 0
        self.rejections: dict[int, tuple[int, int]] = {}
        self.untracked_rejections = 0

    def answer(self, raw: bytes) -> tuple[int, bytes]:
        """Status and body for one envelope; never raises for guest-controlled input."""
        decoded = envelope_mod.decode(raw)
        if isinstance(decoded, envelope_mod.EnvelopeRefusal):
            return decoded.status, decoded.text.encode()
        if self.handler is None:
            return 503, (MSG_BROKER_UNAVAILABLE + "\n").encode()
        if self.calls_left <= 0:
            return 429, (MSG_BUDGET + "\n").encode()
        self.calls_left -= 1
        token = _DEADLINE.set(self.deadline)
        try:
            reply = self.handler(decoded)
            status, body = int(reply.status), bytes(reply.body)
        except Exception:  # a broken handler must not crash the host or leak detail
            return 500, b""
        finally:
            _DEADLINE.reset(token)
        if len(body) > MAX_REPLY_BYTES:
            return 500, b""
        return status, body


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


def _reply_object(vm: qjs_vm.Vm, ctx: int, status: int, body: bytes) -> int:
    """A plain `{status, body}`; properties are defined, not assigned, so a setter the
    guest put on Object.prototype can neither intercept nor hide them."""
    obj = vm.call("JS_NewObject", ctx)
    if qjs_vm.tag_of(obj) == qjs_vm.TAG_EXCEPTION:
        return obj
    keys = vm.alloc(b"status\0body", nul=True)
    try:
        define = "JS_DefinePropertyValueStr"
        vm.call(define, ctx, obj, keys, qjs_vm.js_int(status), qjs_vm.JS_PROP_C_W_E)
        vm.call(define, ctx, obj, keys + 7, vm.new_string(ctx, body), qjs_vm.JS_PROP_C_W_E)
    finally:
        vm.free(keys)
    return obj


def _host_call(state: wasi.WasiState, context, vals) -> None:
    """Native `__coderunner_host_call(envelope)`: (ctx, this, argc, argv) -> JSValue."""
    bridge: Bridge = state.extra  # type: ignore[assignment]
    vm = bridge.vm
    assert vm is not None
    ctx, argc, argv = vals[0].i32 & 0xFFFFFFFF, vals[2].i32, vals[3].i32 & 0xFFFFFFFF
    if argc < 1:
        vals[0].i64 = qjs_vm.s64(_throw(vm, ctx, "Type", MSG_ENVELOPE_REQUIRED))
        return
    if bridge.depth >= MAX_HOST_CALL_NESTING:
        vals[0].i64 = qjs_vm.s64(_throw(vm, ctx, "Range", MSG_NESTED))
        return
    (arg,) = struct.unpack("<q", vm.read(argv, 8))
    bridge.depth += 1
    try:
        raw = vm.to_bytes(ctx, arg, limit=envelope_mod.MAX_ENVELOPE_BYTES)
    finally:
        bridge.depth -= 1
    if raw is None:  # ToString threw: let that exception propagate to the guest
        vals[0].i64 = qjs_vm.s64(qjs_vm.JS_EXCEPTION)
        return
    status, body = bridge.answer(raw)
    if not 100 <= status <= 599:
        vals[0].i64 = qjs_vm.s64(_throw(vm, ctx, "Internal", MSG_INVALID_RESPONSE))
        return
    vals[0].i64 = qjs_vm.s64(_reply_object(vm, ctx, status, body))


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
TRACKER_CALLBACK = wasi.guarded(_rejection_tracker)
HOST_CALL_SIGNATURE = (("i32", "i64", "i32", "i32"), ("i64",))
TRACKER_SIGNATURE = (("i32", "i64", "i64", "i32", "i32"), ())
