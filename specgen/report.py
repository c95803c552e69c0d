"""What a build says on stderr: a summary and warnings grouped by kind, or every line.

A provider's document yields hundreds of messages, one line each, which buries the one
line that matters. So an operationId mapped to an identifier by the fixed rule (GitHub's
1,222 `repos/get-content`) is no warning at all, only a count in the summary; the rest are
counted by kind with one example each and closed by the summary line; `--verbose` lists
every line, `--quiet` prints nothing but errors. Grouping works on the message text, so a
new kind of warning is grouped by its shape without a change here.
"""

from __future__ import annotations

import re
import sys
import threading
import time
from collections import Counter
from enum import IntEnum
from functools import cache
from typing import TYPE_CHECKING, NamedTuple, TextIO

if TYPE_CHECKING:
    from specgen.build import Result


class Verbosity(IntEnum):
    QUIET = 0
    NORMAL = 1
    VERBOSE = 2


#: The health_check note, short: the long reason is in docs/grants.md and --verbose.
HEALTH_SHORT = (
    "specgen: note: no GET is marked x-plimsoll-health-check, so the profile gets no "
    "health_check (see docs/grants.md)"
)

# What grouping matches, as text; _Regexes compiles it once, on a build's first grouping,
# so a build with nothing to group, and every --quiet build, never compiles it.
# The subject ends at the first space after the path: `\S*` cannot pass a space, so this
# greedy form matches exactly what a lazy `\S*?:? ` did, without trying a colon at
# every character.
_SUBJECT = r"^[A-Z]+ /\S* "
_QUOTED = r'"[^"\\]*(?:\\.[^"\\]*)*"'  # a JSON-style string; unrolled, no per-character choice
_LIST = r'(?:\b\w+ "…", )+\w+ "…"'
#: Text every match of _LIST contains: a message without it skips that regex.
_LIST_NEEDS = '"…", '

# Labels for the kinds seen in practice; anything else is grouped by its shape.
_LABELS: tuple[tuple[str, str], ...] = (
    (r"^requires ", "require a query or header parameter a brokered call cannot send"),
    (r"only part of a segment", "have a parameter that is only part of a segment"),
    (r"^host-API grants enforce only", "use a verb grants do not enforce"),
    (r"^maps to route", "map to a route a grant cannot hold"),
    (
        r"^optional .* cannot be sent through the broker",
        "optional query or header parameters the broker cannot send (the method calls the bare route)",
    ),
    (
        r"has no operationId",
        "no operationId (the method is named after its verb and path)",
    ),
)


class _Regexes(NamedTuple):
    subject: re.Pattern[str]
    quoted: re.Pattern[str]
    list: re.Pattern[str]
    labels: tuple[tuple[re.Pattern[str], str], ...]


@cache
def _regexes() -> _Regexes:
    return _Regexes(
        subject=re.compile(_SUBJECT),
        quoted=re.compile(_QUOTED),
        list=re.compile(_LIST),
        labels=tuple((re.compile(pattern), label) for pattern, label in _LABELS),
    )


def kind(message: str) -> str:
    """The group a skip reason or warning belongs to: a known label, else its shape
    (subject, quoted names and lists of names blanked out).

    A provider's document gives a thousand messages or more (GitHub's 1,225). Grouping
    them through re's cache, with a per-character alternation for quoted names and the
    list pattern tried at every word, cost 15 to 24 ms, up to a tenth of that build;
    compiled once, unrolled, and skipped where the text it needs is absent, about 4 ms.
    tests/specgen/test_fast_paths_equivalence.py holds it to the old patterns."""
    rx = _regexes()
    body = rx.subject.sub("", message, count=1)
    for pattern, label in rx.labels:
        if pattern.search(body) or pattern.search(message):
            return label
    if '"' in body:
        body = rx.quoted.sub('"…"', body)
    if _LIST_NEEDS in body:
        body = rx.list.sub('… "…"', body)
    return body


class Group(NamedTuple):
    """Skips or warnings of one kind: how many, and one example (a NamedTuple, for the
    reason specgen/frozen.py gives)."""

    label: str
    count: int
    example: str


def groups(messages: list[str]) -> list[Group]:
    """Messages counted by kind, most frequent first (ties by label, for stable output)."""
    counts: Counter[str] = Counter()
    first: dict[str, str] = {}
    for message in messages:
        label = kind(message)
        counts[label] += 1
        first.setdefault(label, message)
    ordered = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return [Group(label, n, first[label]) for label, n in ordered]


def _example(message: str) -> str:
    match = _regexes().subject.match(message)
    return match.group(0).rstrip(": ") if match else message[:80]


#: What a rename does, said once in the summary instead of once per operation.
RENAME_RULE = "every character outside A-Z a-z 0-9 _ $ became _"


def summary(result: Result, verb: str = "built") -> str:
    gen = result.gen
    parts = [f"{len(gen.skipped):,} skipped", f"{len(gen.warnings):,} warnings"]
    if gen.renamed:
        parts.append(
            f"{len(gen.renamed):,} operationId(s) renamed to JavaScript identifiers ({RENAME_RULE})"
        )
    tail = " (--verbose to list)" if gen.skipped or gen.warnings or gen.renamed else ""
    return f"specgen: {verb} {len(gen.operations):,} operations; {', '.join(parts)}{tail}"


def note_lines(result: Result, verbosity: Verbosity, *, details: bool = True) -> list[str]:
    """The stderr lines for a build. `details=False` (emit json, whose output already
    carries every skip and warning) leaves only the summary line at normal verbosity."""
    if verbosity is Verbosity.QUIET:
        return []
    gen = result.gen
    if verbosity is Verbosity.VERBOSE:
        return [*result.notes(), summary(result)]
    lines: list[str] = []
    if details:
        skips = [f"{s.method} {s.path}: {s.reason}" for s in gen.skipped]
        for title, messages in (("skipped", skips), ("warnings", list(gen.warnings))):
            if not messages:
                continue
            lines.append(f"specgen: {len(messages):,} {title}, by kind:")
            lines += [
                f"  {g.count:>5,}  {g.label} (e.g. {_example(g.example)})" for g in groups(messages)
            ]
        if gen.health_note:
            lines.append(HEALTH_SHORT)
    lines.append(summary(result))
    return lines


#: The marker full_report puts on an example or default that contradicts its schema.
NIT_MARKER = ": nit: "


def split_severities(lines: list[str]) -> tuple[list[str], list[str]]:
    """(errors, warnings) of a `validate` report: nits (examples and defaults their
    schemas reject) do not change what a build generates, so they are warnings."""
    errors = [line for line in lines if NIT_MARKER not in line]
    warnings = [line for line in lines if NIT_MARKER in line]
    return errors, warnings


class Progress:
    """An elapsed-time line on stderr while a long step runs, only when stderr is a
    terminal (a log or a pipe gets nothing), cleared when the step ends."""

    def __init__(self, what: str, *, after_s: float = 1.0, stream: TextIO | None = None) -> None:
        self.what = what
        self.after_s = after_s
        self.stream = stream if stream is not None else sys.stderr
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._shown = False

    def __enter__(self) -> Progress:
        if self.stream.isatty():
            self._thread = threading.Thread(target=self._tick, daemon=True)
            self._thread.start()
        return self

    def _tick(self) -> None:
        start = time.monotonic()
        while not self._stop.wait(self.after_s if not self._shown else 1.0):
            self._shown = True
            self.stream.write(f"\rspecgen: {self.what}… {time.monotonic() - start:.0f} s")
            self.stream.flush()

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
