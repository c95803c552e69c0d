"""Run agent JavaScript in a fresh QuickJS-in-WebAssembly instance with one way out.

Each `run()` builds a new wasmtime Store and instance from the process's pre-linked
module, so nothing one run leaves behind is visible to the next, and evaluates one ES
module exactly as `qjs -e <source>` would (top-level await works), then drains the job
queue. The guest's only exit is `__coderunner_host_call(envelope)`, a native function
that blocks the guest while `handler` (the broker) answers; the sandbox itself knows
nothing about keys, grants or HTTP.

Limits are enforced by the host, never trusted to the guest: wall time by epoch
interruption (the ticker advances the epoch even while the guest is blocked in a host
call, and the handler can read the run's deadline through `host_call_deadline()`),
linear memory by the Store limiter, output by the capped WASI writer, the number of
host calls by a counter, and recursion depth by QuickJS's own stack check, re-enabled on
a relocated stack (see runtime/wasm_patch.py) so it ends in a catchable RangeError.

`max_host_calls` counts envelopes that reach the handler; refusals decided here (413,
400, 503) do not spend it, and a call beyond it answers 429 without reaching the
handler. Runs are independent and may execute in parallel threads; wasm runs on the
calling thread's stack when it has room for it (4 MiB; glibc's default is 8), and on a
helper thread with a big enough stack otherwise (runtime/thread_stack.py), since guest
recursion on a smaller stack would crash the whole process.
"""

from __future__ import annotations

import contextvars
import math
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import wasmtime

from runtime import envelope as envelope_mod
from runtime import guest, hostapi, qjs_vm, thread_stack, wasi
from runtime.engine import EPOCH_TICK_S, JS_STACK_ALLOWANCE, get_engine
from specgen import routes

DEFAULT_TIMEOUT_S, MAX_TIMEOUT_S = 5.0, 30.0
DEFAULT_MEMORY_MB, MAX_MEMORY_MB = 256, 4096
EXIT_OK, EXIT_ERROR, EXIT_TIMEOUT, EXIT_TRAP = 0, 1, 124, 134
#: The largest reply body the bridge hands to the guest (reference 5.3, 6.2).
MAX_REPLY_BYTES = 4 << 20
HOST_CALL_NAME = "__coderunner_host_call"
TEXT_BROKER_UNAVAILABLE = "host api broker unavailable\n"
TEXT_BUDGET_EXHAUSTED = "host api call budget for this run is exhausted\n"
TEXT_ENVELOPE_REQUIRED = "host api request envelope is required"
TEXT_INVALID_RESPONSE = "host api bridge returned an invalid response"
TEXT_NESTED = "host api calls nested too deeply"
#: Host calls that may be under way at once in one run. Only reading the envelope runs
#: guest code inside a host call (its toString), and that code may call the host again;
#: each level stacks Python, ctypes and wasmtime frames on the thread's native stack, so
#: unbounded nesting ended in a RecursionError escaping run() or a segfault.
MAX_HOST_CALL_NESTING = 8
REJECTION_PREFIX = b"Possibly unhandled promise rejection: "
#: Unhandled rejections whose promise and reason the host keeps for the end-of-run report.
#: Each costs host memory outside the guest's limit, so beyond this many only a count is
#: kept (a guest rejecting millions of promises grew the host by hundreds of MiB).
MAX_TRACKED_REJECTIONS = 1000
TEXT_UNTRACKED_REJECTION = b"(one of more than 1000 pending rejections; its reason was not kept)\n"

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


@dataclass(frozen=True)
class Limits:
    timeout_s: float = DEFAULT_TIMEOUT_S  # <= 0 -> default; capped at 30
    memory_mb: int = DEFAULT_MEMORY_MB
    output_bytes: int = 64 * 1024  # per stream
    max_host_calls: int = 1024
    clock: Literal["real", "fixed"] = "real"

    def normalised(self) -> Limits:
        timeout = self.timeout_s if self.timeout_s and self.timeout_s > 0 else DEFAULT_TIMEOUT_S
        memory = self.memory_mb if self.memory_mb and self.memory_mb > 0 else DEFAULT_MEMORY_MB
        return Limits(
            timeout_s=min(float(timeout), MAX_TIMEOUT_S),
            memory_mb=min(int(memory), MAX_MEMORY_MB),
            output_bytes=max(0, int(self.output_bytes)),
            max_host_calls=max(0, int(self.max_host_calls)),
            clock="fixed" if self.clock == "fixed" else "real",
        )


@dataclass(frozen=True)
class GuestGrant:
    """What the guest may see of a grant: never a key or base URL."""

    global_name: str = "host"
    allow: tuple[routes.Route, ...] = ()
    preamble: str = ""


@dataclass
class RunResult:
    stdout: str
    stderr: str
    stdout_truncated: bool
    stderr_truncated: bool
    exit_code: int
    timed_out: bool
    duration_s: float


class _Bridge:
    """Per-run host side of `__coderunner_host_call` and of the rejection tracker."""

    def __init__(
        self, handler: hostapi.HostHandler | None, limits: Limits, deadline: float
    ) -> None:
        self.handler = handler
        self.calls_left = limits.max_host_calls
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
            return 503, TEXT_BROKER_UNAVAILABLE.encode()
        if self.calls_left <= 0:
            return 429, TEXT_BUDGET_EXHAUSTED.encode()
        self.calls_left -= 1
        token = _DEADLINE.set(self.deadline)
        try:
            reply = self.handler(decoded.method, decoded.path, decoded.body)
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
    bridge: _Bridge = state.extra  # type: ignore[assignment]
    vm = bridge.vm
    assert vm is not None
    ctx, argc, argv = vals[0].i32 & 0xFFFFFFFF, vals[2].i32, vals[3].i32 & 0xFFFFFFFF
    if argc < 1:
        vals[0].i64 = qjs_vm.s64(_throw(vm, ctx, "Type", TEXT_ENVELOPE_REQUIRED))
        return
    if bridge.depth >= MAX_HOST_CALL_NESTING:
        vals[0].i64 = qjs_vm.s64(_throw(vm, ctx, "Range", TEXT_NESTED))
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
        vals[0].i64 = qjs_vm.s64(_throw(vm, ctx, "Internal", TEXT_INVALID_RESPONSE))
        return
    vals[0].i64 = qjs_vm.s64(_reply_object(vm, ctx, status, body))


def _rejection_tracker(state: wasi.WasiState, context, vals) -> None:
    """(ctx, promise, reason, is_handled, opaque): remember rejections nobody handled."""
    bridge: _Bridge = state.extra  # type: ignore[assignment]
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


_HOST_CALL_CB = wasi.guarded(_host_call)
_TRACKER_CB = wasi.guarded(_rejection_tracker)
_HOST_CALL_SIG = (("i32", "i64", "i32", "i32"), ("i64",))
_TRACKER_SIG = (("i32", "i64", "i64", "i32", "i32"), ())


class _Exit(Exception):
    def __init__(self, code: int) -> None:
        self.code = code


#: qjs's exit() flushes stdio; a run that simply ends must too, or a last line written
#: without "\n" (std.out.puts) would stay in wasi-libc's line buffer.
_FLUSH_SOURCE = b'import * as std from "qjs:std"; std.out.flush(); std.err.flush();'


def _flush_stdio(vm: qjs_vm.Vm, ctx: int) -> None:
    src = vm.alloc(_FLUSH_SOURCE)
    name = vm.alloc(b"<flush>")
    try:
        value = vm.call("JS_Eval", ctx, src, len(_FLUSH_SOURCE), name, qjs_vm.JS_EVAL_TYPE_MODULE)
        if qjs_vm.tag_of(value) != qjs_vm.TAG_EXCEPTION:
            value = vm.call("js_std_await", ctx, value)
        if qjs_vm.tag_of(value) == qjs_vm.TAG_EXCEPTION:
            vm.call("JS_FreeValue", ctx, vm.call("JS_GetException", ctx))
        else:
            vm.call("JS_FreeValue", ctx, value)
    finally:
        vm.free(name)
        vm.free(src)


def _check(vm: qjs_vm.Vm, ctx: int, value: int) -> None:
    """An exception value ends the run like qjs: error dumped to stderr, exit 1."""
    if qjs_vm.tag_of(value) == qjs_vm.TAG_EXCEPTION:
        vm.call("js_std_dump_error", ctx)
        raise _Exit(EXIT_ERROR)
    vm.call("JS_FreeValue", ctx, value)


def _evaluate(vm: qjs_vm.Vm, bridge: _Bridge, source: str) -> None:
    vm.call("_initialize")  # reactor ABI: C constructors before anything else
    if vm.call("qjs_init") != 0:
        raise qjs_vm.VmError("qjs_init failed")
    ctx = vm.call("qjs_get_context")
    rt = vm.call("JS_GetRuntime", ctx)
    vm.install_stack_limit(rt, JS_STACK_ALLOWANCE)

    name = vm.alloc(HOST_CALL_NAME.encode())
    fn_index = vm.add_function(_HOST_CALL_CB, *_HOST_CALL_SIG)
    fn = vm.call("JS_NewCFunction2", ctx, fn_index, name, 1, qjs_vm.JS_CFUNC_GENERIC, 0)
    vm.set_global(ctx, HOST_CALL_NAME, fn)
    vm.free(name)
    vm.call("JS_SetHostPromiseRejectionTracker", rt, vm.add_function(_TRACKER_CB, *_TRACKER_SIG), 0)

    src = source.encode("utf-8", errors="surrogatepass")
    src_ptr = vm.alloc(src)
    args = vm.call("JS_NewArray", ctx)
    for i, arg in enumerate((b"qjs", b"-e")):
        vm.call("JS_SetPropertyUint32", ctx, args, i, vm.new_string(ctx, arg))
    vm.call(
        "JS_SetPropertyUint32", ctx, args, 2, vm.call("JS_NewStringLen", ctx, src_ptr, len(src))
    )
    vm.set_global(ctx, "execArgv", args)
    vm.set_global(ctx, "argv0", vm.new_string(ctx, b"qjs"))

    try:
        _run_module(vm, bridge, ctx, src_ptr, len(src))
    except _Exit:
        _flush_stdio(vm, ctx)  # never after a trap: a trapped instance is not touched again
        raise
    _flush_stdio(vm, ctx)


def _run_module(vm: qjs_vm.Vm, bridge: _Bridge, ctx: int, src_ptr: int, src_len: int) -> None:
    """Evaluate like `qjs -e`, drain the job queue, report unhandled rejections."""
    state = vm.state
    filename = vm.alloc(b"<cmdline>")
    flags = qjs_vm.JS_EVAL_TYPE_MODULE | qjs_vm.JS_EVAL_FLAG_COMPILE_ONLY
    func = vm.call("JS_Eval", ctx, src_ptr, src_len, filename, flags)
    vm.free(src_ptr)
    if qjs_vm.tag_of(func) != qjs_vm.TAG_EXCEPTION:
        vm.call("js_module_set_import_meta", ctx, func, 0, 1)
        func = vm.call("JS_EvalFunction", ctx, func)
    _check(vm, ctx, vm.call("js_std_await", ctx, func))

    while True:
        r = vm.call("js_std_loop_once", ctx)
        r = r - (1 << 32) if r >= 1 << 31 else r
        if r == -2:
            vm.call("js_std_dump_error", ctx)
            raise _Exit(EXIT_ERROR)
        if r == -1:
            break
        if r > 0:
            state.sleep(r * 1_000_000)

    if bridge.rejections:
        for _promise, reason in bridge.rejections.values():
            state.emit(2, REJECTION_PREFIX)
            vm.call("JS_Throw", ctx, reason)
            vm.call("js_std_dump_error", ctx)
            break  # like qjs: the first unhandled rejection ends the run
        raise _Exit(EXIT_ERROR)
    if bridge.untracked_rejections:
        state.emit(2, REJECTION_PREFIX + TEXT_UNTRACKED_REJECTION)
        raise _Exit(EXIT_ERROR)


def _trap_text(trap: wasmtime.Trap) -> str:
    """wasmtime's cause line ("wasm trap: call stack exhausted") without the backtrace."""
    lines = [ln.strip() for ln in (trap.message or "").splitlines() if ln.strip()]
    for line in reversed(lines):
        if line.startswith("wasm trap:"):
            return line.removeprefix("wasm trap:").strip()
    return lines[0] if lines else "trap"


def run(
    code: str,
    *,
    grant: GuestGrant | None = None,
    handler: hostapi.HostHandler | None = None,
    limits: Limits = Limits(),  # frozen dataclass: safe as a default
    memory_probe: Callable[[bytes], None] | None = None,
) -> RunResult:
    """Evaluate `code` in a fresh sandbox; see the module docstring for the guarantees.

    `memory_probe`, when given, receives a copy of the guest's whole linear memory at the
    end of the run (a test hook for key-confinement checks; costs a copy of the memory).
    """
    return thread_stack.call_with_enough_stack(
        lambda: _run(code, grant=grant, handler=handler, limits=limits, memory_probe=memory_probe)
    )


def _run(
    code: str,
    *,
    grant: GuestGrant | None,
    handler: hostapi.HostHandler | None,
    limits: Limits,
    memory_probe: Callable[[bytes], None] | None,
) -> RunResult:
    limits = limits.normalised()
    eng = get_engine()
    if grant is None:
        source = guest.compose_source(code, global_name=None)
    else:
        source = guest.compose_source(
            code, global_name=grant.global_name, allow=tuple(grant.allow), preamble=grant.preamble
        )
    state = wasi.WasiState(output_bytes=limits.output_bytes, clock=limits.clock)
    start = time.monotonic()
    deadline = start + limits.timeout_s
    bridge = _Bridge(handler, limits, deadline)
    state.extra = bridge
    exit_code, timed_out = EXIT_OK, False
    vm: qjs_vm.Vm | None = None
    with eng.ticker.active():
        try:
            vm = qjs_vm.Vm(
                eng,
                state,
                memory_bytes=limits.memory_mb << 20,
                deadline_ticks=math.ceil(limits.timeout_s / EPOCH_TICK_S) + 1,
            )
            bridge.vm = vm
            _evaluate(vm, bridge, source)
        except _Exit as done:
            exit_code = done.code
        except wasi.ProcExit as done:
            exit_code = done.code & 0xFF
        except wasmtime.Trap as trap:
            if trap.trap_code == wasmtime.TrapCode.INTERRUPT:
                exit_code, timed_out = EXIT_TIMEOUT, True
            else:
                exit_code = EXIT_TRAP
                if not state.out[2]:
                    state.emit(2, f"guest aborted: wasm error: {_trap_text(trap)}\n".encode())
        except (wasmtime.WasmtimeError, MemoryError, wasi.GuestMemoryError) as exc:
            exit_code = EXIT_TRAP
            if not state.out[2]:
                state.emit(
                    2,
                    f"guest aborted: wasm error: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}\n".encode(),
                )
        finally:
            if vm is not None:
                if memory_probe is not None:
                    memory_probe(state.snapshot(vm.context))
                vm.close()
            bridge.vm = None
            state.extra = None
    return RunResult(
        stdout=state.out[1].decode("utf-8", errors="replace"),
        stderr=state.out[2].decode("utf-8", errors="replace"),
        stdout_truncated=state.truncated[1],
        stderr_truncated=state.truncated[2],
        exit_code=exit_code,
        timed_out=timed_out,
        duration_s=time.monotonic() - start,
    )


__all__ = ["GuestGrant", "Limits", "RunResult", "host_call_deadline", "run"]
