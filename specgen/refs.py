"""Local `$ref` resolution through the `referencing` library.

Real documents use `$ref` for path items, parameters and request bodies everywhere, so
we follow them (the reference refused them all). Only references inside the document
are followed: fetching another file or URL while generating would make the output
depend on something the document does not pin.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

import referencing.exceptions
from referencing import Registry, Resource

from specgen.errors import SpecError
from specgen.quoting import go_quote

_BASE = "urn:specgen:document"

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
    """Resolves `$ref`s against one document; RFC 6901 pointers, %-encoding included."""

    def __init__(self, doc: dict[str, Any], name: str) -> None:
        self._name = name
        # Opaque: OpenAPI 3.0 is not JSON Schema, and we only ever follow JSON pointers,
        # so no `$id`/anchor semantics may change what a pointer means.
        resource: Resource[Any] = Resource.opaque(doc)
        self._resolver = Registry().with_resource(_BASE, resource).resolver(_BASE)

    def deref(self, node: Any, where: str) -> Any:
        """Follow `node`'s `$ref` chain to a value that is not a reference."""
        seen: list[str] = []
        while isinstance(node, dict) and "$ref" in node:
            ref = node["$ref"]
            if not isinstance(ref, str):
                raise SpecError(f"specgen: {self._name}: {where}: $ref must be a string")
            if not ref.startswith("#"):
                raise SpecError(
                    f"specgen: {self._name}: {where}: $ref {go_quote(ref)} points outside the document; "
                    "only local references (#/...) are resolved, so bundle the document first"
                )
            if ref in seen:
                raise SpecError(f"specgen: {self._name}: {where}: $ref {go_quote(ref)} is circular")
            seen.append(ref)
            try:
                node = self._resolver.lookup(ref).contents
            except (referencing.exceptions.Unresolvable, LookupError, TypeError, ValueError):
                raise SpecError(
                    f"specgen: {self._name}: {where}: $ref {go_quote(ref)} does not resolve"
                ) from None
        return node
