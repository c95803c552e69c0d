"""Cut one API's part out of a provider's whole OpenAPI document.

Providers publish one huge document (Cloudflare's is about 30 MB) of which an operator
needs a few paths. The cut is only trustworthy if it comes from the exact file that was
reviewed, so the caller pins the whole file's SHA-256 and any other file is refused.

What is kept: `openapi`, `info`, `servers`, `security` (and `jsonSchemaDialect`, which
changes what a 3.1 document's schemas mean), the selected path items byte-for-byte as
objects, every component they reference (transitively, through components referencing
components), and every security scheme, so the cut validates on its own.

Output serialisation (deterministic, documented so a cut can be diffed and pinned):
UTF-8 JSON, 2-space indentation, `": "` after keys, keys in the order of the source
document, non-ASCII characters written as themselves, one trailing newline.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import unquote

import orjson

from specgen.duplicates import check_json
from specgen.errors import SpecError
from specgen.refs import MISSING, resolve_pointer

# Top-level members copied unchanged when present (in the source's order).
_KEPT_TOP_LEVEL = frozenset(("openapi", "info", "jsonSchemaDialect", "servers", "security"))
_OPERATION_KEYS = ("get", "put", "post", "delete", "options", "head", "patch", "trace", "query")
_COMPONENTS_PREFIX = "/components/"


#: 20 digits in a row: the shortest integer literal that may not fit in 64 bits (2**64 has 20).
_MAYBE_WIDE_INTEGER = re.compile(rb"[0-9]{20}")


def _parse(whole: bytes, source_name: str) -> Any:
    if whole.lstrip()[:1] not in (b"{", b"["):
        # Not JSON: YAML, read exactly as `build` reads it (the cut is written as JSON).
        from specgen.load import parse

        return parse(source_name, whole)
    if _MAYBE_WIDE_INTEGER.search(whole):
        # orjson reads an integer between 2**64 and about 1e308 as a float without a word
        # (2**70 + 1 became 1.1805916207174113e+21 in the cut); the standard library keeps
        # every integer exact. A run of 20 digits inside a string only costs the slower parse.
        try:
            doc = json.loads(whole)
        except (ValueError, RecursionError) as exc:
            raise SpecError(f"specgen: {source_name}: not JSON: {exc}") from None
        check_json(source_name, whole, doc)
        return doc
    try:
        doc = orjson.loads(whole)
        check_json(source_name, whole, doc)
        return doc
    except orjson.JSONDecodeError as exc:
        # orjson refuses integers wider than 64 bits, which JSON allows; the standard
        # library accepts them, so only a document both refuse is "not JSON".
        try:
            doc = json.loads(whole)
        except (ValueError, RecursionError):
            raise SpecError(f"specgen: {source_name}: not JSON: {exc}") from None
        check_json(source_name, whole, doc)  # this parser too keeps the last of two equal keys
        return doc


def _dump(doc: dict) -> bytes:
    try:
        return orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n"
    except TypeError:
        # Only integers wider than 64 bits get here (see _parse); the standard library
        # writes the same layout for them.
        return (json.dumps(doc, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def _tags_of(item: dict) -> set[str]:
    tags: set[str] = set()
    for key in _OPERATION_KEYS:
        op = item.get(key)
        if isinstance(op, dict) and isinstance(op.get("tags"), list):
            tags.update(t for t in op["tags"] if isinstance(t, str))
    return tags


def _component_key(ref: str, holder: str, source_name: str) -> tuple[str, str]:
    """(section, name) of the component a local `$ref` points into.

    A reference deep into a component ("#/components/schemas/A/properties/b") keeps the
    whole component A. The pointer is percent-decoded, then RFC 6901-unescaped.
    """
    if not ref.startswith("#"):
        raise SpecError(
            f"specgen: {source_name}: {holder} refers to {json.dumps(ref)}, outside the "
            f"document; a cut must stand alone, so bundle the whole document first"
        )
    pointer = unquote(ref[1:])
    if not pointer.startswith(_COMPONENTS_PREFIX):
        raise SpecError(
            f"specgen: {source_name}: {holder} refers to {json.dumps(ref)}, which is not "
            f"under #/components/; only components can be carried into a cut"
        )
    parts = pointer[len(_COMPONENTS_PREFIX) :].split("/")
    if len(parts) < 2:
        raise SpecError(
            f"specgen: {source_name}: {holder} refers to {json.dumps(ref)}, which names no component"
        )
    section, name = (p.replace("~1", "/").replace("~0", "~") for p in parts[:2])
    return section, name


def _refs(node: Any) -> Iterable[str]:
    """Every reference under node (iteratively: documents nest deeply).

    Besides `$ref`, a discriminator's `mapping` names schemas too, either as a local
    reference or as a bare schema name; a cut without them would leave the mapping
    dangling.
    """
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, dict):
            ref = current.get("$ref")
            if isinstance(ref, str):
                yield ref
            discriminator = current.get("discriminator")
            if isinstance(discriminator, dict) and isinstance(discriminator.get("mapping"), dict):
                for target in discriminator["mapping"].values():
                    if isinstance(target, str):
                        yield target if "/" in target or "#" in target else _schema_ref(target)
            stack.extend(v for v in current.values() if isinstance(v, (dict, list)))
        elif isinstance(current, list):
            stack.extend(v for v in current if isinstance(v, (dict, list)))


def _schema_ref(name: str) -> str:
    return "#/components/schemas/" + name.replace("~", "~0").replace("/", "~1")


def _check_pointer_inside(doc: dict, ref: str, source_name: str, holder: str) -> None:
    """A reference must land somewhere, also one deeper than the component itself.

    Every reference is resolved, not only those with more than three "/": a slash may be
    percent-encoded ("#/components/schemas/Item%2Fnope" has four once decoded), and
    a count on the raw text let such a dangling reference into the cut.
    """
    if resolve_pointer(doc, ref[1:]) is MISSING:
        raise SpecError(
            f"specgen: {source_name}: {holder} refers to {json.dumps(ref)}, which does not resolve"
        )


def extract(
    whole: bytes,
    *,
    sha256: str,
    path_prefixes: list[str],
    tags: list[str],
    source_name: str,
) -> bytes:
    """Return the cut document as bytes (the caller writes them atomically).

    Raises SpecError (one line) for: a file whose SHA-256 is not the pin, no selector,
    not JSON or YAML, a non-object document, nothing selected, or a reference that cannot be
    carried into the cut (remote, outside #/components/, or unresolvable).
    """
    actual = hashlib.sha256(whole).hexdigest()
    if actual != sha256.strip().lower():
        raise SpecError(
            f"specgen: {source_name} has SHA-256 {actual}, not the pinned {sha256}; "
            f"refusing to cut from any other file"
        )
    if not path_prefixes and not tags:
        raise SpecError(
            "specgen: extract needs at least one --path-prefix or --tag to select paths"
        )

    doc = _parse(whole, source_name)
    if not isinstance(doc, dict):
        raise SpecError(f"specgen: {source_name}: the top level is not a JSON object")
    paths = doc.get("paths")
    if not isinstance(paths, dict):
        raise SpecError(f"specgen: {source_name}: the document has no paths object to cut from")

    components = doc.get("components")
    if components is not None and not isinstance(components, dict):
        raise SpecError(f"specgen: {source_name}: components is not an object")
    components = components or {}

    wanted_tags = set(tags)
    prefixes = tuple(path_prefixes)
    selected: dict[str, Any] = {}
    for path, item in paths.items():
        if prefixes and path.startswith(prefixes):
            selected[path] = item
            continue
        if wanted_tags and isinstance(item, dict):
            target = item
            ref = item.get("$ref")
            if isinstance(ref, str):
                # A path item defined elsewhere carries its tags there. One that cannot
                # be found has no tags to match; it is not selected, so it cannot spoil
                # a cut of other paths.
                try:
                    section, name = _component_key(ref, f"path {json.dumps(path)}", source_name)
                except SpecError:
                    section, name = "", ""
                section_map = components.get(section)
                target = section_map.get(name) if isinstance(section_map, dict) else None
                if not isinstance(target, dict):
                    target = {}
            if _tags_of(target) & wanted_tags:
                selected[path] = item
    if not selected:
        chosen = [f"--path-prefix {json.dumps(p)}" for p in path_prefixes]
        chosen += [f"--tag {json.dumps(t)}" for t in tags]
        raise SpecError(
            f"specgen: {source_name}: no path matches {' or '.join(chosen)}; nothing to cut"
        )

    # Transitive closure over components, starting from everything kept verbatim.
    keep: set[tuple[str, str]] = set()
    schemes = components.get("securitySchemes")
    schemes = schemes if isinstance(schemes, dict) else {}
    keep.update(("securitySchemes", name) for name in schemes)
    roots: list[tuple[str, Any]] = [
        (f"path {json.dumps(path)}", item) for path, item in selected.items()
    ]
    roots += [(f"components/securitySchemes/{name}", scheme) for name, scheme in schemes.items()]
    pending = list(roots)
    while pending:
        holder, node = pending.pop()
        for ref in _refs(node):
            section, name = _component_key(ref, holder, source_name)
            section_map = components.get(section)
            if not isinstance(section_map, dict) or name not in section_map:
                raise SpecError(
                    f"specgen: {source_name}: {holder} refers to {json.dumps(ref)}, which does not resolve"
                )
            _check_pointer_inside(doc, ref, source_name, holder)
            if (section, name) not in keep:
                keep.add((section, name))
                pending.append((f"components/{section}/{name}", section_map[name]))

    kept_components: dict[str, Any] = {}
    for section, members in components.items():
        if not isinstance(members, dict):
            continue
        chosen_members = {name: value for name, value in members.items() if (section, name) in keep}
        if chosen_members:
            kept_components[section] = chosen_members
    cut: dict[str, Any] = {}
    for key, value in doc.items():
        if key in _KEPT_TOP_LEVEL:
            cut[key] = value
        elif key == "paths":
            cut[key] = selected
        elif key == "components" and kept_components:
            cut[key] = kept_components
    return _dump(cut)
