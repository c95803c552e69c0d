"""What a run is asked and what it answers: its limits, the guest's view of a grant,
its result and exit codes.

Plain data with no engine behind it, so a process that only starts engine processes
and reads their results (the broker's, on the worker and gvisor tiers) names these
without loading wasmtime or the sandbox's modules, and the engine's process reads the
same definitions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from specgen import routes

DEFAULT_TIMEOUT_S, MAX_TIMEOUT_S = 5.0, 30.0
DEFAULT_MEMORY_MB, MAX_MEMORY_MB = 256, 4096
#: The smallest memory limit a run accepts: the module's declared memory, which the
#: build sets to exactly this (engine_build/build.py, INITIAL_MEMORY_BYTES; the 1 MiB
#: stack included). The engine refuses to load a module needing more, so a limit at or
#: above this always instantiates; below it is refused up front (`specgen run
#: --memory-mb`, the session), never a wasm error.
MIN_MEMORY_MB = 2
EXIT_OK, EXIT_ERROR, EXIT_TIMEOUT, EXIT_TRAP = 0, 1, 124, 134
#: The run was ended by a fault in the host, not by the guest (EX_SOFTWARE of
#: sysexits.h): the result keeps the output captured so far and names the fault's type
#: in `internal_error`; the session still writes the broker's trace and audit.
EXIT_INTERNAL = 70
#: Started calls one run may hold unsettled. A started call is settled only when the
#: guest yields to the loop, so a guest starting calls in a loop that never awaits is
#: stopped here (RangeError) instead of growing the host. Far above what the budget lets
#: reach a handler: most such calls are refusals answered at once.
MAX_PENDING_CALLS = 10_000


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
    #: Host calls the sandbox refused itself before any handler saw them (envelope 400
    #: and 413, its own 429 budget, 503 without a handler), so the audit can count them.
    refused_calls: int = 0
    #: The type name of the host fault that ended the run (exit EXIT_INTERNAL), else "".
    internal_error: str = ""
