"""Regular expressions from a document, run by RE2, a linear-time engine.

A document's `pattern` (and `patternProperties`) is text its author chose, and Python's
backtracking `re` takes time exponential in the input on patterns such as `^(a+)+$`:
`specgen validate` hung on one applied to a 30-character example. RE2 runs every
pattern it accepts in time linear in the text, and bounds the memory a compiled pattern
may take. Patterns RE2 refuses (backreferences, lookaround, or too large) are not
evaluated at all; the caller is told, so a report can say what it did not check.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import lru_cache
from typing import Any

#: Memory one compiled pattern may take; a larger one is refused, not evaluated.
MAX_PATTERN_MEMORY = 8 << 20


class Unsupported(Exception):
    """RE2 cannot run this pattern in linear time (or at all); it was not evaluated."""

    def __init__(self, pattern: str) -> None:
        super().__init__(pattern)
        self.pattern = pattern


@lru_cache(maxsize=4096)
def _compiled(pattern: str) -> Any:
    import re2  # google-re2; imported only by validation, never by build

    options = re2.Options()
    options.log_errors = False  # refusals are reported by the caller, not on stderr
    options.max_mem = MAX_PATTERN_MEMORY
    try:
        return re2.compile(pattern, options)
    except (re2.error, TypeError, ValueError):
        return None


def supported(pattern: str) -> bool:
    return _compiled(pattern) is not None


def search(pattern: str, text: str) -> bool:
    """Whether `pattern` matches somewhere in `text`; raises Unsupported, never hangs."""
    compiled = _compiled(pattern)
    if compiled is None:
        raise Unsupported(pattern)
    return compiled.search(text) is not None


def jsonschema_keywords(unchecked: set[str]) -> dict[str, Callable[..., Iterator[Any]]]:
    """`pattern`, `patternProperties` and `additionalProperties` for a jsonschema
    validator, with every document regex run through `search`.

    jsonschema's own keywords call `re.search`. A pattern RE2 cannot run is added to
    `unchecked` and treated as unknown: `pattern` reports nothing, `patternProperties`
    descends into nothing for it, and `additionalProperties` counts no key as matched by
    it. (`unevaluatedProperties`, which OpenAPI documents rarely use, still relies on
    jsonschema's `re`.)
    """
    from jsonschema.exceptions import ValidationError

    def matches(pattern: str, text: str) -> bool:
        try:
            return search(pattern, text)
        except Unsupported:
            unchecked.add(pattern)
            return False

    def pattern(validator: Any, patrn: Any, instance: Any, schema: Any) -> Iterator[Any]:
        if not (validator.is_type(instance, "string") and isinstance(patrn, str)):
            return
        try:
            ok = search(patrn, instance)
        except Unsupported:
            unchecked.add(patrn)
            return
        if not ok:
            yield ValidationError(f"{instance!r} does not match {patrn!r}")

    def pattern_properties(validator: Any, pp: Any, instance: Any, schema: Any) -> Iterator[Any]:
        if not (validator.is_type(instance, "object") and isinstance(pp, dict)):
            return
        for patrn, subschema in pp.items():
            for key, value in instance.items():
                if matches(patrn, key):
                    yield from validator.descend(value, subschema, path=key, schema_path=patrn)

    def additional_properties(validator: Any, ap: Any, instance: Any, schema: Any) -> Iterator[Any]:
        if not validator.is_type(instance, "object"):
            return
        properties = schema.get("properties") or {}
        patterns = [p for p in schema.get("patternProperties") or {} if isinstance(p, str)]
        extras = [
            key
            for key in instance
            if key not in properties and not any(matches(p, key) for p in patterns)
        ]
        if validator.is_type(ap, "object"):
            for extra in extras:
                yield from validator.descend(instance[extra], ap, path=extra)
        elif not ap and extras:
            if patterns:
                verb = "does" if len(extras) == 1 else "do"
                joined = ", ".join(repr(each) for each in sorted(extras))
                listed = ", ".join(repr(each) for each in sorted(patterns))
                yield ValidationError(f"{joined} {verb} not match any of the regexes: {listed}")
            else:
                shown = ", ".join(repr(each) for each in sorted(extras, key=str))
                verb = "was" if len(extras) == 1 else "were"
                yield ValidationError(
                    f"Additional properties are not allowed ({shown} {verb} unexpected)"
                )

    return {
        "pattern": pattern,
        "patternProperties": pattern_properties,
        "additionalProperties": additional_properties,
    }
