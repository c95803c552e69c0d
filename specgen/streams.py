"""Standard streams a command was started without (`specgen ... >&-`, `<&-`).

Python starts with `sys.stdout` (or stdin, stderr) set to None when its descriptor is
closed: click then prints nothing and says nothing, so `specgen emit allow doc.json
>&-` exited 0 having written nothing, and code that reads or writes the stream fails
with an AttributeError far from the cause. Worse, the next file the process opens takes
the free descriptor, so whatever is later written to "stdout" (by this process or a
child it starts) lands in that file.

`guard()` runs first in the console entry point: each closed descriptor is taken by the
null device, so no file can land on it, and its Python stream becomes one that fails
every read or write with EBADF, "stdout is closed": a command whose result goes there
reports that in one line, as any other read or write error (`specgen run` drops the
guest's output as it does for a closed pipe, and its audit line still reaches stderr);
but stderr, where that line would go: what is
written to a closed stderr is dropped, and the exit status still says how it went).
`CLOSED` keeps which were closed, for a command that needs one at its start (the MCP
server on stdio).
"""

from __future__ import annotations

import errno
import io
import os
import sys

#: The standard descriptors (0, 1, 2) that were closed when the process started.
CLOSED: set[int] = set()

_NAMES = {0: "stdin", 1: "stdout", 2: "stderr"}


class ClosedStream(io.TextIOBase):
    """A standard stream the process was started without: every use fails with EBADF."""

    def __init__(self, fd: int) -> None:
        super().__init__()
        self.name = _NAMES[fd]

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return "utf-8"

    def _closed(self) -> OSError:
        return OSError(errno.EBADF, f"{self.name} is closed")

    @property
    def buffer(self) -> io.RawIOBase:  # click and our readers ask for the binary stream
        raise self._closed()

    def write(self, text: str) -> int:
        if self.name == "stderr":  # where a failure would be reported: nowhere to say it
            return len(text)
        raise self._closed()

    def read(self, size: int | None = -1) -> str:
        raise self._closed()

    def readline(self, size: int | None = -1) -> str:  # type: ignore[override]
        raise self._closed()

    def fileno(self) -> int:
        raise self._closed()

    def flush(self) -> None:
        """Nothing was written, so nothing is lost: the interpreter's exit flush passes."""

    def isatty(self) -> bool:
        return False


def guard() -> None:
    """Put the null device on each closed standard descriptor and a ClosedStream in its
    Python stream's place (see the module docstring)."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            CLOSED.add(fd)
    for fd in sorted(CLOSED):
        null = os.open(os.devnull, os.O_RDWR)  # the lowest free descriptor: this one
        if null != fd:
            os.dup2(null, fd)
            os.close(null)
        setattr(sys, _NAMES[fd], ClosedStream(fd))


__all__ = ["CLOSED", "ClosedStream", "guard"]
