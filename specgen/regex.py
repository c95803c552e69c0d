"""Regular expressions from a document, run by RE2, a linear-time engine.

A document's `pattern` (and `patternProperties`) is text its author chose, and Python's
backtracking `re` takes time exponential in the input on patterns such as `^(a+)+$`:
`specgen validate` hung on one applied to a 30-character example. RE2 runs every
pattern it accepts in time linear in the text, and bounds the memory a compiled pattern
may take. Patterns RE2 refuses (backreferences, lookaround, or too large) are not
evaluated at all; the caller is told, so a report can say what it did not check.

Every keyword of jsonschema that would call Python's `re` on a document's text is
replaced here: `pattern`, `patternProperties`, `additionalProperties`,
`unevaluatedProperties` (which finds the keys `patternProperties` evaluated), and the
`regex` format. The bounds are real ones: a pattern longer than MAX_PATTERN_CHARS is
refused before RE2 parses it, the compiled program is held to MAX_PATTERN_MEMORY, and
patterns are compiled without capture groups, because a match is only ever asked
whether it exists. (RE2 keeps a capture array per thread of its search: a pattern of n
nested groups cost memory in n squared, 1.6 GB for n = 10,000, with captures on.)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import lru_cache
from typing import Any

#: Memory one compiled pattern may take; a larger one is refused, not evaluated.
MAX_PATTERN_MEMORY = 8 << 20
#: The longest pattern evaluated (characters). The longest in the 2,645 documents of the
#: test corpus is about 22,000; parsing is linear, and this bounds it.
MAX_PATTERN_CHARS = 65_536


class Unsupported(Exception):
    """RE2 cannot run this pattern in linear time (or at all); it was not evaluated."""

    def __init__(self, pattern: str) -> None:
        super().__init__(pattern)
        self.pattern = pattern


def too_long(pattern: str) -> bool:
    """Is `pattern` past the bound, refused before RE2 sees it?"""
    return len(pattern) > MAX_PATTERN_CHARS


@lru_cache(maxsize=4096)
def _compiled(pattern: str) -> Any:
    if not isinstance(pattern, str) or too_long(pattern):
        return None
    import re2  # google-re2; imported only by validation, never by build

    options = re2.Options()
    options.log_errors = False  # refusals are reported by the caller, not on stderr
    options.max_mem = MAX_PATTERN_MEMORY
    options.never_capture = True  # only "is there a match" is asked; see the docstring
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
    """`pattern`, `patternProperties`, `additionalProperties` and
    `unevaluatedProperties` for a jsonschema validator, with every document regex run
    through `search`.

    jsonschema's own keywords call `re.search`. A pattern RE2 cannot run is added to
    `unchecked` and treated as unknown: `pattern` reports nothing, `patternProperties`
    descends into nothing for it, and `additionalProperties` and
    `unevaluatedProperties` count no key as matched by it.
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

    def evaluated(validator: Any, instance: dict[Any, Any], schema: Any) -> set[Any]:
        """The keys of `instance` some keyword of `schema` evaluates (JSON Schema 2020-12
        section 11.3: annotations from adjacent keywords and from subschemas that
        pass, through `$ref` and `$dynamicRef`)."""
        if not isinstance(schema, dict):
            return set()
        keys: set[Any] = set()
        for ref_keyword in ("$ref", "$dynamicRef"):
            ref = schema.get(ref_keyword)
            if isinstance(ref, str):
                resolved = validator._resolver.lookup(ref)
                inner = validator.evolve(schema=resolved.contents, _resolver=resolved.resolver)
                keys |= evaluated(inner, instance, resolved.contents)
        properties = schema.get("properties")
        if isinstance(properties, dict):
            keys |= properties.keys() & instance.keys()
        patterns = schema.get("patternProperties")
        if isinstance(patterns, dict):
            keys |= {k for k in instance if any(matches(p, k) for p in patterns)}
        for keyword in ("additionalProperties", "unevaluatedProperties"):
            if keyword in schema:
                sub = validator.evolve(schema=schema[keyword])
                keys |= {k for k, v in instance.items() if sub.is_valid(v)}
        dependent = schema.get("dependentSchemas")
        if isinstance(dependent, dict):
            for name, sub in dependent.items():
                if name in instance:
                    keys |= evaluated(validator, instance, sub)
        for keyword in ("allOf", "anyOf", "oneOf"):
            for sub in schema.get(keyword) or ():
                if validator.evolve(schema=sub).is_valid(instance):
                    keys |= evaluated(validator, instance, sub)
        if "if" in schema:
            if validator.evolve(schema=schema["if"]).is_valid(instance):
                keys |= evaluated(validator, instance, schema["if"])
                keys |= evaluated(validator, instance, schema.get("then"))
            else:
                keys |= evaluated(validator, instance, schema.get("else"))
        return keys

    def unevaluated_properties(
        validator: Any, up: Any, instance: Any, schema: Any
    ) -> Iterator[Any]:
        if not validator.is_type(instance, "object"):
            return
        seen = evaluated(validator, instance, schema)
        rest = [key for key in instance if key not in seen]
        invalid = [
            key
            for key in rest
            if next(validator.descend(instance[key], up, path=key, schema_path=key), None)
            is not None
        ]
        if not invalid:
            return
        shown = ", ".join(repr(each) for each in sorted(invalid, key=str))
        verb = "was" if len(invalid) == 1 else "were"
        if up is False:
            yield ValidationError(
                f"Unevaluated properties are not allowed ({shown} {verb} unexpected)"
            )
        else:
            yield ValidationError(
                "Unevaluated properties are not valid under the given schema "
                f"({shown} {verb} unevaluated and invalid)"
            )

    return {
        "pattern": pattern,
        "patternProperties": pattern_properties,
        "additionalProperties": additional_properties,
        "unevaluatedProperties": unevaluated_properties,
    }


def format_checker(base: Any) -> Any:
    """`base` (a jsonschema FormatChecker) without a check of the `regex` format, whose
    own check compiles the document's value with Python's `re`. RE2 cannot stand in: it
    refuses valid ECMA-262 patterns (lookaround), so what it refuses says nothing."""
    from jsonschema import FormatChecker

    checker = FormatChecker(())
    checker.checkers = {**base.checkers, "regex": (lambda value: True, ())}
    return checker
