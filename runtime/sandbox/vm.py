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
import struct

import wasmtime
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

#: JSRuntime field offsets are found at run time (see `install_stack_limit`), but only in
#: this window, so a different layout fails closed instead of poking a random word.
_RT_SCAN_BYTES = 512
_RT_TOP_WINDOW = 16 << 10


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
        self._funcs: dict[str, tuple[ffi.wasmtime_func_t, tuple[str, ...], tuple[str, ...]]] = {}
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
        state.memory = self._extern("memory").of.memory
        state.has_memory = True
        self.table = self._extern(engine_mod.wasm_patch.TABLE_EXPORT).of.table

    def close(self) -> None:
        wasi.unregister(self.context)
        self.store = None  # type: ignore[assignment]  # dropping the Store unmaps the memory

    # -- exports -----------------------------------------------------------------------
    def _extern(self, name: str) -> ffi.wasmtime_extern_t:
        info = self.eng.exports[name]
        item = ffi.wasmtime_extern_t()
        name_ptr = ctypes.POINTER(ctypes.c_char)()
        name_len = ctypes.c_size_t()
        ok = ffi.wasmtime_instance_export_nth(
            self.context,
            ctypes.byref(self.instance),
            info.index,
            ctypes.byref(name_ptr),
            ctypes.byref(name_len),
            ctypes.byref(item),
        )
        if not ok:
            raise VmError(f"export {name} missing")
        return item

    def call(self, name: str, *args: int) -> int:
        """Call export `name` with integer arguments; returns its single result (or 0)."""
        entry = self._funcs.get(name)
        if entry is None:
            info = self.eng.exports[name]
            entry = (self._extern(name).of.func, info.params, info.results)
            self._funcs[name] = entry
        func, params, results = entry
        n = max(len(params), len(results), 1)
        buf = (ffi.wasmtime_val_raw_t * n)()
        for i, (arg, ty) in enumerate(zip(args, params, strict=True)):
            if ty == "i64":
                buf[i].i64 = s64(arg)
            elif ty == "f64":
                buf[i].f64 = arg
            else:
                buf[i].i32 = arg
        trap = ctypes.POINTER(ffi.wasm_trap_t)()
        err = ffi.wasmtime_func_call_unchecked(
            self.context, ctypes.byref(func), buf, n, ctypes.byref(trap)
        )
        if err or trap:
            pending, self.state.pending = self.state.pending, None
            if pending is not None:
                raise pending
            if err:
                raise wasmtime.WasmtimeError._from_ptr(err)
            raise wasmtime.Trap._from_ptr(trap)
        if not results:
            return 0
        return buf[0].i64 if results[0] == "i64" else buf[0].i32 & 0xFFFFFFFF

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

    # -- table-hosted native functions ---------------------------------------------------
    def add_function(
        self, callback: object, params: tuple[str, ...], results: tuple[str, ...]
    ) -> int:
        """Put a host function into the exported table; its index is a C function pointer."""
        func = ffi.wasmtime_func_t()
        ty = wasi.functype(params, results)
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
        plen = self.call("malloc", 4)
        if plen == 0:
            raise MemoryError("guest malloc failed")
        try:
            p = self.call("JS_ToCStringLen2", ctx, plen, value, 0)
            if p == 0:
                return None
            n = self.u32(plen)
            data = b"\0" * (limit + 1) if limit is not None and n > limit else self.read(p, n)
            self.call("JS_FreeCString", ctx, p)
            return data
        finally:
            self.free(plen)

    def install_stack_limit(self, rt: int, allowance: int) -> None:
        """Turn QuickJS's stack check back on (the WASI build leaves it off).

        In QuickJS-NG 0.15 JSRuntime holds three adjacent words `stack_size`,
        `stack_top`, `stack_limit`; under __wasi__ size and limit are 0 ("no limit") and
        top is the shadow stack pointer when the runtime was created, which lies inside
        the relocated stack. The triple (0, top, 0) is found by value and set to
        (allowance, top, top - allowance). Anything but exactly one match fails closed:
        no run without a stack check.
        """
        raw = self.read(rt, _RT_SCAN_BYTES)
        words = struct.unpack(f"<{_RT_SCAN_BYTES // 4}I", raw)
        stack_hi = self.eng.stack_top
        # JS_NewRuntime runs a few frames below the top of the fresh stack.
        stack_lo = stack_hi - _RT_TOP_WINDOW
        hits = [
            i
            for i in range(len(words) - 2)
            if words[i] == 0 and words[i + 2] == 0 and stack_lo < words[i + 1] <= stack_hi
        ]
        if len(hits) != 1:
            raise VmError("JSRuntime stack fields not found: refusing to run without a stack check")
        i, top = hits[0], words[hits[0] + 1]
        self.write(rt + 4 * i, struct.pack("<III", allowance, top, top - allowance))
