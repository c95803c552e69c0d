"""What the three tools answer: an execute result, search hits, one operation's types.

Kept apart from the server so that each answer can be tested as plain text without a
client. Answers are bounded (a model pays for every token): guest output is cut to
MAX_STREAM_CHARS per stream and the trace to MAX_CALLS_SHOWN rows, always before the
JSON is built, so the answer stays valid JSON with `truncated: true`.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass

import orjson

from runtime.mcp.runner import Call, Run
from runtime.mcp.search import Index
from runtime.refusals import NAMED_TEXTS, RULES
from specgen.grant_view import Allowed, signature
from specgen.render import render
from specgen.typescript import OperationTypes, TypeSet

#: Characters of stdout, and of stderr, one execute answer carries (about 6k tokens each).
MAX_STREAM_CHARS = 24_000
#: Trace rows one execute answer lists; the rest are counted.
MAX_CALLS_SHOWN = 64
#: Characters of one type expression in a search hit; describe() gives the full one.
MAX_HIT_TYPE = 160
WITHHELD = "[withheld: the grant's key]"

#: One profile's share of a catalog: its global, the types it names, its permitted
#: operations in the grant's order.
CatalogPart = tuple[str, TypeSet, tuple[Allowed, ...]]


def _cut(text: str, limit: int) -> tuple[str, bool]:
    if len(text) <= limit:
        return text, False
    return text[:limit], True


def _named(rule: str, seen: str) -> list[str]:
    """The names a rule's refusals quoted to the guest, as the guest's output shows them
    (the broker's record keeps no name the guest chose, so only what the guest printed
    can be quoted back)."""
    pattern = NAMED_TEXTS.get(rule)
    return list(dict.fromkeys(pattern.findall(seen))) if pattern is not None else []


def hints(
    run: Run, max_calls: int, timeout_s: float, approval_timeout_s: float = 120.0
) -> list[str]:
    """Why calls failed, in words a model can act on: one hint per refusal rule the
    broker recorded (runtime.refusals), naming the parameter when the guest's output
    shows the refusal's text; then the calls held for a person's approval and the trace's
    upstream outcomes. Never a secret."""
    seen = run.stdout + run.stderr
    out: list[str] = []
    for rule in dict.fromkeys(run.refused):
        label, _, why = RULES[rule].hint.partition(": ")
        why = why.format(max_calls=max_calls, timeout_s=timeout_s)
        count = run.refused.count(rule)
        calls = f"{count} call{'s' if count != 1 else ''}"
        names = _named(rule, seen)
        if names:
            out += [f"{label}: {name} ({calls}); {why}" for name in names]
        else:
            out.append(f"{label} ({calls}): {why}")
    by_broker = len(run.refused) - run.refused.count("breaker_open")
    if run.denied > by_broker:
        out.append(
            f"{run.denied - by_broker} call(s) refused by the sandbox before the broker (its "
            "host-call limit, or an envelope too large or malformed)"
        )
    for call in run.calls:
        if call.approval == "unavailable":
            out.append(
                f"approval needed: this grant sends {call.method} {call.route} only after a "
                "person approves it, and no one could be asked: connect with an MCP client "
                "that supports form elicitation (it declares the elicitation capability), or "
                "have the operator run the code with `specgen run` on a terminal or with "
                "--approve"
            )
        elif call.approval in ("declined", "timed_out"):
            said = "said no" if call.approval == "declined" else "did not answer in time"
            out.append(
                f"approval declined: the person asked about {call.method} {call.route} {said} "
                f"(each question waits at most {approval_timeout_s:g} s); the call was not sent"
            )
    for call in run.calls:
        if call.approval is not None and call.approval != "approved":
            continue  # held and not sent: said above
        if call.status == 0:
            out.append(
                "a call was still in flight when the run ended and was cancelled (status 0); "
                "await every call before the code finishes"
            )
        elif not call.delivered:
            out.append(
                f"upstream failed ({call.failure or 'no reply'}) on {call.method} {call.route}: "
                "the API could not be reached, timed out, or its reply was withheld"
            )
        elif call.status >= 400:
            out.append(
                f"upstream answered {call.status} to {call.method} {call.route} "
                "(the error body went to the guest)"
            )
    if run.timed_out:
        out.append(f"the run hit its {timeout_s:g} s time limit and was stopped")
    return list(dict.fromkeys(out))


def _call(c: Call) -> dict[str, object]:
    out: dict[str, object] = {
        "seq": c.seq,
        "method": c.method,
        "route": c.route,
        "status": c.status,
    }
    if c.approval is not None:
        out["approval"] = c.approval
    return out


@dataclass(frozen=True)
class Answer:
    text: str
    is_error: bool


def execute_answer(
    run: Run,
    *,
    max_calls: int,
    timeout_s: float,
    leaks: object,
    trace_id: str | None = None,
    approval_timeout_s: float = 120.0,
) -> Answer:
    """The execute tool's answer: one JSON object, bounded, with hints (and the run's
    trace id, the one on its audit line, when it has one)."""
    stdout, cut_out = _cut(run.stdout, MAX_STREAM_CHARS)
    stderr, cut_err = _cut(run.stderr, MAX_STREAM_CHARS)
    calls = run.calls[:MAX_CALLS_SHOWN]
    truncated = (
        cut_out
        or cut_err
        or run.stdout_truncated
        or run.stderr_truncated
        or len(run.calls) > len(calls)
        or run.dropped > 0
    )
    record: dict[str, object] = {
        "exit_code": run.exit_code,
        "timed_out": run.timed_out,
        "stdout": stdout,
        "stderr": stderr,
        "truncated": truncated,
        "calls": [_call(c) for c in calls],
        "calls_not_shown": len(run.calls) - len(calls) + run.dropped,
        "denied": run.denied,
        "hints": hints(run, max_calls, timeout_s, approval_timeout_s),
    }
    if trace_id is not None:
        record["trace_id"] = trace_id
    text = orjson.dumps(record).decode("utf-8")
    # The streams are searched as the guest wrote them as well as in the JSON text: a
    # key holding `"` or `\\` appears in `text` only escaped (`\\"`, `\\\\`).
    if callable(leaks) and any(leaks(each) for each in (text, stdout, stderr)):
        # The broker withholds replies that echo the key, so this is not expected; if a
        # guest still produced it, the answer loses the output rather than carry it.
        record.update(stdout=WITHHELD, stderr=WITHHELD, truncated=True)
        text = orjson.dumps(record).decode("utf-8")
    return Answer(text, is_error=run.exit_code != 0 or run.timed_out)


def _short(ts: str) -> str:
    return ts if len(ts) <= MAX_HIT_TYPE else ts[: MAX_HIT_TYPE - 1] + "…"


def short_signature(t: OperationTypes, global_name: str) -> str:
    """The method's signature with each type expression cut to MAX_HIT_TYPE; `t` is
    already cut to the grant (grant_view.cut_to_grant), so only permitted options appear."""
    return signature(t, global_name, _short)


class Catalog:
    """The operations a caller's grants permit, searchable and describable.

    One profile's catalog names its methods `<global>.<name>`, and also answers to the
    bare name. A run of several profiles (`joined`) searches all of their operations in
    one ranking and describes each by its own global, since two APIs may both have a
    `list_items`.
    """

    def __init__(self, allowed: list[Allowed], types: TypeSet, global_name: str) -> None:
        self._setup(((global_name, types, tuple(allowed)),))

    @classmethod
    def from_parts(cls, parts: tuple[CatalogPart, ...]) -> Catalog:
        """The catalog of `parts`, as another catalog's `parts` gave them (a server keeps
        them between starts, runtime/mcp/start_cache.py)."""
        made = cls.__new__(cls)
        made._setup(parts)
        return made

    @classmethod
    def joined(cls, catalogs: Sequence[Catalog]) -> Catalog:
        """One catalog of every operation of `catalogs` (the profiles of one run)."""
        if len(catalogs) == 1:
            return catalogs[0]
        return cls.from_parts(tuple(part for c in catalogs for part in c.parts))

    def _setup(self, parts: tuple[CatalogPart, ...]) -> None:
        #: (global, its types, the permitted operations) of each profile: all the
        #: catalog is made of, plain data.
        self.parts = parts
        #: (global, the types it names, the permitted operation), in the grants' order.
        self._entries = [(g, types, a) for g, types, allowed in parts for a in allowed]
        self._by_name = {f"{g}.{a.types.op.name}": i for i, (g, _, a) in enumerate(self._entries)}
        self.global_names = tuple(g for g, _, _ in parts)
        self._index: Index | None = None
        self._indexing = threading.Lock()

    @property
    def index(self) -> Index:
        """The search index, built at the first search, not at start: on GitHub's 1,222
        operations it is a tenth of a second the server would otherwise take to answer
        `initialize`, and a server whose model never searches never pays it."""
        if self._index is None:
            with self._indexing:
                if self._index is None:
                    self._index = Index.build([a.types for _, _, a in self._entries])
        return self._index

    def __len__(self) -> int:
        return len(self._entries)

    def search(self, query: str, limit: int) -> str:
        ranked = [self._entries[i] for i in self.index.ranked(query, limit)]
        globals_of = {id(a): g for g, _, a in ranked}
        return render(
            "mcp/search.txt.j2",
            query=query,
            hits=[a for _, _, a in ranked],
            total=len(self._entries),
            signature=lambda a: short_signature(a.types, globals_of[id(a)]),
        )

    def _find(self, name: str) -> int | None:
        found = self._by_name.get(name)
        if found is None and len(self.parts) == 1:  # the bare name of a one-API catalog
            found = self._by_name.get(f"{self.global_names[0]}.{name}")
        return found

    def describe(self, name: str) -> str | None:
        found = self._find(name)
        if found is None:
            return None
        global_name, types, a = self._entries[found]
        declarations, cut = types.closure(a.types.refs)
        return render(
            "mcp/describe.txt.j2",
            a=a,
            global_name=global_name,
            declarations=declarations,
            cut=cut,
        )
