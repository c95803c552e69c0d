"""The command line's ways of answering an approval: the terminal, or a fixed rule.

`specgen run` asks on the controlling terminal (`/dev/tty`), never on stdin, which may
be the guest's code or a pipe someone else writes; with no terminal there is nobody to
ask, and the calls are refused. `--approve all|none|ROUTE...` replaces the question by
a rule fixed before the run, for scripts and CI.
"""

from __future__ import annotations

import contextlib
import os
import select
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

from runtime.broker.approval import Answer, Question
from specgen.allow import AllowError, parse_entry
from specgen.quoting import go_quote

if TYPE_CHECKING:
    from specgen.routes import Route

#: Longest answer line read from the terminal (bytes); more is a no.
_MAX_ANSWER = 64
_PROMPT = (
    "approve? [y]es, [n]o, [a]ll calls of this route in this run (no answer in {t:.0f} s is no): "
)


class TerminalApprover:
    """Asks on /dev/tty; `open()` is None when the process has no terminal."""

    channel = "tty"

    def __init__(self, fd: int) -> None:
        self._fd = fd
        # Written to by `interrupt`, so a question waiting on the terminal ends at once.
        self._wake_read, self._wake_write = os.pipe()

    @classmethod
    def open(cls, path: str = "/dev/tty") -> TerminalApprover | None:
        try:
            fd = os.open(path, os.O_RDWR | os.O_NOCTTY)
        except OSError:
            return None
        if not os.isatty(fd):
            os.close(fd)
            return None
        return cls(fd)

    def close(self) -> None:
        for fd in (self._fd, self._wake_read, self._wake_write):
            os.close(fd)

    def interrupt(self) -> None:
        """End the question being asked now, and any asked later, unanswered (Ctrl-C: the
        run is being ended, and no one should be left typing into it). Safe from a
        signal handler: one write to a pipe."""
        with contextlib.suppress(OSError):  # already woken (a full pipe) or closed
            os.write(self._wake_write, b"x")

    def __call__(self, question: Question, timeout_s: float) -> Answer | None:
        text = "\nspecgen: " + question.text().replace("\n", "\nspecgen: ") + "\n"
        os.write(self._fd, (text + "specgen: " + _PROMPT.format(t=timeout_s)).encode())
        line = self._read_line(timeout_s)
        if line is None:
            os.write(self._fd, b"\nspecgen: no answer: declined\n")
            return None
        word = line.strip().lower()
        if word in ("y", "yes"):
            return Answer.YES
        if word in ("a", "all", "always"):
            return Answer.ALWAYS
        return Answer.NO

    def _read_line(self, timeout_s: float) -> str | None:
        """One line typed within `timeout_s`, or None (nothing is read past it)."""
        end = time.monotonic() + timeout_s
        got = b""
        while b"\n" not in got and len(got) <= _MAX_ANSWER:
            left = end - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([self._fd, self._wake_read], [], [], left)
            if not ready or self._wake_read in ready:
                return None
            chunk = os.read(self._fd, _MAX_ANSWER)
            if not chunk:
                return None
            got += chunk
        return got.decode("utf-8", errors="replace")


class FixedApprover:
    """`--approve`: yes to every call (`all`), to none, or to the listed routes only."""

    channel = "flag"

    def __init__(self, routes: frozenset[tuple[str, str]] | None) -> None:
        #: None approves every route.
        self._routes = routes

    @classmethod
    def parse(cls, values: tuple[str, ...]) -> FixedApprover:
        """From the `--approve` values; ValueError (one line) for a value that is none
        of `all`, `none` or an allow entry ("METHOD /path", its `?query` part too: the
        route is what is approved, so an entry pasted from `allow` names its route)."""
        if values == ("all",):
            return cls(None)
        if values == ("none",):
            return cls(frozenset())
        routes: set[tuple[str, str]] = set()
        for value in values:
            if value in ("all", "none"):
                raise ValueError(f"--approve {value} cannot be combined with other values")
            try:
                route = parse_entry(value).route
            except AllowError as exc:
                raise ValueError(f"--approve {go_quote(value)}: {exc}") from None
            routes.add((route.method.upper(), route.path))
        return cls(frozenset(routes))

    def unknown(self, allowed: Iterable[Route]) -> str | None:
        """The first listed route that none of `allowed` is ("METHOD /path"), else None:
        a route no allow entry has is never asked about, so approving it is a typo that
        would otherwise decline, without a word, the call it meant."""
        if self._routes is None:
            return None
        known = {(route.method.upper(), route.path) for route in allowed}
        missing = sorted(self._routes - known)
        return f"{missing[0][0]} {missing[0][1]}" if missing else None

    def __call__(self, question: Question, timeout_s: float) -> Answer | None:
        if self._routes is None or (question.method, question.route) in self._routes:
            return Answer.YES
        return Answer.NO


__all__ = ["FixedApprover", "TerminalApprover"]
