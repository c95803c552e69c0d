"""Refusing a document that names the same key twice in one object.

JSON and YAML parsers keep the last of two equal keys without a word, so a document with
two `/items` paths (or two `get`s under one) silently loses an operation, and what the
operator reviewed is not what gets generated. The grants loader refuses duplicates for
the same reason; this does it for OpenAPI documents, naming the key and where it is.
"""

from __future__ import annotations

import json
from typing import Any

from specgen.errors import SpecError
from specgen.quoting import go_quote


class _Duplicate(Exception):
    def __init__(self, key: str, holder: int) -> None:
        super().__init__(key)
        self.key = key
        self.holder = holder


def check_json(name: str, raw: bytes | str) -> None:
    """Raise SpecError when a JSON object in `raw` repeats a key.

    A second parse (the standard library's, with a pairs hook) because the fast parser
    gives no way to see keys it dropped; on GitHub's 13 MB document it costs about as
    much as the first. Only a document that has a duplicate pays for locating it.
    """
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
        root = json.loads(raw, object_pairs_hook=pairs)
    except (ValueError, RecursionError):
        return  # the caller's parser has already accepted it; nothing more to say here
    if found:
        key, holder = found[0]
        where = _pointer(root, holder) or "the top level"
        raise SpecError(f"specgen: {name}: duplicate key {go_quote(key)} in the object at {where}")


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
