"""Where every execute's audit line goes: stderr, and an append-only file when asked.

A server config (runtime/mcp/config.py) may also send it to stdout (HTTP only: on
stdio, stdout is the MCP channel), send it as OpenTelemetry log records, or keep it off
stderr.

The line is the one `specgen run` prints (`runtime.audit_line`), one JSON object per
line (JSON Lines). Each line leaves in one `os.write` of its whole bytes: on the file's
O_APPEND descriptor the kernel appends it in one piece, so two servers sharing a file
never interleave within a line, and the file is never truncated. stderr gets the same
bytes in one write too (a pipe keeps a write of up to PIPE_BUF bytes whole against
other writers; a longer audit line is as whole as the kernel makes it).

A file that cannot be written is not skipped silently: `failed` turns on and the
server refuses every later execute, since a run the operator cannot see afterwards is
one the grant should not have allowed. stderr is best effort (an MCP client may close
its end of the server's log pipe at any time), and never stops the file's line.
"""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path

import orjson

from runtime import telemetry

#: Bits of a newly created audit file: the operator's only; the record is metadata but
#: says which routes an agent used.
FILE_MODE = 0o600


class AuditFileError(OSError):
    """The audit file cannot be opened for appending; the text is one line."""


class AuditLog:
    """One server's audit sink; `write` is thread-safe."""

    def __init__(
        self,
        path: Path | None = None,
        stderr_fd: int = 2,
        *,
        stderr: bool = True,
        stdout: bool = False,
        otel: bool = False,
    ) -> None:
        #: The descriptors each line is written to, best effort (stderr, stdout).
        self._streams = tuple(fd for fd, on in ((stderr_fd, stderr), (1, stdout)) if on)
        self._otel = otel
        self._lock = threading.Lock()
        self.failed = False
        self._fd: int | None = None
        if path is not None:
            flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC
            try:
                self._fd = os.open(path, flags, FILE_MODE)
            except OSError as exc:
                raise AuditFileError(f"--audit {str(path)!r}: {exc.strerror or exc}") from None

    def write(self, line: str) -> bool:
        """Append `line` (one audit record, no newline) to the file and to stderr.

        True when the file (if any) took the whole line; after a failed file write the
        log stays `failed`."""
        data = line.encode("utf-8") + b"\n"
        with self._lock:
            ok = True
            if self._fd is not None:
                try:
                    _write_whole(self._fd, data)
                except OSError:
                    self.failed = ok = False
            for fd in self._streams:
                with contextlib.suppress(OSError):
                    _write_whole(fd, data)
        if self._otel:
            with contextlib.suppress(Exception):  # an exporter's fault never stops a run
                telemetry.emit_audit(orjson.loads(line))
        return ok

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None


def _write_whole(fd: int, data: bytes) -> None:
    """One os.write of the whole line; the kernel returns less only when the disk is
    full or a signal interrupted it, and then the rest follows rather than being lost."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        if written <= 0:
            raise OSError("audit write made no progress")
        view = view[written:]
