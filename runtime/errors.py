"""One refusal hierarchy: every error the runtime raises to its callers.

A `Refusal` knows how it ends a command (`exit_code`) and how it prints itself (`line`,
`show()`), so `specgen run` (and later the MCP server) refuse through one path instead
of each catching a list of unrelated classes. `str()` of each class is unchanged, so
every message is byte-identical to what it was before the hierarchy existed; the
builtin base each class had (ValueError, RuntimeError) is kept as a second base, so a
caller catching that still catches it.

    Refusal                       exit 1, one line `specgen: <line>` on stderr
    ├── RunInputError             `specgen run`'s own arguments (code file, limits)
    ├── GrantsError (ValueError)  the grants file, a profile, a selection, --base-url
    ├── TraceIdError (ValueError) a caller's trace_id the audit line will not carry
    └── EngineError (RuntimeError) the WebAssembly engine cannot be trusted or set up
        ├── PatchError (ValueError) the engine module lacks the layout the sandbox needs
        └── VmError                 the engine misbehaved in a way no guest can cause

Not refusals, on purpose: what a guest does (an exception, a timeout, a trap, exit(n))
is the run's result, never an exception; the sandbox's internal signals (`ProcExit`,
`GuestMemoryError`) never leave `sandbox.run()`; a refused host call is a value
(`EnvelopeRefusal`, a 4xx/5xx `HostReply`) the guest receives.
"""

from __future__ import annotations

import sys
from typing import IO

from specgen.quoting import capped, escaped_line

#: The exit code of every refusal: refused input, before or instead of a run.
EXIT_REFUSED = 1


#: Escape what a reader cannot see, so a refusal line stays one line (specgen.quoting).
one_line = escaped_line


class Refusal(Exception):
    """Input the runtime refuses; `str()` is the message, `line` its first line."""

    #: The process exit code when a command ends with this refusal.
    exit_code: int = EXIT_REFUSED

    @property
    def line(self) -> str:
        """The message as one line (a lower layer's text may carry more), its middle cut
        when it quotes something very long (`specgen.quoting.capped`)."""
        message = str(self)
        return capped(message.splitlines()[0]) if message else message

    def show(self, file: IO[str] | None = None) -> None:
        """Print `specgen: <line>` on stderr (or `file`)."""
        out = file if file is not None else sys.stderr
        out.write(f"specgen: {self.line}\n")
        out.flush()


class RunInputError(Refusal):
    """An argument of `specgen run` itself (the code file, a limit) refused."""


class GrantsError(Refusal, ValueError):
    """A grants file, profile or selection refused; str() is the whole one-line message.

    Operator text (a route line, a file name) is echoed into messages; any control
    character in it is escaped here so a refusal can never span two lines.
    """

    def __init__(self, message: str) -> None:
        super().__init__(one_line(message))


class TraceIdError(Refusal, ValueError):
    """A caller-supplied trace_id the audit line will not carry."""


class EngineError(Refusal, RuntimeError):
    """The engine cannot be set up; str() is a one-line reason naming what was refused."""


class PatchError(EngineError, ValueError):
    """The engine module does not have the layout the sandbox relies on (wasm_layout.py)."""


class VmError(EngineError):
    """The engine misbehaved in a way no guest program should be able to cause."""


__all__ = [
    "EXIT_REFUSED",
    "EngineError",
    "GrantsError",
    "PatchError",
    "Refusal",
    "RunInputError",
    "TraceIdError",
    "VmError",
]
