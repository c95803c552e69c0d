"""Local `$ref` resolution by the document's own JSON-pointer walk.

Real documents use `$ref` for path items, parameters and request bodies everywhere, so
we follow them (the reference refused them all). Only references inside the document
are followed: fetching another file or URL while generating would make the output
depend on something the document does not pin.

The walk is this module's own `resolve_pointer`, not the `referencing` library: we only
ever follow plain JSON pointers into one document, which is all an opaque `referencing`
resource did for us, and importing it cost every build about 25 ms.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

from specgen.errors import SpecError
from specgen.quoting import go_quote

#: What `resolve_pointer` returns when a pointer lands nowhere (None is a JSON value).
MISSING: Any = object()


def resolve_pointer(doc: Any, fragment: str) -> Any:
    """The value a local `$ref`'s fragment (URI-encoded RFC 6901) points to, or MISSING.

    For callers that must not refuse a broken reference but judge it themselves: the
    full validator reports it, the extractor words its own refusal.
    """
    pointer = unquote(fragment)
    if pointer == "":
        return doc
    if not pointer.startswith("/"):
        return MISSING
    node = doc
    for raw in pointer[1:].split("/"):
        token = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict):
            if token not in node:
                return MISSING
            node = node[token]
        elif isinstance(node, list):
            if not token.isdigit() or int(token) >= len(node):
                return MISSING
            node = node[int(token)]
        else:
            return MISSING
    return node


class Refs:
    """Resolves `$ref`s against one document; RFC 6901 pointers, %-encoding included.

    Every `$ref` string is resolved once per document and remembered, failures too: a
    hostile document can chain thousands of references and point every operation at the
    head of the chain, and following the chain again for each use made a build
    quadratic in the document (80 s for 1 MB). With the memo each reference costs one
    pointer walk in all, so the work is linear in the chain plus the uses.
    """

    def __init__(self, doc: dict[str, Any], name: str) -> None:
        self._doc = doc
        self._name = name
        # $ref string -> the non-reference value its chain ends at, or a _Broken
        self._final: dict[str, Any] = {}

    def deref(self, node: Any, where: str) -> Any:
        """Follow `node`'s `$ref` chain to a value that is not a reference."""
        if not (isinstance(node, dict) and "$ref" in node):
            return node
        ref = node["$ref"]
        if not isinstance(ref, str):
            raise SpecError(f"specgen: {self._name}: {where}: $ref must be a string")
        final = self._final.get(ref, MISSING)
        if final is MISSING:
            final = self._follow(ref)
        if isinstance(final, _Broken):
            raise SpecError(f"specgen: {self._name}: {where}: {final.reason}")
        return final

    def _follow(self, ref: str) -> Any:
        """Walk the chain from `ref` until a known or plain value; memoise every link."""
        chain: list[str] = []
        on_chain: set[str] = set()
        result: Any
        while True:
            known = self._final.get(ref, MISSING)
            if known is not MISSING:
                result = known
                break
            if ref in on_chain:
                result = _Broken(f"$ref {go_quote(ref)} is circular")
                break
            chain.append(ref)
            on_chain.add(ref)
            if not ref.startswith("#"):
                result = _Broken(
                    f"$ref {go_quote(ref)} points outside the document; "
                    "only local references (#/...) are resolved, so bundle the document first"
                )
                break
            node = resolve_pointer(self._doc, ref[1:])
            if node is MISSING:
                result = _Broken(f"$ref {go_quote(ref)} does not resolve")
                break
            if not (isinstance(node, dict) and "$ref" in node):
                result = node
                break
            nxt = node["$ref"]
            if not isinstance(nxt, str):
                result = _Broken("$ref must be a string")
                break
            ref = nxt
        for link in chain:
            self._final[link] = result
        return result


class _Broken:
    """A reference that cannot be followed, and why (without where it was used)."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason
