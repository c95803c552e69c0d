"""Finding the permitted operations a task needs, so a model never reads the whole API.

A field-weighted Okapi BM25 (BM25F: k1 = 1.2, b = 0.75 per field) over a few hundred to a
few thousand short texts. An operation's *title* is what says what it does: its method
name (split at `_` and camelCase), its summary, and the action its verb and path imply
(GET of a collection lists, GET of an item gets, POST of a collection creates, ...), so
that Stripe's `GetCustomers`, which has no summary, still reads "list customers". The
title weighs most; route words, tags and parameter names less, and the description
least (GitHub's descriptions name "repository" everywhere, Stripe's are HTML).

BM25 alone ranks "List repository issue events" above "List repository issues" for
"list issues for a repository": both hold every term. So the score adds how much of
the query (by idf) the title covers and how little else the title says, which puts the
operation whose name and summary match the query first. Filler words (a, the, for,
...) are dropped and a few synonyms folded (retrieve ~ get, repo ~ repository, add ~
create, remove ~ delete, edit ~ update) on both sides, so a paraphrase meets the name.
tests/runtime/test_mcp_search_relevance.py holds it to a relevance set over GitHub's and
Stripe's documents.
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter
from dataclasses import dataclass

from specgen.typescript import OperationTypes

_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
_TAG = re.compile(r"<[^>]*>")
K1 = 1.2
B = 0.75

#: Words that say nothing about which operation is meant.
STOPWORDS = frozenset(
    {
        *("a", "an", "the", "for", "of", "to", "in", "on", "by", "with", "from", "and", "or"),
        *("its", "it", "this", "that", "my", "our", "your", "their", "all", "any", "some"),
        *("be", "is", "are", "was", "as", "at", "into", "via", "using", "use"),
    }
)
#: Folded to one word on both sides of the match.
SYNONYMS = {
    "retrieve": "get",
    "fetch": "get",
    "read": "get",
    "show": "get",
    "repo": "repository",
    "remove": "delete",
    "destroy": "delete",
    "add": "create",
    "new": "create",
    "edit": "update",
    "modify": "update",
    "change": "update",
    "org": "organization",
    "pr": "pull",
}

#: Field weights: the title says what an operation does, the rest less and less.
WEIGHTS = {"title": 3.0, "route": 1.0, "tags": 1.0, "params": 0.5, "doc": 0.3}
#: How much covering the query with the title counts, and saying little else besides.
COVERAGE = 4.0
PRECISION = 1.0


def _stem(w: str) -> str:
    if w.endswith("ies") and len(w) > 4:
        return w[:-3] + "y"
    if w.endswith("s") and len(w) > 3 and not w.endswith(("ss", "us", "is")):
        return w[:-1]
    return w


def words(text: str) -> list[str]:
    """Lower-case word tokens without filler: `agent_memory_recall` and
    `agentMemoryRecall` both give agent, memory, recall; HTML tags are dropped; a
    trailing plural `s` is cut (memories ~ memory) and synonyms folded (repo ~
    repository)."""
    return list(_words(text))


@functools.lru_cache(maxsize=1 << 14)
def _words(text: str) -> tuple[str, ...]:
    """`words`, remembered: a large API repeats the same parameter names, tags and
    summaries across hundreds of operations, and the index reads each of them once."""
    if "<" in text:
        text = _TAG.sub(" ", text)
    out = []
    for raw in _WORD.findall(text):
        w = _stem(raw.lower())
        w = SYNONYMS.get(w, w)
        if w not in STOPWORDS and len(w) > 1:
            out.append(w)
    return tuple(out)


def action(t: OperationTypes) -> list[str]:
    """What the verb does to the path: a GET of a collection lists it, of one item (a
    path ending in a parameter) gets it; POST creates, or updates an item (Stripe's
    form); PUT and PATCH update; DELETE deletes."""
    item = t.op.template.rstrip("/").endswith("}")
    verb = t.op.method.upper()
    if verb == "GET":
        return ["get"] if item else ["list"]
    if verb == "POST":
        return ["update"] if item else ["create"]
    if verb in ("PUT", "PATCH"):
        return ["update"]
    if verb == "DELETE":
        return ["delete"]
    return []


def _fields(t: OperationTypes) -> dict[str, list[str]]:
    op = t.op
    summary = words(op.summary)
    # each title word once: a name that repeats its summary does not say it louder
    title = list(dict.fromkeys(words(op.name) + summary + action(t)))
    return {
        "title": title,
        # what precision reads: the summary when there is one, which says the least else
        "says": list(dict.fromkeys(summary)) or title,
        "route": words(op.template.replace("{", " ").replace("}", " ")),
        "tags": [w for tag in t.tags for w in words(tag)],
        "params": [w for p in t.params for w in words(p.name)],
        "doc": words(t.doc),
    }


@dataclass(frozen=True)
class Index:
    ops: tuple[OperationTypes, ...]
    #: Per operation, per field: term counts and length.
    fields: tuple[dict[str, Counter[str]], ...]
    lengths: tuple[dict[str, int], ...]
    averages: dict[str, float]
    df: Counter[str]

    @classmethod
    def build(cls, ops: list[OperationTypes]) -> Index:
        fields, lengths = [], []
        df: Counter[str] = Counter()
        totals: Counter[str] = Counter()
        for t in ops:
            tokens = _fields(t)
            fields.append({f: Counter(ws) for f, ws in tokens.items()})
            lengths.append({f: len(ws) for f, ws in tokens.items()})
            totals.update({f: len(ws) for f, ws in tokens.items()})
            df.update({w for ws in tokens.values() for w in ws})
        n = max(len(ops), 1)
        averages = {f: max(totals[f] / n, 1.0) for f in WEIGHTS}
        return cls(tuple(ops), tuple(fields), tuple(lengths), averages, df)

    def _idf(self, term: str) -> float:
        n, df = len(self.ops), self.df[term]
        return math.log(1 + (n - df + 0.5) / (df + 0.5))

    def search(self, query: str, limit: int) -> list[OperationTypes]:
        """The best `limit` operations for `query`, best first; ties keep document order."""
        return [self.ops[i] for i in self.ranked(query, limit)]

    def ranked(self, query: str, limit: int) -> list[int]:
        """`search`, as the positions of the operations in the index."""
        terms = list(dict.fromkeys(words(query)))
        if not terms or not self.ops:
            return []
        idf = {term: self._idf(term) for term in terms}
        mass = sum(idf.values()) or 1.0
        scored = []
        for i, (tf, length) in enumerate(zip(self.fields, self.lengths, strict=True)):
            score = 0.0
            covered = 0.0
            count = 0
            for term in terms:
                weighted = 0.0
                for field, weight in WEIGHTS.items():
                    f = tf[field].get(term, 0)
                    if f:
                        norm = 1 - B + B * length[field] / self.averages[field]
                        weighted += weight * f / norm
                if weighted:
                    score += idf[term] * weighted * (K1 + 1) / (weighted + K1)
                if tf["title"].get(term):
                    covered += idf[term]
                    count += 1
            if score <= 0:
                continue
            extra = sum(1 for w in tf["says"] if w not in idf)
            # half by idf, half by count: "repository" is in nearly every GitHub title,
            # yet a title that also says it is the one asked for
            coverage = (covered / mass + count / len(terms)) / 2
            score += COVERAGE * coverage + PRECISION / (1 + extra)
            scored.append((-score, i))
        return [i for _, i in sorted(scored)[:limit]]
