"""Run agent JavaScript in a fresh QuickJS-in-WebAssembly instance with one way out.

Each `run()` builds a new wasmtime Store and instance from the process's pre-linked
module, so nothing one run leaves behind is visible to the next, and evaluates one ES
module exactly as `qjs -e <source>` would (top-level await works), then drains the job
queue. The guest's only exit is the host call (runtime/sandbox/bridge.py): either
`__coderunner_host_call(envelope)`, which blocks the guest while `handler` (the broker)
answers, or `__coderunner_host_start(envelope)`, which returns a promise at once so
that calls made before the guest awaits are in flight together. The sandbox itself
knows nothing about keys, grants or HTTP.

The host drives the guest's event loop (`_step`): it runs the guest's jobs and due
timers, settles the promises of calls whose replies have arrived, and, while calls are
still in flight, waits for the next reply (no longer than the next timer or the run's
deadline). Sleeps never block: with nothing in flight, a pending timer moves the
guest's clock forward (runtime/sandbox/wasi.py), so `await sleep(100)` costs nothing;
with calls in flight, a timer fires when the guest's clock reaches it, so a call is
never overtaken by a timer the clock has not reached.

Limits are enforced by the host, never trusted to the guest: wall time by epoch
interruption (the ticker advances the epoch even while the guest is blocked in a host
call, and the handler can read the run's deadline through `host_call_deadline()`),
linear memory by the Store limiter, output by the capped WASI writer, the number of
host calls by a counter (a started call counts when it starts, in flight or not), and
recursion depth by QuickJS's own stack check, set on a stack at the bottom of memory (see
runtime/sandbox/wasm_layout.py) so it ends in a catchable RangeError.

`max_host_calls` counts envelopes that reach the handler; refusals decided here (413,
400, 503) do not spend it, and a call beyond it answers 429 without reaching the
handler. A run that ends (exit, throw, timeout) with calls in flight drops the ones not
yet begun and leaves the rest to the handler to end (the broker cancels them when its
session closes); waiting for replies never outlasts the run's deadline.

Runs are independent and may execute in parallel threads; wasm runs on the calling
thread's stack when it has room for it (4 MiB; glibc's default is 8), and on a
helper thread with a big enough stack otherwise (runtime/sandbox/thread_stack.py), since guest
recursion on a smaller stack would crash the whole process.
"""

from __future__ import annotations

import codecs
import math
import struct
import time
from collections.abc import Callable

import wasmtime

from runtime.contract import HostHandler
from runtime.messages import MSG_GUEST_ABORTED, MSG_REJECTION_PREFIX, MSG_UNTRACKED_REJECTION
from runtime.run_clock import RunClock
from runtime.sandbox import guest, snapshot, thread_stack, wasi
from runtime.sandbox import vm as qjs_vm
from runtime.sandbox.bridge import (
    Bridge,
    settle,
)
from runtime.sandbox.engine import EPOCH_TICK_S, JS_STACK_ALLOWANCE, get_engine
from runtime.sandbox.terms import (
    EXIT_ERROR,
    EXIT_INTERNAL,
    EXIT_OK,
    EXIT_TIMEOUT,
    EXIT_TRAP,
    GuestGrant,
    Limits,
    RunResult,
)

_EVAL_OPTIONS_VERSION = 1  # quickjs-ng's JS_EVAL_OPTIONS_VERSION
_REJECTION_PREFIX = MSG_REJECTION_PREFIX.encode()
_UNTRACKED_REJECTION = (MSG_UNTRACKED_REJECTION + "\n").encode()


def _lone_surrogate_as_one(exc: UnicodeError) -> tuple[str, int]:
    """ "replace", except that the three bytes QuickJS writes for a lone surrogate (ED
    A0..BF 80..BF, its WTF-8 form) are one U+FFFD, as node and every UTF-8 encoder
    write a lone surrogate, instead of the three a decoder makes of bytes UTF-8 forbids."""
    assert isinstance(exc, UnicodeDecodeError)
    raw, at = exc.object, exc.start
    lone = raw[at : at + 3]
    if len(lone) == 3 and lone[0] == 0xED and 0xA0 <= lone[1] <= 0xBF and 0x80 <= lone[2] <= 0xBF:
        return "\ufffd", at + 3
    return "\ufffd", exc.end


codecs.register_error("plimsoll-guest-output", _lone_surrogate_as_one)


def output_text(raw: bytes) -> str:
    """The guest's stdout or stderr bytes as text: UTF-8, with U+FFFD for what is not,
    and one U+FFFD for each lone surrogate the guest printed (`console.log("\\ud800")`)."""
    return raw.decode("utf-8", errors="plimsoll-guest-output")


class _Exit(Exception):
    def __init__(self, code: int) -> None:
        self.code = code


class _TimedOut(Exception):
    """The deadline passed while the host waited (for a reply, or for nothing)."""


#: JS_PromiseState's answer for a promise still waiting.
_PROMISE_PENDING = 0


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


def _evaluate(vm: qjs_vm.Vm, bridge: Bridge, source: str, first_line: int = 1) -> None:
    vm.call("_initialize")  # reactor ABI: C constructors before anything else
    if vm.call("qjs_init") != 0:
        raise qjs_vm.VmError("qjs_init failed")
    ctx = vm.call("qjs_get_context")
    rt = vm.call("JS_GetRuntime", ctx)
    vm.install_stack_limit(rt, JS_STACK_ALLOWANCE)

    snapshot.install_host_functions(vm, ctx, rt)

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
        _run_module(vm, bridge, ctx, src_ptr, len(src), first_line)
    except _Exit:
        _flush_stdio(vm, ctx)  # never after a trap: a trapped instance is not touched again
        raise
    _flush_stdio(vm, ctx)


def _signed(value: int) -> int:
    return value - (1 << 32) if value >= 1 << 31 else value


def _await_module(vm: qjs_vm.Vm, bridge: Bridge, ctx: int, promise: int) -> None:
    """Run the loop until the module's promise settles, like qjs's js_std_await.

    js_std_await itself cannot wait for a host call: with nothing else to do it spins
    inside the guest until the deadline. Here, as there, jobs run one at a time and the
    promise is looked at after each, so nothing queued after the module settles runs
    before the run ends on a rejection; with no job, one `_step` runs timers and replies.
    """
    if _signed(vm.call("JS_PromiseState", ctx, promise)) != _PROMISE_PENDING:
        return  # the usual case: a module without top-level await settles at once
    rt = vm.call("JS_GetRuntime", ctx)
    job_ctx = vm.scratch("job context")
    while _signed(vm.call("JS_PromiseState", ctx, promise)) == _PROMISE_PENDING:
        ran = _signed(vm.call("JS_ExecutePendingJob", rt, job_ctx))
        if ran < 0:
            vm.call("js_std_dump_error", ctx)
        elif ran == 0 and not _step(vm, bridge, ctx):
            # Nothing left that could settle it: as qjs, the run waits out its time.
            time.sleep(max(0.0, bridge.deadline - time.monotonic()))
            raise _TimedOut


def _step(vm: qjs_vm.Vm, bridge: Bridge, ctx: int) -> bool:
    """One turn of the event loop; False when nothing is left to run or wait for.

    Jobs and at most one due timer run first (js_std_loop_once); the calls the guest
    started meanwhile are sent (`Bridge.dispatch`); then every reply that has arrived
    settles its promise; with none, the host waits for the next reply while
    calls are in flight (never past the next timer or the deadline), and otherwise
    moves the guest's clock to the next timer.
    """
    r = _signed(vm.call("js_std_loop_once", ctx))
    if r == -2:
        vm.call("js_std_dump_error", ctx)
        raise _Exit(EXIT_ERROR)
    bridge.dispatch(guest_idle=r == -1)
    bridge.catch_up()
    settled = False
    while (reply := bridge.next_reply(None)) is not None:
        settle(bridge, vm, ctx, reply)
        settled = True
    if settled or r == 0:
        return True
    if bridge.pending:
        left = bridge.deadline - time.monotonic()
        if left <= 0:
            raise _TimedOut
        reply = bridge.next_reply(left if r < 0 else min(left, r / 1000))
        bridge.catch_up()
        if reply is not None:
            settle(bridge, vm, ctx, reply)
        return True
    if r > 0:
        vm.state.sleep(r * 1_000_000)
        return True
    return False


def _evaluate_image(vm: qjs_vm.Vm, bridge: Bridge, image: snapshot.Image, code: str) -> None:
    """After `snapshot.restore`: only the agent's code, as its own `<cmdline>` module."""
    ctx = image.ctx
    body = code.encode("utf-8", errors="surrogatepass")
    ptr = vm.alloc(body)
    # execArgv[2] is the whole source, prelude included, exactly as on the stock path.
    snapshot.set_source(vm, image, vm.call("JS_NewStringLen", ctx, ptr, len(body)))
    try:
        _run_module(
            vm,
            bridge,
            ctx,
            ptr,
            len(body),
            1,
            owner=ptr,
            filename=image.cmdline,
        )
    except _Exit:
        snapshot.flush_stdio(vm, image)  # never after a trap, as on the stock path
        raise
    snapshot.flush_stdio(vm, image)


def _run_module(
    vm: qjs_vm.Vm,
    bridge: Bridge,
    ctx: int,
    src_ptr: int,
    src_len: int,
    first_line: int,
    *,
    owner: int | None = None,
    filename: int | None = None,
) -> None:
    """Evaluate like `qjs -e`, drain the job queue, report unhandled rejections.

    `first_line` is the line number the source's first line gets (JSEvalOptions.line_num),
    chosen so that the agent's own first line is line 1 in errors and stacks, whatever
    the shims, client and preamble before it take (they get lines at or below 0).
    `owner` is the allocation holding the source (when `src_ptr` points inside it);
    `filename` a NUL-terminated "<cmdline>" already in guest memory.
    """
    state = vm.state
    if filename is None:
        filename = vm.alloc(b"<cmdline>")
    flags = qjs_vm.JS_EVAL_TYPE_MODULE | qjs_vm.JS_EVAL_FLAG_COMPILE_ONLY
    # struct JSEvalOptions { int version = 1; int eval_flags; const char *filename;
    # int line_num; } on wasm32: four little-endian 32-bit fields.
    options = vm.scratch("eval options")  # JS_Eval2 only reads it, and runs no guest code
    vm.write(options, struct.pack("<iiIi", _EVAL_OPTIONS_VERSION, flags, filename, first_line))
    func = vm.call("JS_Eval2", ctx, src_ptr, src_len, options)
    vm.free(src_ptr if owner is None else owner)
    if qjs_vm.tag_of(func) != qjs_vm.TAG_EXCEPTION:
        vm.call("js_module_set_import_meta", ctx, func, 0, 1)
        func = vm.call("JS_EvalFunction", ctx, func)
    if qjs_vm.tag_of(func) != qjs_vm.TAG_EXCEPTION:
        _await_module(vm, bridge, ctx, func)
    _check(vm, ctx, vm.call("js_std_await", ctx, func))  # settled: returns at once

    while _step(vm, bridge, ctx):
        pass

    if bridge.rejections:
        for _promise, reason in bridge.rejections.values():
            state.emit(2, _REJECTION_PREFIX)
            vm.call("JS_Throw", ctx, reason)
            vm.call("js_std_dump_error", ctx)
            break  # like qjs: the first unhandled rejection ends the run
        raise _Exit(EXIT_ERROR)
    if bridge.untracked_rejections:
        state.emit(2, _REJECTION_PREFIX + _UNTRACKED_REJECTION)
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
    grant: GuestGrant | tuple[GuestGrant, ...] | None = None,
    handler: HostHandler | None = None,
    limits: Limits = Limits(),  # frozen dataclass: safe as a default
    memory_probe: Callable[[bytes], None] | None = None,
    clock: RunClock | None = None,
) -> RunResult:
    """Evaluate `code` in a fresh sandbox; see the module docstring for the guarantees.

    `memory_probe`, when given, receives a copy of the guest's whole linear memory at the
    end of the run (a test hook for key-confinement checks; costs a copy of the memory).
    `grant` may be several grants (a run of several profiles): each one's client is its
    own global, in the order given, each followed by its preamble.
    `clock`, when given, is the run's clock shared with the handler: its deadline (made
    from `limits.timeout_s`) stops while the handler holds a call for a person's
    approval (runtime/run_clock.py).
    """
    return thread_stack.call_with_enough_stack(
        lambda: _run(
            code,
            grant=grant,
            handler=handler,
            limits=limits,
            memory_probe=memory_probe,
            clock=clock,
        )
    )


def _run(
    code: str,
    *,
    grant: GuestGrant | tuple[GuestGrant, ...] | None,
    handler: HostHandler | None,
    limits: Limits,
    memory_probe: Callable[[bytes], None] | None,
    clock: RunClock | None = None,
) -> RunResult:
    limits = limits.normalised()
    eng = get_engine()
    if grant is None:
        prelude = guest.prelude(None)
    elif isinstance(grant, tuple):  # several profiles: one client (global) each
        prelude = guest.prelude_of(
            tuple((g.global_name, tuple(g.allow), g.preamble) for g in grant)
        )
    else:
        prelude = guest.prelude(grant.global_name, tuple(grant.allow), grant.preamble)
    image = snapshot.image_for(eng, prelude)
    state = wasi.WasiState(output_bytes=limits.output_bytes, clock=limits.clock)
    start = time.monotonic()
    deadline = start + limits.timeout_s
    bridge = Bridge(handler, limits.max_host_calls, deadline, clock)
    state.extra = bridge
    exit_code, timed_out, internal = EXIT_OK, False, ""
    vm: qjs_vm.Vm | None = None
    with eng.instance() as inst:
        try:
            vm = qjs_vm.Vm(
                inst,
                state,
                memory_bytes=limits.memory_mb << 20,
                deadline_ticks=math.ceil(limits.timeout_s / EPOCH_TICK_S) + 1,
            )
            bridge.vm = vm
            if clock is not None and clock.ended:
                # Ended (an operator's interrupt) while the engine and image were made:
                # the guest's first check ends it.
                vm.store.set_epoch_deadline(1)
            if image is not None:
                snapshot.restore(vm, image, state)
                _evaluate_image(vm, bridge, image, code)
            else:
                # The agent's code is the source's tail: its first line is line 1.
                _evaluate(vm, bridge, prelude + code, 1 - prelude.count("\n"))
        except _Exit as done:
            exit_code = done.code
        except _TimedOut:
            exit_code, timed_out = EXIT_TIMEOUT, True
        except wasi.ProcExit as done:
            exit_code = done.code & 0xFF
        except wasmtime.Trap as trap:
            if trap.trap_code == wasmtime.TrapCode.INTERRUPT:
                exit_code, timed_out = EXIT_TIMEOUT, True
            else:
                exit_code = EXIT_TRAP
                if not state.out[2]:
                    state.emit(
                        2, (MSG_GUEST_ABORTED.format(cause=_trap_text(trap)) + "\n").encode()
                    )
        except (wasmtime.WasmtimeError, MemoryError, wasi.GuestMemoryError) as exc:
            exit_code = EXIT_TRAP
            if not state.out[2]:
                state.emit(
                    2,
                    (
                        MSG_GUEST_ABORTED.format(
                            cause=str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                        )
                        + "\n"
                    ).encode(),
                )
        except Exception as exc:  # a host fault: end the run, keep what it wrote
            exit_code, internal = EXIT_INTERNAL, type(exc).__name__
        finally:
            # The Store is dropped (and unregistered) whatever the steps before it do, and
            # inside the slot's block: a slot must not count as free while it is in use.
            try:
                try:
                    bridge.close()
                    if vm is not None and memory_probe is not None:
                        memory_probe(state.snapshot(vm.context))
                finally:
                    if vm is not None:
                        vm.close()
            except Exception as exc:
                exit_code, internal = EXIT_INTERNAL, internal or type(exc).__name__
            bridge.vm = None
            state.extra = None
    return RunResult(
        stdout=output_text(state.out[1]),
        stderr=output_text(state.out[2]),
        stdout_truncated=state.truncated[1],
        stderr_truncated=state.truncated[2],
        exit_code=exit_code,
        timed_out=timed_out,
        duration_s=time.monotonic() - start,
        refused_calls=bridge.refused,
        internal_error=internal,
    )


__all__ = ["output_text", "run"]
