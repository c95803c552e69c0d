"""The sandbox: agent JavaScript in a fresh QuickJS-in-WebAssembly instance, one way out.

`run(code, grant=, handler=, limits=)` takes source, a `HostHandler` and limits and knows
nothing about grants, keys or HTTP: this package never imports `runtime.broker` (a test
draws the import graph to keep it so). Modules: `runner` (a run and its limits), `bridge`
(the host call), `envelope` (decoding the guest's request), `guest` (the source a run
evaluates), `vm` (one QuickJS instance), `engine` (the process's wasmtime engine),
`engine_file` (the pinned module and its cache entry, named without wasmtime), `terms`
(the limits, the guest's grant and the result, as plain data), `wasm_layout`, `wasi`,
`thread_stack`.

`run`, `host_call_deadline` and `expire_runs` resolve on first use (PEP 562): a process that only
starts engine processes and reads their results (the broker's, on the worker and
gvisor tiers) names the plain data of `terms` and never loads wasmtime.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from runtime.sandbox.terms import (
    DEFAULT_MEMORY_MB,
    DEFAULT_TIMEOUT_S,
    EXIT_ERROR,
    EXIT_INTERNAL,
    EXIT_OK,
    EXIT_TIMEOUT,
    EXIT_TRAP,
    MAX_MEMORY_MB,
    MAX_TIMEOUT_S,
    MIN_MEMORY_MB,
    GuestGrant,
    Limits,
    RunResult,
)

if TYPE_CHECKING:
    from runtime.sandbox.bridge import host_call_deadline
    from runtime.sandbox.engine import expire_runs
    from runtime.sandbox.runner import run

#: The names that need the engine, and the module each lives in.
_ENGINE_SIDE = {
    "run": "runtime.sandbox.runner",
    "host_call_deadline": "runtime.sandbox.bridge",
    "expire_runs": "runtime.sandbox.engine",
}


def __getattr__(name: str) -> Any:
    module = _ENGINE_SIDE.get(name)
    if module is None:
        raise AttributeError(f"module 'runtime.sandbox' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


__all__ = [
    "DEFAULT_MEMORY_MB",
    "DEFAULT_TIMEOUT_S",
    "EXIT_ERROR",
    "EXIT_INTERNAL",
    "EXIT_OK",
    "EXIT_TIMEOUT",
    "EXIT_TRAP",
    "MAX_MEMORY_MB",
    "MAX_TIMEOUT_S",
    "MIN_MEMORY_MB",
    "GuestGrant",
    "Limits",
    "RunResult",
    "expire_runs",
    "host_call_deadline",
    "run",
]
