"""Run the sandbox only on a thread whose native stack can hold it.

Why: wasmtime runs guest code on the calling thread's own stack and lets it use up to
`engine.MAX_WASM_STACK` (2 MiB) of it, counted from where the host entered, before it
traps "call stack exhausted". On a thread whose whole stack is smaller (a thread started
after `threading.stack_size(1 << 20)`, a musl build's 128 KiB default, a main thread under
`ulimit -s 1024`), deep guest recursion runs off the end of the real stack first and the
whole host process dies with SIGSEGV, taking every other run with it. So a run whose
thread cannot be shown to have `NEEDED_BYTES` of stack is moved to a helper thread created
with `RUN_THREAD_STACK_BYTES`, and the caller waits for it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import threading
from collections.abc import Callable
from typing import TypeVar

from runtime.sandbox.engine import MAX_WASM_STACK

T = TypeVar("T")

#: Stack a run needs: wasm's allowance plus room for the host frames around and between
#: its calls (Python, ctypes, wasmtime trampolines, nested host calls).
NEEDED_BYTES = MAX_WASM_STACK + (2 << 20)
#: Stack of a helper thread: comfortably above NEEDED_BYTES.
RUN_THREAD_STACK_BYTES = 16 << 20

_local = threading.local()
_spawn_lock = threading.Lock()


@functools.cache
def _libc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None)
        libc.pthread_self.restype = ctypes.c_ulong
        libc.pthread_getattr_np.argtypes = [ctypes.c_ulong, ctypes.c_void_p]
        libc.pthread_attr_getstack.argtypes = [
            ctypes.c_void_p,
            ctypes.POINTER(ctypes.c_void_p),
            ctypes.POINTER(ctypes.c_size_t),
        ]
        libc.pthread_attr_destroy.argtypes = [ctypes.c_void_p]
    except (OSError, AttributeError):
        return None
    return libc


def stack_bytes_of_this_thread() -> int | None:
    """The current thread's whole stack size, or None where it cannot be read."""
    cached = getattr(_local, "stack_bytes", -1)
    if cached != -1:
        return cached
    size: int | None = None
    libc = _libc()
    if libc is not None:
        attr = ctypes.create_string_buffer(256)  # larger than any libc's pthread_attr_t
        if libc.pthread_getattr_np(libc.pthread_self(), attr) == 0:
            addr, length = ctypes.c_void_p(), ctypes.c_size_t()
            if libc.pthread_attr_getstack(attr, ctypes.byref(addr), ctypes.byref(length)) == 0:
                size = length.value
            libc.pthread_attr_destroy(attr)
    _local.stack_bytes = size
    return size


def call_with_enough_stack(fn: Callable[[], T]) -> T:
    """`fn()` on this thread if its stack is big enough, else on a helper thread."""
    size = stack_bytes_of_this_thread()
    if size is not None and size >= NEEDED_BYTES:
        return fn()
    outcome: list[T] = []
    failure: list[BaseException] = []

    def target() -> None:
        try:
            outcome.append(fn())
        except BaseException as exc:  # handed back to the caller below
            failure.append(exc)

    with _spawn_lock:  # stack_size() is process-wide: set it only around our own start()
        previous = threading.stack_size(RUN_THREAD_STACK_BYTES)
        try:
            worker = threading.Thread(target=target, name="plimsoll-run", daemon=True)
            worker.start()
        finally:
            threading.stack_size(previous)
    worker.join()
    if failure:
        raise failure[0]
    return outcome[0]


__all__ = ["NEEDED_BYTES", "call_with_enough_stack", "stack_bytes_of_this_thread"]
