"""The sandbox: agent JavaScript in a fresh QuickJS-in-WebAssembly instance, one way out.

`run(code, grant=, handler=, limits=)` takes source, a `HostHandler` and limits and knows
nothing about grants, keys or HTTP: this package never imports `runtime.broker` (a test
draws the import graph to keep it so). Modules: `runner` (a run and its limits), `bridge`
(the host call), `envelope` (decoding the guest's request), `guest` (the source a run
evaluates), `vm` (one QuickJS instance), `engine` (the process's wasmtime engine),
`wasm_layout`, `wasi`, `thread_stack`.
"""

from runtime.sandbox.bridge import host_call_deadline
from runtime.sandbox.runner import (
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
    run,
)

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
    "host_call_deadline",
    "run",
]
