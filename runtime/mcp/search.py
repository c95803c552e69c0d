"""Finding the permitted operations a task needs, so a model never reads the whole API.

A plain Okapi BM25 (k1 = 1.2, b = 0.75) written here over a few hundred short texts:
each operation's method name (split at `_` and camelCase), route words, summary,
description, tags and parameter names. The method name and summary count twice, since
they say what an operation does; route words and parameter names once. That is enough
to put `remember` first for "store a memory", and costs nothing to build per server.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass

from specgen.typescript import OperationTypes

_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
K1 = 1.2
B = 0.75


def words(text: str) -> list[str]:
    """Lower-case word tokens: `agent_memory_recall` and `agentMemoryRecall` both give
    agent, memory, recall; a trailing plural `s` is dropped so memories ~ memory."""
    out = []
    for w in _WORD.findall(text):
        w = w.lower()
        if w.endswith("ies") and len(w) > 4:
            w = w[:-3] + "y"
        elif w.endswith("s") and len(w) > 3 and not w.endswith(("ss", "us", "is")):
            w = w[:-1]
        out.append(w)
    return out


def _document(t: OperationTypes) -> list[str]:
    op = t.op
    strong = words(op.name) + words(op.summary)
    weak = [*words(op.template.replace("{", " ").replace("}", " ")), op.method.lower()]
    weak += words(t.doc) + [w for tag in t.tags for w in words(tag)]
    weak += [w for p in t.params for w in words(p.name)]
    return strong * 2 + weak


@dataclass(frozen=True)
class Index:
    ops: tuple[OperationTypes, ...]
    docs: tuple[Counter[str], ...]
    lengths: tuple[int, ...]
    df: Counter[str]

    @classmethod
    def build(cls, ops: list[OperationTypes]) -> Index:
        tokens = [_document(t) for t in ops]
        df: Counter[str] = Counter()
        for doc in tokens:
            df.update(set(doc))
        return cls(tuple(ops), tuple(Counter(d) for d in tokens), tuple(len(d) for d in tokens), df)

    def search(self, query: str, limit: int) -> list[OperationTypes]:
        """The best `limit` operations for `query`, best first; ties keep document order."""
        terms = set(words(query))
        if not terms or not self.ops:
            return []
        n = len(self.ops)
        avg = sum(self.lengths) / n
        scored = []
        for i, (tf, length) in enumerate(zip(self.docs, self.lengths, strict=True)):
            score = 0.0
            for term in terms:
                f = tf.get(term, 0)
                if f:
                    idf = math.log(1 + (n - self.df[term] + 0.5) / (self.df[term] + 0.5))
                    score += idf * f * (K1 + 1) / (f + K1 * (1 - B + B * length / avg))
            if score > 0:
                scored.append((-score, i))
        return [self.ops[i] for _, i in sorted(scored)[:limit]]
