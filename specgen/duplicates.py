"""Refusing a document that names the same key twice in one object.

JSON and YAML parsers keep the last of two equal keys without a word, so a document with
two `/items` paths (or two `get`s under one) silently loses an operation, and what the
operator reviewed is not what gets generated. The grants loader refuses duplicates for
the same reason; this does it for OpenAPI documents, naming the key and where it is.
"""

from __future__ import annotations

import json
import sys
import threading
from typing import Any

from specgen.errors import SpecError
from specgen.quoting import go_quote


class _Duplicate(Exception):
    def __init__(self, key: str, holder: int) -> None:
        super().__init__(key)
        self.key = key
        self.holder = holder


_UNPARSED: Any = object()

#: The deepest nesting orjson reads; the full check must be able to read all of it.
_ORJSON_DEPTH = 1024
#: Frames the full check needs besides one per level (the pairs hook, dict, the decoder).
_SPARE_FRAMES = 100
_LIMIT_LOCK = threading.Lock()


def _loads_pairs(raw: bytes | str, hook: Any, *, read: bool) -> Any:
    """`json.loads(raw, object_pairs_hook=hook)`; with room for orjson's deepest document
    when `read` (a parser has read `raw`, so it nests no deeper than that).

    The standard library's parser recurses once per level against Python's recursion
    limit (1000, less the caller's own frames), so a document nested about 990 levels
    deep, which orjson reads, raised RecursionError here, and the repeated key it held
    anywhere went through unnamed. For a document already read the limit is raised above
    the caller's for this one parse (under a lock, so concurrent checks restore it in
    order). A document nobody has read yet gets no more room than before: nesting past
    orjson's limit is then refused by orjson, in its words, as it was."""
    if not read:
        return json.loads(raw, object_pairs_hook=hook)
    with _LIMIT_LOCK:
        limit = sys.getrecursionlimit()
        sys.setrecursionlimit(limit + _ORJSON_DEPTH + _SPARE_FRAMES)
        try:
            return json.loads(raw, object_pairs_hook=hook)
        finally:
            sys.setrecursionlimit(limit)


def check_json(name: str, raw: bytes | str, doc: Any = _UNPARSED) -> None:
    """Raise SpecError when a JSON object in `raw` repeats a key.

    `doc`, when given, is what a parser made of `raw`; then a count of colons decides
    first (see `may_repeat_a_key`), and only a document that may hold a duplicate pays
    for the second parse below (the standard library's, with a pairs hook, because the
    fast parser gives no way to see keys it dropped; on GitHub's 13 MB document it costs
    more than twice the first) that finds and names it.
    """
    if doc is not _UNPARSED and not may_repeat_a_key(raw, doc):
        return
    found: list[tuple[str, dict[str, Any]]] = []

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out = dict(items)
        if len(out) != len(items) and not found:
            seen: set[str] = set()
            for key, _ in items:
                if key in seen:
                    found.append((key, out))
                    break
                seen.add(key)
        return out

    try:
        root = _loads_pairs(raw, pairs, read=doc is not _UNPARSED)
    except ValueError:
        return  # the caller's parser has already accepted it; nothing more to say here
    except RecursionError:
        if doc is _UNPARSED:
            return  # the caller's next reader reads it, and then this check runs with room
        # a parser read it, so it nests no deeper than the room made above: fail closed
        raise SpecError(f"specgen: {name}: nests too deeply to check for repeated keys") from None
    if found:
        key, holder = found[0]
        where = _pointer(root, holder) or "the top level"
        raise SpecError(f"specgen: {name}: duplicate key {go_quote(key)} in the object at {where}")


def may_repeat_a_key(raw: bytes | str, doc: Any) -> bool:
    """False only when `raw`, which parsed to `doc`, provably names no key twice in one
    object; True ("look closer") otherwise. One serialisation and a few C-level counts:
    a fraction of a second parse.

    Outside strings, JSON text has one colon per key/value pair and no other. Say `raw`
    writes P pairs and L colons literally inside its strings (P + L colons in all), and E
    colons as `\\u003a` escapes. A parser that keeps the last of two equal keys makes
    `doc` with K pairs, K < P exactly when some object repeats a key, and its strings
    hold L + E - D colons, D >= 0 being those in strings dropped with a repeated key's
    pair. orjson writes each pair with one colon and never escapes a colon in a string,
    so its text of `doc` holds K + L + E - D colons. Counting every `\\u003a` and
    `\\u003A` gives E' >= E (`\\\\u003a` is a backslash and text, not an escape), so the
    counts below are equal only when (P - K) + (E' - E) + D == 0, every term being zero:
    no key repeats. Any other outcome, and a document orjson cannot write back (nesting
    deeper than it writes, integers wider than 64 bits), goes to the full check.
    """
    import orjson  # only documents jiter could not read come here (see specgen/load.py)

    try:
        text = orjson.dumps(doc)
    except (orjson.JSONEncodeError, TypeError):
        return True
    if isinstance(raw, str):
        raw = raw.encode("utf-8", "surrogatepass")  # colons stay one byte each
    found = raw.count(b":")
    if b"\\u003" in raw:  # rare; one scan instead of two counts when absent
        found += raw.count(b"\\u003a") + raw.count(b"\\u003A")
    return found != text.count(b":")


def _pointer(node: Any, target: dict[str, Any], path: str = "") -> str | None:
    """The JSON pointer of the object `target` (by identity) inside `node`."""
    stack: list[tuple[Any, str]] = [(node, path)]
    while stack:
        current, where = stack.pop()
        if current is target:
            return where
        if isinstance(current, dict):
            stack.extend(
                (v, f"{where}/{str(k).replace('~', '~0').replace('/', '~1')}")
                for k, v in current.items()
                if isinstance(v, dict | list)
            )
        elif isinstance(current, list):
            stack.extend(
                (v, f"{where}/{i}") for i, v in enumerate(current) if isinstance(v, dict | list)
            )
    return None


def strict_yaml_loader(base: type) -> type:
    """`base` (a PyYAML SafeLoader) refusing a mapping that repeats a key.

    Merge keys (`<<`) are exempt: overriding merged values is what they are for.
    PyYAML is imported here, not at module level, so a JSON document never loads it.
    """
    import yaml

    class StrictLoader(base):  # type: ignore[misc, valid-type]
        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            if isinstance(node, yaml.MappingNode):
                seen: set[Any] = set()
                for key_node, _ in node.value:
                    if key_node.tag == "tag:yaml.org,2002:merge":
                        continue
                    key = self.construct_object(key_node, deep=True)
                    try:
                        fresh = key not in seen
                        seen.add(key)
                    except TypeError:
                        continue  # an unhashable key; the loader itself refuses it
                    if not fresh:
                        mark = key_node.start_mark
                        raise yaml.constructor.ConstructorError(
                            None,
                            None,
                            f"duplicate key {go_quote(str(key))} (line {mark.line + 1}, "
                            f"column {mark.column + 1})",
                            None,
                        )
            return super().construct_mapping(node, deep=deep)

    return StrictLoader
