"""The server's log on stderr: one escaped line per record, beside its audit lines.

The MCP SDK logs a request handler's failure with its traceback (drawn by Rich when Rich
is installed), and the text it logs can be the client's own (an unknown prompt's name),
so a client could write escape sequences to the operator's terminal and fill stderr,
where the audit lines go, with boxes of source code. `specgen mcp` installs this
handler before the SDK would install its own: every record is one line, `specgen: `,
its level and its message with the exception's type and first line, every control or
invisible character escaped and a very long line cut. SPECGEN_DEBUG=1 adds the
traceback, escaped line by line, as every other command shows it only then.
"""

from __future__ import annotations

import logging
import os
import sys
import traceback
from typing import TextIO

from specgen.quoting import capped, visible


class OneLine(logging.Formatter):
    """A record as `specgen: LEVEL: message[: Type: first line]`, escaped and capped."""

    def format(self, record: logging.LogRecord) -> str:
        text = record.getMessage()
        error = record.exc_info[1] if record.exc_info else None
        if error is not None:
            said = str(error).splitlines()
            text += f": {type(error).__name__}" + (f": {said[0]}" if said else "")
        line = capped(visible(f"specgen: {record.levelname.lower()}: {text}"))
        if error is None or not os.environ.get("SPECGEN_DEBUG"):
            return line
        trace = traceback.format_exception(error)
        return "\n".join([line, *(visible(t) for t in "".join(trace).splitlines())])


class _Stderr(logging.StreamHandler):  # type: ignore[type-arg]
    """A handler that writes to whatever `sys.stderr` is when a record comes, as the
    last-resort handler does, not the stream of the moment it was made."""

    def __init__(self) -> None:
        super().__init__()

    @property  # type: ignore[override]
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, _: TextIO) -> None:
        pass


def log_in_lines() -> None:
    """Send every log record to stderr in `OneLine`s, warnings and worse. The root
    logger gets this handler before the SDK is set up, whose own set-up only configures
    a root logger with no handler, so it leaves this one alone. Calling it again adds
    nothing."""
    root = logging.getLogger()
    if any(isinstance(h.formatter, OneLine) for h in root.handlers):
        return
    handler = _Stderr()
    handler.setFormatter(OneLine())
    root.addHandler(handler)
    root.setLevel(logging.WARNING)


__all__ = ["OneLine", "log_in_lines"]
