"""The one wasmtime engine, the compiled QuickJS module and the epoch ticker of a process.

Why a process-wide singleton: compiling the 1 MB module with Cranelift takes about
1.2 s, so it happens once per process at most, and once per machine when the on-disk
cache is warm (deserialising takes milliseconds). Every run then gets a fresh Store
instantiated from the same `InstancePre`, which is what makes per-run isolation cheap.

Trust: the module is built at install from pinned registry sources
(runtime/sandbox/engine_build/, docs/engine.md) and its bytes are pinned by SHA-256. A
different build could export a different C API or lay out memory differently, and the
sandbox pokes at both, so
anything else is refused with a one-line `EngineError` instead of being half-trusted.
The serialized artefact in the cache is native code wasmtime will map and execute, so
it is written atomically and sealed with an HMAC-SHA256 under the per-user cache secret
(specgen/cache_dir.py), checked before wasmtime sees a byte; a corrupt, truncated,
unsealed or incompatible entry is recompiled, never fatal.
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import wasmtime
from wasmtime import _ffi as ffi

from runtime.errors import EngineError
from runtime.sandbox import wasi, wasm_layout
from runtime.sandbox.engine_file import (
    MAX_WASM_STACK,
    MEMORY_RESERVATION_BYTES,
    STACK_BYTES,
    cache_path,
    verify_wasm,
    wasm_path,
)
from runtime.sandbox.terms import MIN_MEMORY_MB
from specgen.cache_dir import read_sealed, write_sealed

#: Shadow-stack bytes QuickJS may use before throwing RangeError (about 0.3 x the native
#: stack: one JS call level costs ~400 B of shadow stack and ~900 B of native stack).
JS_STACK_ALLOWANCE = 640 << 10
#: Epoch period: the timeout granularity and the ticker's wake-up rate while runs exist.
EPOCH_TICK_S = 0.005

#: The pooling allocator: every run's instance comes from a pool of preallocated slots,
#: and a slot's pages stay mapped between runs (up to POOL_KEEP_RESIDENT_BYTES of its
#: memory; wasmtime resets exactly the pages a run dirtied to the module's initial image
#: before the slot is used again, so each run still starts from a fresh instance). On
#: demand, every run mapped fresh pages and paid a page fault for each one it touched
#: (~45 for restoring an image, ~2.5 us each in a VM), and unmapped them all at the end.
#: POOL_SLOTS bounds the instances alive at once in one process (runs in flight plus an
#: image being built); one more fails to instantiate and ends as a trap.
POOL_SLOTS = 64
POOL_MAX_MEMORY_BYTES = 4 << 30  # wasm32's whole space; each run's limit is the Store's
POOL_KEEP_RESIDENT_BYTES = 4 << 20
POOL_TABLE_ELEMENTS = 4096  # the module's table has 548; the sandbox adds 3 per run


def load_original_wasm(path: Path | None = None) -> bytes:
    path = path or wasm_path()
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise EngineError(f"engine refused: cannot read {path}: {exc.strerror}") from None
    return verify_wasm(data)


def _config(*, pooled: bool) -> wasmtime.Config:
    cfg = wasmtime.Config()
    cfg.epoch_interruption = True
    cfg.max_wasm_stack = MAX_WASM_STACK
    # A memory that never moves: the sandbox keeps its address for the instance's
    # lifetime (runtime/sandbox/wasi.py) instead of asking wasmtime on every access. The
    # reservation is wasm32's whole space, so no limit a run may ask for is lost.
    cfg.memory_reservation = MEMORY_RESERVATION_BYTES
    cfg.memory_may_move = False
    if pooled:
        pool = ffi.wasmtime_pooling_allocation_config_new()
        try:
            for setter, value in (
                ("total_memories", POOL_SLOTS),
                ("total_tables", POOL_SLOTS),
                ("total_core_instances", POOL_SLOTS),
                ("total_stacks", 0),  # async stacks: the sandbox never runs async
                ("max_memory_size", POOL_MAX_MEMORY_BYTES),
                ("table_elements", POOL_TABLE_ELEMENTS),
                ("linear_memory_keep_resident", POOL_KEEP_RESIDENT_BYTES),
                ("table_keep_resident", POOL_TABLE_ELEMENTS * 8),
            ):
                getattr(ffi, f"wasmtime_pooling_allocation_config_{setter}_set")(pool, value)
            ffi.wasmtime_pooling_allocation_strategy_set(cfg.ptr(), pool)
        finally:
            ffi.wasmtime_pooling_allocation_config_delete(pool)
    return cfg


#: Address space the pool must find free, with room to spare: wasmtime maps about
#: 258 GiB for POOL_SLOTS memories of 4 GiB plus their guards and the tables.
POOL_ADDRESS_SPACE_BYTES = POOL_SLOTS * (POOL_MAX_MEMORY_BYTES + (2 << 30))


def pooling_possible() -> bool:
    """Can this process reserve the pool's address space? wasmtime aborts the process
    (a panic, not an exception: no run ends, no audit is written) when it cannot. So a
    limited RLIMIT_AS (`ulimit -v`) means no pool, and so does an address space too full
    to hold it, which an inaccessible, unbacked mapping of that size probes for."""
    try:
        import mmap
        import resource
    except ImportError:  # not a POSIX host
        return False
    soft, _hard = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY:
        return False
    try:
        probe = mmap.mmap(
            -1, POOL_ADDRESS_SPACE_BYTES, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, prot=0
        )
    except (OSError, OverflowError, ValueError):
        return False
    probe.close()
    return True


def make_engine(*, pooled: bool = True) -> wasmtime.Engine:
    """The engine: pooled (see POOL_SLOTS) when asked for and possible, else instances
    are allocated on demand. The compiled module is the same for both."""
    return wasmtime.Engine(_config(pooled=pooled and pooling_possible()))


def _read_cached(engine: wasmtime.Engine, path: Path) -> wasmtime.Module | None:
    """The cached module, or None when it is missing, corrupt, incompatible or writable
    by someone else.

    An entry is native code the host process will run: it is deserialised only when its
    HMAC under the per-user cache secret is right (specgen/cache_dir.py), so a file
    planted by a checkout or a restored cache, ours by ownership, is never loaded; and
    `read_sealed` reads the entry only if it and its
    folder are ours alone, checked on the open folder and file themselves, so a folder
    swapped between the check and the read is never what gets deserialised."""
    body = read_sealed(path)
    if body is None:
        return None
    try:
        return wasmtime.Module.deserialize(engine, body)
    except (wasmtime.WasmtimeError, ValueError, TypeError):
        return None


def _write_cached(module: wasmtime.Module, path: Path) -> None:
    """Atomic: a reader sees the old entry, no entry, or the whole new one. Best effort."""
    write_sealed(path, bytes(module.serialize()))


def load_module(
    engine: wasmtime.Engine, *, use_cache: bool = True
) -> tuple[wasmtime.Module, str, int]:
    """(module, how, stack_top): how is "cache" or "compiled"; stack_top is the initial
    `__stack_pointer`, which the sandbox needs to find QuickJS's stack fields."""
    # The pinned wasm is verified even on a cache hit: the installed file must still be
    # the one the cache key names. Its layout is checked the same way (a few ms).
    original = load_original_wasm()
    stack_top = wasm_layout.check_layout(original, STACK_BYTES).stack_top
    path = cache_path()
    if use_cache:
        module = _read_cached(engine, path)
        if module is not None:
            return module, "cache", stack_top
    try:
        module = wasmtime.Module(engine, original)
    except wasmtime.WasmtimeError as exc:
        raise EngineError(f"engine refused: the module does not compile: {exc}") from None
    if use_cache:
        _write_cached(module, path)
    return module, "compiled", stack_top


@dataclass(frozen=True)
class ExportInfo:
    index: int
    params: tuple[str, ...]
    results: tuple[str, ...]


class EpochTicker:
    """Advances the engine epoch every EPOCH_TICK_S while at least one run is active.

    A Store's deadline is counted in ticks, so wall time (including time the guest spends
    blocked in a host call or a WASI callback) is what ends a run. Idle processes do not
    wake up: the thread sleeps on a condition until a run starts.
    """

    def __init__(self, engine: wasmtime.Engine) -> None:
        self._engine = engine
        self._active = 0
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._loop, name="plimsoll-epoch", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        last: float | None = None
        while True:
            with self._cond:
                while self._active == 0:
                    self._cond.wait()
                    last = None
            if last is None:
                last = time.monotonic()
            time.sleep(EPOCH_TICK_S)
            # A late wake-up (a loaded machine) catches up, so deadlines stay wall-clock.
            ticks = max(1, int((time.monotonic() - last) / EPOCH_TICK_S))
            for _ in range(ticks):
                self._engine.increment_epoch()
            last += ticks * EPOCH_TICK_S

    @contextlib.contextmanager
    def active(self):
        with self._cond:
            self._active += 1
            self._cond.notify()
        try:
            yield
        finally:
            with self._cond:
                self._active -= 1


class QjsEngine:
    """Engine + compiled module + linked WASI imports, shared by every run of the process."""

    def __init__(self, *, use_cache: bool = True, pooled: bool = True) -> None:
        self.pooled = pooled and pooling_possible()
        self.engine = make_engine(pooled=self.pooled)
        #: Free slots of the pool; with none left, instances come from `_overflow`.
        self._slots = threading.BoundedSemaphore(POOL_SLOTS) if self.pooled else None
        self._overflow: QjsEngine | None = None
        self._overflow_lock = threading.Lock()
        self.module, self.loaded_from, self.stack_top = load_module(
            self.engine, use_cache=use_cache
        )
        self.exports: dict[str, ExportInfo] = {}
        for i, exp in enumerate(self.module.exports):
            ty = exp.type
            if isinstance(ty, wasmtime.FuncType):
                self.exports[exp.name] = ExportInfo(
                    i, tuple(str(p) for p in ty.params), tuple(str(r) for r in ty.results)
                )
            else:
                self.exports[exp.name] = ExportInfo(i, (), ())
        #: The guest memory the module needs before any JS runs (its declared minimum,
        #: the 1 MiB stack included); a limit below it cannot even instantiate.
        self.memory_min_bytes = _memory_min_bytes(self.module)
        linker = wasmtime.Linker(self.engine)
        wasi.define_imports(linker)
        self.pre = linker.instantiate_pre(self.module)
        self._linker = linker  # keeps the import definitions alive with the InstancePre
        self.ticker = EpochTicker(self.engine)

    @contextlib.contextmanager
    def instance(self):
        """The engine one new instance comes from, its epoch ticker running meanwhile.

        This engine while its pool has a free slot (held until the block ends, by which
        time the instance's Store must be dropped); beyond POOL_SLOTS instances at once,
        an on-demand twin of it (same module, built on first need), so a burst of runs
        is never refused for want of a slot.
        """
        if self._slots is None:
            with self.ticker.active():
                yield self
            return
        if not self._slots.acquire(blocking=False):
            overflow = self._overflow_engine()
            with overflow.ticker.active():
                yield overflow
            return
        try:
            with self.ticker.active():
                yield self
        finally:
            self._slots.release()

    def expire(self, seconds: float) -> None:
        """Move the epoch of this engine (and its overflow twin) past every deadline set
        within `seconds` from now, so each of their guests traps at its next check as if
        its time were up. The one thing another thread may do to a running guest: a
        Store belongs to the thread running it, the epoch to the engine."""
        ticks = math.ceil(max(0.0, seconds) / EPOCH_TICK_S) + 2
        for engine in (self, self._overflow):
            if engine is not None:
                for _ in range(ticks):
                    engine.engine.increment_epoch()

    def _overflow_engine(self) -> QjsEngine:
        with self._overflow_lock:
            if self._overflow is None:
                self._overflow = QjsEngine(pooled=False)
            return self._overflow


def _memory_min_bytes(module: wasmtime.Module) -> int:
    for exp in module.exports:
        if isinstance(exp.type, wasmtime.MemoryType):
            size = int(exp.type.limits.min) * int(exp.type.page_size)
            if size > MIN_MEMORY_MB << 20:
                raise EngineError(
                    f"engine refused: the module needs {size} bytes of memory, "
                    f"more than MIN_MEMORY_MB ({MIN_MEMORY_MB} MiB)"
                )
            return size
    raise EngineError("engine refused: the module exports no memory")


_LOCK = threading.Lock()
_ENGINE: QjsEngine | None = None


def expire_runs(seconds: float) -> None:
    """End every run of this process whose deadline is within `seconds` (see
    `QjsEngine.expire`); nothing to do before the engine is loaded, as no run exists."""
    if _ENGINE is not None:
        _ENGINE.expire(seconds)


def get_engine() -> QjsEngine:
    """The process's engine, created on first use (thread-safe)."""
    global _ENGINE
    if _ENGINE is None:
        with _LOCK:
            if _ENGINE is None:
                _ENGINE = QjsEngine()
    return _ENGINE


__all__ = [
    "EngineError",
    "QjsEngine",
    "cache_path",
    "expire_runs",
    "get_engine",
    "load_module",
    "verify_wasm",
]
