"""A per-grant memory image: restore a fresh sandbox instead of initialising one.

Why: about 1 ms of every fresh run is identical work (libc start, `qjs_init`, the host
functions, compiling and evaluating the shims, the client and the preamble), and after it
only ~40 pages of linear memory differ from a freshly instantiated module. An image
records those pages once per grant; a run instantiates the stock module (a new Store, as
before), grows memory to the image's size, copies the pages in, re-adds the two host
functions in the same order (asserting they land on the same table slots, since the
image holds their indices as C function pointers) and evaluates only the agent's code.
Every run is therefore still a fresh instance: nothing one run does reaches the next.

What an image freezes and a run must reset: QuickJS seeds `Math.random` from the wall
clock and takes `performance`'s time origin from the monotonic clock when the context is
created. The image is built with a clock that answers distinctive values, the three
words holding them (the PRNG state and the origin in the JSContext, the
`performance.timeOrigin` property value) are found by value, exactly once each or no
image is made, and every run writes them from its own clock, so a fixed-clock run sees
what it saw before and a real-clock run gets a fresh seed. The Map/Set hash seed stays
per image (changing it would corrupt the hash tables already built).

What an image is not: anything after agent code ran. It is built in its own instance
that never sees agent code, keyed by a hash of everything that went in (the engine's
cache key, the format, the stack allowance, the prelude source), and kept in memory
only: building one costs 3-5 ms once per process and grant, so a disk copy could save
at most that, once per process, while adding a file of guest state the process would
have to trust (with the compiled module's ownership and permission checks) on every use.

The prelude (shims, client, preamble) is evaluated as a strict global script, not as
part of the agent's module: its top-level declarations stay visible to the agent's code
as global bindings, and the agent's code becomes its own module named `<cmdline>`, so
its error positions are its own line numbers. `execArgv[2]` still holds the whole
source (prelude and code) exactly as before. A prelude that writes output, leaves jobs
or rejections behind, calls the host or is not a valid script gets no image: such a run
takes the stock path, which behaves exactly as before.
"""

from __future__ import annotations

import collections
import ctypes
import functools
import hashlib
import json
import math
import struct
import threading
from dataclasses import dataclass

import wasmtime
from wasmtime import _ffi as ffi

from runtime.contract import HostReply, HostRequest
from runtime.errors import VmError
from runtime.sandbox import engine as engine_mod
from runtime.sandbox import engine_file, wasi
from runtime.sandbox import vm as qjs_vm
from runtime.sandbox.bridge import (
    HOST_CALL_CALLBACK,
    HOST_CALL_NAME,
    HOST_CALL_SIGNATURE,
    HOST_START_CALLBACK,
    HOST_START_NAME,
    TRACKER_CALLBACK,
    TRACKER_SIGNATURE,
    Bridge,
    prepare_constants,
)

#: Flip to False to run every sandbox the stock way (benchmarks compare both).
ENABLED = True
FORMAT = 1
PAGE = 4096
#: Images kept per process (each is the ~170 KiB that differs plus a few words).
MAX_IMAGES = 64
#: The build instance's memory cap (the default run limit).
_BUILD_MEMORY_BYTES = 256 << 20
WASM_PAGE = 65536
_U64 = (1 << 64) - 1

#: The clock an image is built with: values no real state would hold by chance.
_IMAGE_REAL_NS = 1_234_567_890_123_456_000
_IMAGE_MONO_NS = 987_654_321_987_000
_CTX_SCAN_BYTES = 4096
JS_EVAL_TYPE_GLOBAL = 0
JS_UNDEFINED = qjs_vm.TAG_UNDEFINED << 32

#: stdio is flushed at the end of a run through this function, compiled into the image,
#: instead of evaluating a second module per run. Bound methods: nothing the guest can
#: reach (FILE.prototype, Function.prototype) is looked up when it runs.
_FLUSH_SOURCE = (
    'import * as std from "qjs:std";'
    " const o = std.out.flush.bind(std.out), e = std.err.flush.bind(std.err);"
    " globalThis.__plimsoll_flush = () => { o(); e(); };"
    # execArgv[2] of a run: the prelude's string, made once in the image, joined with
    # the agent's code. Decoding the whole source again each run cost ~0.37 ms for
    # GitHub's 213 KB preamble; joining two strings is a copy.
    " globalThis.__plimsoll_source = (a, p) => (b) => { a[2] = p + b; };"
)
_FLUSH_UNSET = b"delete globalThis.__plimsoll_flush; delete globalThis.__plimsoll_source;"


def _origin_ms(mono_ns: int) -> float:
    """QuickJS-NG's `js__now_ms()`: the monotonic clock in ms (nanoseconds / 1e6)."""
    return mono_ns / 1e6


def _seed(real_ns: int) -> int:
    """The PRNG state a fresh JSContext holds: QuickJS-NG seeds it with wall-clock
    microseconds (never zero) and then advances it one xorshift64* step to draw the
    hash seed."""
    x = (real_ns // 1000) & _U64 or 1
    x ^= x >> 12
    x ^= (x << 25) & _U64
    x ^= x >> 27
    return x


class _ImageClock(wasi.WasiState):
    """The build instance's WASI state: a clock that answers the distinctive values."""

    def now_ns(self, clock_id: int) -> int:
        return (_IMAGE_REAL_NS if clock_id == 0 else _IMAGE_MONO_NS) + self.virtual_ns


#: The native functions of a sandbox, in the order they are added to the table (their
#: slots are C function pointers the image holds, so both paths share this one list).
HOST_FUNCTIONS = (
    (HOST_CALL_NAME, HOST_CALL_CALLBACK, HOST_CALL_SIGNATURE),
    (HOST_START_NAME, HOST_START_CALLBACK, HOST_CALL_SIGNATURE),
    (None, TRACKER_CALLBACK, TRACKER_SIGNATURE),  # the promise rejection tracker
)


def install_host_functions(vm: qjs_vm.Vm, ctx: int, rt: int) -> tuple[int, ...]:
    """Add the host functions to the table and the globals; returns their slots."""
    slots = []
    for name, callback, signature in HOST_FUNCTIONS:
        slot = vm.add_function(callback, *signature)
        slots.append(slot)
        if name is None:
            vm.call("JS_SetHostPromiseRejectionTracker", rt, slot, 0)
            continue
        raw = vm.alloc(name.encode())
        fn = vm.call("JS_NewCFunction2", ctx, slot, raw, 1, qjs_vm.JS_CFUNC_GENERIC, 0)
        vm.set_global(ctx, name, fn)
        vm.free(raw)
    return tuple(slots)


@dataclass(frozen=True)
class Image:
    """Everything a run needs to become the instance the image was taken from."""

    key: str
    pages: int  # wasm pages (64 KiB) of the image's memory
    ranges: tuple[tuple[int, bytes], ...]  # (offset, bytes) that differ from a fresh instance
    slots: tuple[int, ...]  # table slots of HOST_FUNCTIONS
    ctx: int
    #: A function of one string, the agent's code, that sets execArgv[2] to the prelude
    #: followed by it (the image holds a reference)
    source: int
    flush: int  # the stdio flush function (the image holds a reference)
    cmdline: int  # "<cmdline>\0" in guest memory
    constants: tuple[tuple[str | bytes, int], ...]  # Vm.constants of the build instance
    seed_addr: int
    origin_addr: int
    origin_prop_addr: int
    float_addend: int

    @property
    def dirty_bytes(self) -> int:
        return sum(len(b) for _, b in self.ranges)


@functools.lru_cache(maxsize=1)
def _engine_key() -> str:
    return engine_file.cache_key()  # reads package metadata: once per process


@functools.lru_cache(maxsize=MAX_IMAGES)
def image_key(prelude: str) -> str:
    material = json.dumps(
        {
            "format": FORMAT,
            "engine": _engine_key(),
            "stack_allowance": engine_mod.JS_STACK_ALLOWANCE,
            "flush": _FLUSH_SOURCE,
            "clock": [_IMAGE_REAL_NS, _IMAGE_MONO_NS],
            "prelude": prelude,
        },
        sort_keys=True,
    )
    return hashlib.sha256(material.encode("utf-8", errors="surrogatepass")).hexdigest()


_CACHE: collections.OrderedDict[str, Image | None] = collections.OrderedDict()
_CACHE_LOCK = threading.Lock()
_BUILD_LOCKS: dict[str, threading.Lock] = {}


def image_for(eng: engine_mod.QjsEngine, prelude: str) -> Image | None:
    """The image for `prelude` (built on first use), or None: take the stock path."""
    if not ENABLED:
        return None
    key = image_key(prelude)
    with _CACHE_LOCK:
        if key in _CACHE:
            _CACHE.move_to_end(key)
            return _CACHE[key]
        lock = _BUILD_LOCKS.setdefault(key, threading.Lock())
    with lock:
        with _CACHE_LOCK:
            if key in _CACHE:
                return _CACHE[key]
        image = build(eng, prelude, key)
        with _CACHE_LOCK:
            _CACHE[key] = image
            while len(_CACHE) > MAX_IMAGES:
                _CACHE.popitem(last=False)
            _BUILD_LOCKS.pop(key, None)
    return image


def clear() -> None:
    """Forget every image (tests)."""
    with _CACHE_LOCK:
        _CACHE.clear()


class _NoImage(Exception):
    """The prelude cannot be imaged; runs take the stock path."""


class _Recorder:
    """Host handler of the build instance: a prelude calling the host gets no image."""

    def __init__(self) -> None:
        self.called = False

    def __call__(self, request: HostRequest) -> HostReply:
        self.called = True
        return HostReply(503, b"")


def build(eng: engine_mod.QjsEngine, prelude: str, key: str) -> Image | None:
    state = _ImageClock(output_bytes=1 << 16, clock="real")
    recorder = _Recorder()
    bridge = Bridge(recorder, 1, math.inf)
    state.extra = bridge
    with eng.instance() as inst:
        vm = qjs_vm.Vm(inst, state, memory_bytes=_BUILD_MEMORY_BYTES, deadline_ticks=1 << 30)
        bridge.vm = vm
        try:
            return _build(vm, bridge, recorder, state, prelude, key)
        except (_NoImage, wasi.ProcExit, wasmtime.Trap, wasmtime.WasmtimeError, MemoryError):
            return None
        finally:
            bridge.close()
            vm.close()
            bridge.vm = None
            state.extra = None


def _drain(vm: qjs_vm.Vm, ctx: int) -> None:
    while True:
        r = vm.call("js_std_loop_once", ctx)
        r = r - (1 << 32) if r >= 1 << 31 else r
        if r == -1:
            return
        if r != 0:
            raise _NoImage("the prelude left timers or failed jobs")


def _eval(vm: qjs_vm.Vm, ctx: int, source: bytes, name: bytes, flags: int) -> None:
    src, fname = vm.alloc(source), vm.alloc(name)
    try:
        value = vm.call("JS_Eval", ctx, src, len(source), fname, flags)
        if flags & qjs_vm.JS_EVAL_TYPE_MODULE and qjs_vm.tag_of(value) != qjs_vm.TAG_EXCEPTION:
            value = vm.call("js_std_await", ctx, value)
        if qjs_vm.tag_of(value) == qjs_vm.TAG_EXCEPTION:
            vm.call("JS_FreeValue", ctx, vm.call("JS_GetException", ctx))
            raise _NoImage(f"{name.decode()} threw")
        vm.call("JS_FreeValue", ctx, value)
    finally:
        vm.free(fname)
        _free_zeroed(vm, src, len(source) + 1)
    _drain(vm, ctx)


def _free_zeroed(vm: qjs_vm.Vm, ptr: int, size: int) -> None:
    """Free a buffer of ours after zeroing it. Why: the image keeps only the pages that
    differ from a fresh instance, whose memory is zero, and freed memory keeps its bytes;
    GitHub's prelude passes through two such buffers (its source, ~0.3 MB), which every
    run would otherwise copy back."""
    vm.write(ptr, bytes(size))
    vm.free(ptr)


def _global(vm: qjs_vm.Vm, ctx: int, name: bytes) -> int:
    """A global's value (a new reference)."""
    glob, prop = vm.call("JS_GetGlobalObject", ctx), vm.alloc(name)
    try:
        return vm.call("JS_GetPropertyStr", ctx, glob, prop)
    finally:
        vm.free(prop)
        vm.call("JS_FreeValue", ctx, glob)


def _call(vm: qjs_vm.Vm, ctx: int, func: int, *args: int) -> int:
    """`func(...args)` with `this` undefined; the result is a new reference (or the
    exception tag, its exception left pending)."""
    argv = vm.alloc(struct.pack(f"<{len(args)}q", *args), nul=False)
    try:
        return vm.call("JS_Call", ctx, func, JS_UNDEFINED, len(args), argv)
    finally:
        vm.free(argv)


def _one(haystack: bytes, needle: bytes, what: str) -> int:
    at = haystack.find(needle)
    if at < 0 or haystack.find(needle, at + 1) >= 0:
        raise _NoImage(f"{what} not found exactly once")
    return at


def _build(
    vm: qjs_vm.Vm,
    bridge: Bridge,
    recorder: _Recorder,
    state: wasi.WasiState,
    prelude: str,
    key: str,
) -> Image:
    fresh = state.snapshot(vm.context)
    vm.call("_initialize")
    if vm.call("qjs_init") != 0:
        raise _NoImage("qjs_init failed")
    ctx = vm.call("qjs_get_context")
    rt = vm.call("JS_GetRuntime", ctx)
    vm.install_stack_limit(rt, engine_mod.JS_STACK_ALLOWANCE)

    slots = install_host_functions(vm, ctx, rt)
    prepare_constants(vm)

    # The flush helper first: nothing the prelude does can reach into it.
    _eval(vm, ctx, _FLUSH_SOURCE.encode(), b"<flush>", qjs_vm.JS_EVAL_TYPE_MODULE)
    flush, make_source = (_global(vm, ctx, n) for n in (b"__plimsoll_flush", b"__plimsoll_source"))
    _eval(vm, ctx, _FLUSH_UNSET, b"<flush>", JS_EVAL_TYPE_GLOBAL)

    # execArgv as `qjs -e` sets it; each run puts its whole source in [2].
    argv = vm.call("JS_NewArray", ctx)
    for i, arg in enumerate((b"qjs", b"-e")):
        vm.call("JS_SetPropertyUint32", ctx, argv, i, vm.new_string(ctx, arg))
    vm.set_global(ctx, "execArgv", vm.call("JS_DupValue", ctx, argv))
    vm.set_global(ctx, "argv0", vm.new_string(ctx, b"qjs"))
    cmdline = vm.alloc(b"<cmdline>")
    text = prelude.encode("utf-8", errors="surrogatepass")
    buffer = vm.alloc(text, nul=False)
    prefix = vm.call("JS_NewStringLen", ctx, buffer, len(text))
    _free_zeroed(vm, buffer, len(text))
    source = _call(vm, ctx, make_source, argv, prefix)
    for value in (make_source, argv, prefix):
        vm.call("JS_FreeValue", ctx, value)
    if qjs_vm.tag_of(source) == qjs_vm.TAG_EXCEPTION:
        raise _NoImage("no execArgv setter")

    script = ('"use strict";' + prelude).encode("utf-8", errors="surrogatepass")
    _eval(vm, ctx, script, b"<prelude>", JS_EVAL_TYPE_GLOBAL)
    if vm.call("JS_IsJobPending", rt) != 0:
        raise _NoImage("the prelude left jobs")
    flushed = vm.call("JS_Call", ctx, flush, JS_UNDEFINED, 0, 0)
    if qjs_vm.tag_of(flushed) == qjs_vm.TAG_EXCEPTION:
        raise _NoImage("flush failed")
    vm.call("JS_FreeValue", ctx, flushed)
    if state.out[1] or state.out[2] or recorder.called or bridge.rejections or bridge.pending:
        raise _NoImage("the prelude wrote output, called the host or left a rejection")
    if bridge.untracked_rejections:
        raise _NoImage("the prelude left a rejection")

    # The words that must differ per run, found by value.
    ctx_bytes = vm.read(ctx, _CTX_SCAN_BYTES)
    seed_addr = ctx + _one(ctx_bytes, struct.pack("<Q", _seed(_IMAGE_REAL_NS)), "PRNG state")
    origin = _origin_ms(_IMAGE_MONO_NS)
    origin_addr = ctx + _one(ctx_bytes, struct.pack("<d", origin), "time origin")
    boxed = vm.call("JS_NewNumber", ctx, origin) & ((1 << 64) - 1)
    addend = (struct.unpack("<Q", struct.pack("<d", origin))[0] - boxed) & ((1 << 64) - 1)
    memory = state.snapshot(vm.context)
    prop_addr = _one(memory, struct.pack("<Q", boxed), "performance.timeOrigin")

    if len(memory) % WASM_PAGE or len(memory) < len(fresh):
        raise _NoImage("unexpected memory size")
    fresh = fresh + bytes(len(memory) - len(fresh))
    return Image(
        key=key,
        pages=len(memory) // WASM_PAGE,
        ranges=_dirty_ranges(fresh, memory),
        slots=slots,
        ctx=ctx,
        source=source,
        flush=flush,
        cmdline=cmdline,
        constants=tuple(vm.constants.items()),
        seed_addr=seed_addr,
        origin_addr=origin_addr,
        origin_prop_addr=prop_addr,
        float_addend=addend,
    )


def _dirty_ranges(fresh: bytes, memory: bytes) -> tuple[tuple[int, bytes], ...]:
    ranges: list[tuple[int, bytes]] = []
    start = None
    for off in range(0, len(memory), PAGE):
        dirty = memory[off : off + PAGE] != fresh[off : off + PAGE]
        if dirty and start is None:
            start = off
        elif not dirty and start is not None:
            ranges.append((start, memory[start:off]))
            start = None
    if start is not None:
        ranges.append((start, memory[start:]))
    return tuple(ranges)


def restore(vm: qjs_vm.Vm, image: Image, state: wasi.WasiState) -> None:
    """Make the fresh instance `vm` the image's instance, with this run's clock."""
    context = vm.context
    memory = ctypes.byref(state.memory)
    have = ffi.wasmtime_memory_size(context, memory)
    if image.pages > have:
        prev = ctypes.c_uint64()
        err = ffi.wasmtime_memory_grow(context, memory, image.pages - have, ctypes.byref(prev))
        if err:
            raise wasmtime.WasmtimeError._from_ptr(err)
    base = ctypes.cast(ffi.wasmtime_memory_data(context, memory), ctypes.c_void_p).value or 0
    for offset, blob in image.ranges:
        ctypes.memmove(base + offset, blob, len(blob))
    vm.adopt_constants(dict(image.constants))
    for (_name, callback, signature), slot in zip(HOST_FUNCTIONS, image.slots, strict=True):
        if vm.add_function(callback, *signature) != slot:
            raise VmError("host functions did not land on the image's table slots")
    origin = _origin_ms(state.now_ns(1))
    bits = struct.unpack("<Q", struct.pack("<d", origin))[0]
    ctypes.memmove(base + image.seed_addr, struct.pack("<Q", _seed(state.now_ns(0))), 8)
    ctypes.memmove(base + image.origin_addr, struct.pack("<d", origin), 8)
    boxed = (bits - image.float_addend) & ((1 << 64) - 1)
    ctypes.memmove(base + image.origin_prop_addr, struct.pack("<Q", boxed), 8)


def set_source(vm: qjs_vm.Vm, image: Image, code: int) -> None:
    """execArgv[2] = the prelude followed by `code`, a JS string this takes ownership of.
    A run whose string could not be made (out of memory) keeps the image's execArgv."""
    argv = vm.scratch("call argv")  # JS_Call reads it on entry; the setter runs no guest code
    vm.write(argv, struct.pack("<q", code))
    value = vm.call("JS_Call", image.ctx, image.source, JS_UNDEFINED, 1, argv)
    if qjs_vm.tag_of(value) == qjs_vm.TAG_EXCEPTION:
        vm.call("JS_FreeValue", image.ctx, vm.call("JS_GetException", image.ctx))
    else:
        vm.call("JS_FreeValue", image.ctx, value)
    vm.call("JS_FreeValue", image.ctx, code)


def flush_stdio(vm: qjs_vm.Vm, image: Image) -> None:
    """The end-of-run stdio flush, through the image's function."""
    value = vm.call("JS_Call", image.ctx, image.flush, JS_UNDEFINED, 0, 0)
    if qjs_vm.tag_of(value) == qjs_vm.TAG_EXCEPTION:
        vm.call("JS_FreeValue", image.ctx, vm.call("JS_GetException", image.ctx))
    else:
        vm.call("JS_FreeValue", image.ctx, value)
