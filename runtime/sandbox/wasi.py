"""Our own default-deny WASI preview1: the only doors the QuickJS module has, all closed.

Why not wasmtime's built-in WASI: it can only inherit stdio or write it to files, and we
need output captured in memory with per-stream caps. Writing the imports ourselves also
makes the surface reviewable in one screen. They are exactly the eight the engine module
imports (tests/runtime/test_wasi.py and test_engine_build.py fail on any other): the
module has no file, directory, environment or socket import at all (its glue answers
those calls itself, docs/engine.md); the three stdio descriptors, stdin at EOF, a clock
that is either real or fixed, sleeps that advance a virtual clock instead of blocking,
and `proc_exit` ending the run with its code.

The imports are defined once on the process's Linker through wasmtime's unchecked
callback ABI (raw value arrays, no per-call type checks) and find their run's state by
the Store context address in a registry; they never hold a reference to the Store
itself, which is what leaked every Store in the prototype. A Python exception inside a
callback is parked on the run's state and a trap unwinds the guest; the run re-raises
it, so nothing goes through wasmtime-py's process-global LAST_EXCEPTION.
"""

from __future__ import annotations

import ctypes
import struct
import threading
import time
from collections.abc import Callable

import wasmtime
from wasmtime import _bindings
from wasmtime import _ffi as ffi

MODULE = "wasi_snapshot_preview1"

# errno values of WASI preview1
SUCCESS, EBADF, EINVAL, ESPIPE = 0, 8, 28, 70
FILETYPE_CHARACTER_DEVICE = 2
_RIGHT_SEEK, _RIGHT_TELL = 1 << 2, 1 << 5
_STDIO_RIGHTS = 0x1FFFFFFF & ~(_RIGHT_SEEK | _RIGHT_TELL)

#: The fixed clock's wall time: 2026-01-01T00:00:00Z, so reproducible runs see a
#: plausible date and Math.random (seeded from the clock) is deterministic.
FIXED_EPOCH_NS = 1_767_225_600 * 1_000_000_000
#: The largest timestamp WASI can carry (a u64 of nanoseconds, about 584 years). The
#: guest's clock saturates here: a guest that sleeps past it (os.sleep(1.7e13) twice, or
#: thousands of long timers) sees time stand still instead of crashing the host with a
#: `struct.pack` overflow after its granted calls already reached the API.
MAX_TIMESTAMP_NS = (1 << 64) - 1


#: wasmtime's memory accessors, declared here to return plain integers: the bindings'
#: versions return a ctypes pointer that costs a `cast` and a wrapper frame per access,
#: and the sandbox touches guest memory several times per host call.
_memory_data = ctypes.CFUNCTYPE(ctypes.c_size_t, ctypes.c_void_p, ctypes.c_void_p)(
    ("wasmtime_memory_data", _bindings.dll)
)
_memory_data_size = ctypes.CFUNCTYPE(ctypes.c_size_t, ctypes.c_void_p, ctypes.c_void_p)(
    ("wasmtime_memory_data_size", _bindings.dll)
)
_caller_context = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)(
    ("wasmtime_caller_context", _bindings.dll)
)


class ProcExit(Exception):
    """The guest called proc_exit (std.exit, or a fatal abort inside the engine)."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


class GuestMemoryError(Exception):
    """A pointer the guest passed lies outside its linear memory."""


class WasiState:
    """Per-run state behind the imports: captured output, clock and the parked exception."""

    def __init__(self, *, output_bytes: int, clock: str) -> None:
        self.cap = max(0, output_bytes)
        self.out: dict[int, bytearray] = {1: bytearray(), 2: bytearray()}
        self.truncated: dict[int, bool] = {1: False, 2: False}
        self.fixed_clock = clock == "fixed"
        self.virtual_ns = 0
        self.mono_base = time.monotonic_ns()
        self.pending: BaseException | None = None
        self.memory = ffi.wasmtime_memory_t()
        self._memory_ref = 0
        self._mem_base = self._mem_size = 0
        self.has_memory = False
        #: Free slot for the layer above (the host-call bridge) to hang its own state on.
        self.extra: object = None

    # -- memory -------------------------------------------------------------------------
    def attach_memory(self, memory: ffi.wasmtime_memory_t, context) -> None:
        """The instance's exported memory, which every access below goes through.

        Its address is taken once: the engine is configured so that a memory never
        moves (runtime/sandbox/engine.py). Its size only grows, so a cached size can only
        refuse too much, never too little, and is asked for again before refusing.
        """
        self.memory = memory
        self._memory_ref = ctypes.addressof(memory)
        self._mem_base = _memory_data(context, self._memory_ref)
        self._mem_size = _memory_data_size(context, self._memory_ref)
        self.has_memory = True

    def detach_memory(self) -> None:
        """The Store is gone: no access may reach its memory any more."""
        self.has_memory = False
        self._mem_base = self._mem_size = 0

    def _base(self, context) -> tuple[int, int]:
        """(address, size) of the linear memory now, both asked for afresh (and the
        address checked against the one every other access uses)."""
        if not self.has_memory:
            raise GuestMemoryError("memory not attached")
        if _memory_data(context, self._memory_ref) != self._mem_base:
            raise GuestMemoryError("linear memory moved")  # the engine forbids it
        self._mem_size = _memory_data_size(context, self._memory_ref)
        return self._mem_base, self._mem_size

    def _checked(self, context, addr: int, n: int, what: str) -> int:
        """The host address of guest bytes [addr, addr + n), or GuestMemoryError."""
        if not self.has_memory:
            raise GuestMemoryError("memory not attached")
        addr &= 0xFFFFFFFF
        if n < 0 or addr + n > self._mem_size:
            self._mem_size = _memory_data_size(context, self._memory_ref)
            if n < 0 or addr + n > self._mem_size:
                raise GuestMemoryError(f"{what} outside linear memory")
        return self._mem_base + addr

    def read(self, context, addr: int, n: int) -> bytes:
        return ctypes.string_at(self._checked(context, addr, n, "read"), n)

    def write(self, context, addr: int, data: bytes) -> None:
        ctypes.memmove(self._checked(context, addr, len(data), "write"), data, len(data))

    def snapshot(self, context) -> bytes:
        base, size = self._base(context)
        return ctypes.string_at(base, size)

    # -- output and clock ---------------------------------------------------------------
    def emit(self, fd: int, data: bytes) -> None:
        """Keep the first `cap` bytes of each stream and flag anything beyond."""
        buf = self.out[fd]
        room = self.cap - len(buf)
        if len(data) > room:
            self.truncated[fd] = True
            data = data[: max(room, 0)]
        buf += data

    def now_ns(self, clock_id: int) -> int:
        """The guest's clock, saturated at MAX_TIMESTAMP_NS so it always fits a u64."""
        if self.fixed_clock:
            base = FIXED_EPOCH_NS if clock_id == 0 else 0
        elif clock_id == 0:
            base = time.time_ns()
        else:
            base = time.monotonic_ns() - self.mono_base
        return min(MAX_TIMESTAMP_NS, base + self.virtual_ns)

    def sleep(self, ns: int) -> None:
        """Sleeps never block: they move the guest's clock forward (never past a u64)."""
        self.virtual_ns = min(MAX_TIMESTAMP_NS, self.virtual_ns + max(0, ns))


_RUNS: dict[int, WasiState] = {}
_RUNS_LOCK = threading.Lock()


def _addr(context) -> int:
    return ctypes.cast(context, ctypes.c_void_p).value or 0


def register(context, state: WasiState) -> None:
    with _RUNS_LOCK:
        _RUNS[_addr(context)] = state


def unregister(context) -> None:
    with _RUNS_LOCK:
        _RUNS.pop(_addr(context), None)


def new_trap(message: str) -> int:
    msg = message.encode()
    trap = ffi.wasmtime_trap_new(ctypes.create_string_buffer(msg), len(msg))
    return ctypes.cast(trap, ctypes.c_void_p).value or 0


def guarded(fn: Callable[[WasiState, object, ctypes.Array], None]):
    """Wrap `fn(state, context, vals)` as an unchecked callback that never lets Python
    exceptions escape into C: they are parked on the state and become a trap."""

    def callback(_env, caller, vals, _n):
        context = _caller_context(caller)  # the Store context's address, as an int
        state = _RUNS.get(context)
        if state is None:
            return new_trap("host import called outside a run")
        try:
            fn(state, context, vals)
            return 0
        except BaseException as exc:  # re-raised by the run after unwinding
            state.pending = exc
            return new_trap(f"host: {type(exc).__name__}")

    return ffi.wasmtime_func_unchecked_callback_t(callback)


def _u32(vals, i: int) -> int:
    return vals[i].i32 & 0xFFFFFFFF


def _errno(fn: Callable[[WasiState, object, ctypes.Array], int]):
    """An import returning a WASI errno in result slot 0; a bad pointer is EINVAL."""

    def body(state: WasiState, context, vals) -> None:
        try:
            rc = fn(state, context, vals)
        except GuestMemoryError:
            rc = EINVAL
        vals[0].i32 = rc

    return body


# -- the imports --------------------------------------------------------------------------


def _clock_time_get(state, context, vals) -> int:
    clock_id = _u32(vals, 0)
    if clock_id > 3:
        return EINVAL
    state.write(context, _u32(vals, 2), struct.pack("<Q", state.now_ns(clock_id)))
    return SUCCESS


def _stdio_only(fd: int) -> int:
    return SUCCESS if fd in (0, 1, 2) else EBADF


def _fd_close(state, context, vals) -> int:
    return _stdio_only(_u32(vals, 0))


def _fd_fdstat_get(state, context, vals) -> int:
    fd = _u32(vals, 0)
    if fd not in (0, 1, 2):
        return EBADF
    # A character device: wasi-libc then line-buffers stdout, so output written before a
    # trap or timeout has already reached us.
    stat = struct.pack("<BxHxxxxQQ", FILETYPE_CHARACTER_DEVICE, 0, _STDIO_RIGHTS, 0)
    state.write(context, _u32(vals, 1), stat)
    return SUCCESS


def _iovecs(state, context, iovs: int, count: int) -> list[tuple[int, int]]:
    if count > 1024:
        raise GuestMemoryError("too many iovecs")
    raw = state.read(context, iovs, 8 * count)
    return [struct.unpack_from("<II", raw, 8 * i) for i in range(count)]


def _fd_read(state, context, vals) -> int:
    fd = _u32(vals, 0)
    if fd != 0:
        return EBADF
    state.write(context, _u32(vals, 3), struct.pack("<I", 0))  # stdin is at EOF
    return SUCCESS


def _fd_seek(state, context, vals) -> int:
    return ESPIPE if _u32(vals, 0) in (0, 1, 2) else EBADF


def _fd_write(state, context, vals) -> int:
    fd = _u32(vals, 0)
    if fd not in (1, 2):
        return EBADF
    total = 0
    for ptr, length in _iovecs(state, context, _u32(vals, 1), _u32(vals, 2)):
        if length:
            # Copy only what the cap keeps (plus one byte, so emit() flags the rest): a
            # guest writing its whole memory must not make the host copy gigabytes.
            if (ptr + length) > state._base(context)[1]:
                raise GuestMemoryError("write outside linear memory")
            room = max(0, state.cap - len(state.out[fd]))
            state.emit(fd, state.read(context, ptr, min(length, room + 1)))
            total += length
    # Report everything as written even past the cap, so the guest never retries.
    state.write(context, _u32(vals, 3), struct.pack("<I", total & 0xFFFFFFFF))
    return SUCCESS


_SUB_SIZE, _EVENT_SIZE = 48, 32
_EVENTTYPE_CLOCK = 0
_SUBCLOCK_ABSTIME = 1


def _poll_oneoff(state, context, vals) -> int:
    """Clock subscriptions advance the virtual clock; fd subscriptions fail with EBADF."""
    sub_ptr, ev_ptr, nsubs, nevents_ptr = (_u32(vals, i) for i in range(4))
    if nsubs == 0 or nsubs > 64:
        return EINVAL
    raw = state.read(context, sub_ptr, _SUB_SIZE * nsubs)
    events: list[bytes] = []
    clocks: list[tuple[int, int]] = []
    for i in range(nsubs):
        off = i * _SUB_SIZE
        userdata, tag = struct.unpack_from("<QB", raw, off)
        if tag == _EVENTTYPE_CLOCK:
            clock_id, timeout = struct.unpack_from("<IxxxxQ", raw, off + 16)
            (flags,) = struct.unpack_from("<H", raw, off + 40)
            if flags & _SUBCLOCK_ABSTIME:
                timeout = max(0, timeout - state.now_ns(clock_id if clock_id <= 3 else 1))
            clocks.append((timeout, userdata))
        else:
            events.append(struct.pack("<QHBxxxxxQHxxxxxx", userdata, EBADF, tag, 0, 0))
    if not events and clocks:
        timeout, userdata = min(clocks)
        state.sleep(timeout)
        events.append(struct.pack("<QHBxxxxxQHxxxxxx", userdata, SUCCESS, _EVENTTYPE_CLOCK, 0, 0))
    state.write(context, ev_ptr, b"".join(events))
    state.write(context, nevents_ptr, struct.pack("<I", len(events)))
    return SUCCESS


def _proc_exit(state, context, vals) -> None:
    raise ProcExit(vals[0].i32)


# name -> (params, results, body)
I32, I64 = "i32", "i64"
IMPORTS: dict[str, tuple[tuple[str, ...], tuple[str, ...], Callable]] = {
    "clock_time_get": ((I32, I64, I32), (I32,), _errno(_clock_time_get)),
    "fd_close": ((I32,), (I32,), _errno(_fd_close)),
    "fd_fdstat_get": ((I32, I32), (I32,), _errno(_fd_fdstat_get)),
    "fd_read": ((I32, I32, I32, I32), (I32,), _errno(_fd_read)),
    "fd_seek": ((I32, I64, I32, I32), (I32,), _errno(_fd_seek)),
    "fd_write": ((I32, I32, I32, I32), (I32,), _errno(_fd_write)),
    "poll_oneoff": ((I32, I32, I32, I32), (I32,), _errno(_poll_oneoff)),
    "proc_exit": ((I32,), (), _proc_exit),
}

_VALTYPES = {I32: wasmtime.ValType.i32, I64: wasmtime.ValType.i64}
# ctypes callback objects must outlive every Store that may call them: keep them here.
_CALLBACKS: list[object] = []
NO_FINALIZER = ctypes.cast(0, ctypes.CFUNCTYPE(None, ctypes.c_void_p))


def functype(params: tuple[str, ...], results: tuple[str, ...]) -> wasmtime.FuncType:
    return wasmtime.FuncType([_VALTYPES[p]() for p in params], [_VALTYPES[r]() for r in results])


def define_imports(linker: wasmtime.Linker) -> None:
    """Define every import of IMPORTS on `linker` (once per process)."""
    module = MODULE.encode()
    for name, (params, results, body) in IMPORTS.items():
        cb = guarded(body)
        _CALLBACKS.append(cb)
        ty = functype(params, results)
        raw_name = name.encode()
        err = ffi.wasmtime_linker_define_func_unchecked(
            linker.ptr(),
            ctypes.create_string_buffer(module),
            len(module),
            ctypes.create_string_buffer(raw_name),
            len(raw_name),
            ty.ptr(),
            cb,
            None,
            NO_FINALIZER,
        )
        if err:
            raise wasmtime.WasmtimeError._from_ptr(err)
