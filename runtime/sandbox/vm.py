"""One run's QuickJS instance: a fresh Store, raw calls into the C API, JSValue helpers.

Why raw calls: wasmtime-py's `Func.__call__` looks the function type up over FFI and
boxes every value (~50 us per call); a run makes dozens of calls and a host call several,
so exports are called through `wasmtime_func_call_unchecked` with a raw value array
(~6 us), with signatures taken once from the module.

JSValue on wasm32 is NaN-boxed into one i64: tag = signed high 32 bits, payload = low 32
bits (int32, bool or pointer); see QuickJS-NG's JS_NAN_BOXING.
"""

from __future__ import annotations

import ctypes
import functools
import struct
import weakref

import wasmtime
from wasmtime import _bindings
from wasmtime import _ffi as ffi

from runtime.errors import VmError
from runtime.sandbox import engine as engine_mod
from runtime.sandbox import wasi

TAG_OBJECT, TAG_INT, TAG_BOOL, TAG_NULL, TAG_UNDEFINED, TAG_EXCEPTION = -1, 0, 1, 2, 3, 6
JS_EXCEPTION = TAG_EXCEPTION << 32
JS_EVAL_TYPE_MODULE = 1 << 0
JS_EVAL_FLAG_COMPILE_ONLY = 1 << 5
JS_CFUNC_GENERIC = 0
JS_PROP_C_W_E = 1 | 2 | 4  # configurable, writable, enumerable

#: The per-instance scratch buffers (`Vm.scratch`): name -> bytes. An image allocates
#: them all before it is taken, so a restored run finds them without a malloc.
SCRATCH = {
    "to_bytes length": 4,  # JS_ToCStringLen2's size_t out-parameter
    "promise functions": 16,  # JS_NewPromiseCapability's resolving functions
    "call argv": 8,  # the one argument of a JS_Call the host makes (the source setter)
    "job context": 4,  # JS_ExecutePendingJob's JSContext out-parameter
    "eval options": 16,  # struct JSEvalOptions
    "string": 4096,  # short strings on their way to JS_NewStringLen
}

#: JSRuntime field offsets are found at run time (see `install_stack_limit`), but only in
#: this window, so a different layout fails closed instead of poking a random word.
_RT_SCAN_BYTES = 1024
_RT_TOP_WINDOW = 16 << 10


_SLOT = ctypes.sizeof(ffi.wasmtime_val_raw_t)
_call_unchecked = _bindings._wasmtime_func_call_unchecked  # the ctypes function itself
_export_get = _bindings._wasmtime_instance_export_get
_TRAP_PTR = ctypes.POINTER(ffi.wasm_trap_t)


@functools.cache
def _export_name(name: str) -> ctypes.Array[ctypes.c_char]:
    """An export's name as a C buffer, built once per process (NUL-terminated)."""
    return ctypes.create_string_buffer(name.encode())


@functools.cache
def _call_shape(
    params: tuple[str, ...], results: tuple[str, ...]
) -> tuple[str, bool, type, int, str | None]:
    """(struct format of the arguments, any f64 among them, raw array type, slots,
    result kind) of a signature. Integers are packed signed ("q"): a JSValue is a
    signed i64 and a pointer or i32 fits either way."""
    n = max(len(params), len(results), 1)
    pad = f"{_SLOT - 8}x"
    fmt = "<" + "".join(("d" if p == "f64" else "q") + pad for p in params)
    fmt += f"{_SLOT * (n - len(params))}x" if n > len(params) else ""
    return fmt, "f64" in params, ffi.wasmtime_val_raw_t * n, n, results[0] if results else None


#: FuncTypes per engine: building one costs ~14 us, which every run paid for each host
#: function. Per engine because wasmtime ties a type to the first engine that used it.
_FUNCTYPES: weakref.WeakKeyDictionary[object, dict[tuple, wasmtime.FuncType]] = (
    weakref.WeakKeyDictionary()
)


def _functype(
    eng: engine_mod.QjsEngine, params: tuple[str, ...], results: tuple[str, ...]
) -> wasmtime.FuncType:
    types = _FUNCTYPES.setdefault(eng, {})
    ty = types.get((params, results))
    if ty is None:
        ty = types.setdefault((params, results), wasi.functype(params, results))
    return ty


def _pack_args(fmt: str, args: tuple[int | float, ...]) -> bytes:
    """The slow path: f64 arguments, or an integer outside the signed i64 range."""
    kinds = [c for c in fmt if c in "dq"]
    return struct.pack(
        fmt,
        *(float(a) if k == "d" else s64(int(a)) for k, a in zip(kinds, args, strict=True)),
    )


def tag_of(v: int) -> int:
    t = (v >> 32) & 0xFFFFFFFF
    return t - (1 << 32) if t >= 1 << 31 else t


def s64(u: int) -> int:
    u &= (1 << 64) - 1
    return u - (1 << 64) if u >= 1 << 63 else u


def js_int(i: int) -> int:
    return s64((TAG_INT << 32) | (i & 0xFFFFFFFF))


class Vm:
    """A fresh Store + instance of the shared module; never reused after a trap.

    Longer than the runtime's other classes on purpose: it is the one owner of a Store's
    raw FFI handles (exports, memory, table), and every method is a few lines over them;
    splitting it would hand those handles to a second object with the same lifetime.
    """

    def __init__(
        self,
        eng: engine_mod.QjsEngine,
        state: wasi.WasiState,
        *,
        memory_bytes: int,
        deadline_ticks: int,
    ) -> None:
        self.eng = eng
        self.state = state
        self.store = wasmtime.Store(eng.engine)
        self.context = self.store._context()
        self.store.set_limits(memory_size=memory_bytes)
        self.store.set_epoch_deadline(max(1, deadline_ticks))
        wasi.register(self.context, state)
        self._trap = _TRAP_PTR()
        self._trap_ref = ctypes.byref(self._trap)
        #: name -> (byref(func), call shape, func): the func is kept alive with its byref.
        self._constants: dict[str | bytes, int] = {}
        self._funcs: dict[str, tuple[object, tuple[str, type, int, str | None], object]] = {}
        instance = ffi.wasmtime_instance_t()
        trap = ctypes.POINTER(ffi.wasm_trap_t)()
        err = ffi.wasmtime_instance_pre_instantiate(
            eng.pre.ptr(), self.context, ctypes.byref(instance), ctypes.byref(trap)
        )
        if err or trap:
            # No Vm exists for run() to close: drop the registration here, or the state
            # would outlive the Store in the registry.
            wasi.unregister(self.context)
            if err:
                raise wasmtime.WasmtimeError._from_ptr(err)
            raise wasmtime.Trap._from_ptr(trap)
        self.instance = instance
        state.attach_memory(self._extern("memory").of.memory, self.context)
        self.table = self._extern(engine_mod.wasm_layout.TABLE_EXPORT).of.table

    def close(self) -> None:
        wasi.unregister(self.context)
        self.state.detach_memory()
        self.store = None  # type: ignore[assignment]  # dropping the Store unmaps the memory

    # -- exports -----------------------------------------------------------------------
    def _extern(self, name: str) -> ffi.wasmtime_extern_t:
        """One export of this instance, looked up by name.

        By name, not by index: wasmtime's `export_nth` walks the instance's exports up
        to the index, which cost up to 8 us per lookup and ~20 lookups per run with the
        291 exports of the earlier prebuilt engine; `export_get` is a hash lookup
        (~1.4 us) whatever the count (42 now).
        """
        raw = _export_name(name)
        item = ffi.wasmtime_extern_t()
        ok = _export_get(
            self.context, ctypes.byref(self.instance), raw, len(raw) - 1, ctypes.byref(item)
        )
        if not ok:
            raise VmError(f"export {name} missing")
        return item

    def call(self, name: str, *args: int | float) -> int:
        """Call export `name` with integer (or f64) arguments; returns its single result (or 0).

        The arguments are packed into the raw value array with one `struct.pack` (each
        slot is 16 bytes; an i32 is read from the low half of an i64 slot) and the raw
        ctypes entry point is called directly: this runs dozens of times per run.
        """
        entry = self._funcs.get(name)
        if entry is None:
            info = self.eng.exports[name]  # KeyError for a name the module lacks
            func = self._extern(name).of.func
            entry = (ctypes.byref(func), _call_shape(info.params, info.results), func)
            self._funcs[name] = entry
        func_ref, (fmt, floats, array_type, n, result) = entry[0], entry[1]
        try:
            packed = _pack_args(fmt, args) if floats else struct.pack(fmt, *args)
        except struct.error:
            packed = _pack_args(fmt, args)
        buf = array_type.from_buffer_copy(packed)
        # One trap slot per instance, always NULL between calls (a failed call, nested
        # or not, takes the pointer and clears the slot), instead of a new one per call.
        err = _call_unchecked(self.context, func_ref, buf, n, self._trap_ref)
        if err or self._trap:
            trap = ctypes.cast(self._trap, ctypes.c_void_p).value
            ctypes.memset(ctypes.addressof(self._trap), 0, ctypes.sizeof(self._trap))
            pending, self.state.pending = self.state.pending, None
            if pending is not None:
                raise pending
            if err:
                raise wasmtime.WasmtimeError._from_ptr(err)
            raise wasmtime.Trap._from_ptr(ctypes.cast(trap, _TRAP_PTR))
        if result == "i64":
            return buf[0].i64
        if result == "i32":
            return buf[0].i32 & 0xFFFFFFFF
        return 0

    # -- memory ------------------------------------------------------------------------
    def read(self, addr: int, n: int) -> bytes:
        return self.state.read(self.context, addr, n)

    def write(self, addr: int, data: bytes) -> None:
        self.state.write(self.context, addr, data)

    def u32(self, addr: int) -> int:
        return struct.unpack("<I", self.read(addr, 4))[0]

    def alloc(self, data: bytes, *, nul: bool = True) -> int:
        """Copy bytes into a fresh malloc'ed guest buffer (NUL-terminated: JS_Eval needs it)."""
        blob = data + b"\0" if nul else data
        ptr = self.call("malloc", max(len(blob), 1))
        if ptr == 0:
            raise MemoryError("guest malloc failed")
        self.write(ptr, blob)
        return ptr

    def free(self, ptr: int) -> None:
        self.call("free", ptr)

    def constant(self, data: bytes, *, key: str | None = None) -> int:
        """`data` (NUL-terminated) in guest memory, allocated once per instance and never
        freed: names and scratch words every host call needs, for two crossings less."""
        name = key or data
        ptr = self._constants.get(name)
        if ptr is None:
            ptr = self._constants[name] = self.alloc(data)
        return ptr

    def scratch(self, key: str) -> int:
        """A per-instance guest buffer of SCRATCH[key] bytes, malloc'ed on first use and
        never freed; its contents are the host's, only ever written right before the
        one call that reads them (no guest code runs in between)."""
        ptr = self._constants.get(key)
        if ptr is None:
            ptr = self.call("malloc", SCRATCH[key])
            if ptr == 0:
                raise MemoryError("guest malloc failed")
            self._constants[key] = ptr
        return ptr

    @property
    def constants(self) -> dict[str | bytes, int]:
        """Every constant and scratch buffer this instance has (an image keeps them)."""
        return dict(self._constants)

    def adopt_constants(self, constants: dict[str | bytes, int]) -> None:
        """Constants already in memory (restored from an image): no malloc for them."""
        self._constants.update(constants)

    # -- table-hosted native functions ---------------------------------------------------
    def add_function(
        self, callback: object, params: tuple[str, ...], results: tuple[str, ...]
    ) -> int:
        """Put a host function into the exported table; its index is a C function pointer."""
        func = ffi.wasmtime_func_t()
        ty = _functype(self.eng, params, results)
        ffi.wasmtime_func_new_unchecked(
            self.context, ty.ptr(), callback, None, wasi.NO_FINALIZER, ctypes.byref(func)
        )
        init = ffi.wasmtime_val_t()
        init.kind = ffi.WASMTIME_FUNCREF.value
        init.of.funcref = func
        prev = ctypes.c_uint64()
        err = ffi.wasmtime_table_grow(
            self.context, ctypes.byref(self.table), 1, ctypes.byref(init), ctypes.byref(prev)
        )
        if err:
            raise wasmtime.WasmtimeError._from_ptr(err)
        return prev.value

    # -- JS helpers --------------------------------------------------------------------
    def new_string(self, ctx: int, data: bytes) -> int:
        """A JS string of UTF-8 `data`; a short one goes through the scratch buffer (no
        malloc and free), which JS_NewStringLen copies before anything else runs."""
        if len(data) <= SCRATCH["string"]:
            ptr = self.scratch("string")
            self.write(ptr, data)
            return self.call("JS_NewStringLen", ctx, ptr, len(data))
        ptr = self.alloc(data)
        try:
            return self.call("JS_NewStringLen", ctx, ptr, len(data))
        finally:
            self.free(ptr)

    def set_global(self, ctx: int, name: str, value: int) -> None:
        glob = self.call("JS_GetGlobalObject", ctx)
        key = self.alloc(name.encode())
        try:
            self.call("JS_SetPropertyStr", ctx, glob, key, value)  # takes ownership of value
        finally:
            self.free(key)
            self.call("JS_FreeValue", ctx, glob)

    def to_bytes(self, ctx: int, value: int, limit: int | None = None) -> bytes | None:
        """ToString(value) as UTF-8, or None when the conversion threw (exception pending).

        With `limit`, a longer string is not copied out: b"\0" * (limit + 1) stands in
        for it, so a caller enforcing a size cap never pays for a huge copy.
        """
        plen = self.scratch("to_bytes length")
        # Reused across calls: JS_ToCStringLen2 writes the length when it returns, after
        # any guest code it ran (a nested host call using the same word) has finished.
        p = self.call("JS_ToCStringLen2", ctx, plen, value, 0)
        if p == 0:
            return None
        n = self.u32(plen)
        data = b"\0" * (limit + 1) if limit is not None and n > limit else self.read(p, n)
        self.call("JS_FreeCString", ctx, p)
        return data

    def install_stack_limit(self, rt: int, allowance: int) -> None:
        """Set QuickJS's stack check to `allowance` bytes below the stack's top, and prove
        it took.

        JS_SetMaxStackSize stores `stack_size` and derives `stack_limit` from the
        `stack_top` JS_NewRuntime recorded (the shadow stack pointer then, a few frames
        below the top of the stack at the bottom of memory). JSRuntime is opaque, so the
        three adjacent words (allowance, top, top - allowance) are then looked for by
        value in its first bytes: anything but exactly one match fails closed (no run
        without a stack check), whatever a future layout does.
        """
        self.call("JS_SetMaxStackSize", rt, allowance)
        raw = self.read(rt, _RT_SCAN_BYTES)
        words = struct.unpack(f"<{_RT_SCAN_BYTES // 4}I", raw)
        stack_hi = self.eng.stack_top
        stack_lo = stack_hi - _RT_TOP_WINDOW
        hits = [
            i
            for i in range(len(words) - 2)
            if words[i] == allowance
            and stack_lo < words[i + 1] <= stack_hi
            and words[i + 2] == words[i + 1] - allowance
        ]
        if len(hits) != 1:
            raise VmError("JSRuntime stack fields not found: refusing to run without a stack check")
