"""Reading an OpenAPI document from a file or stdin, as JSON or YAML.

jiter first: most published documents are JSON, and it refuses a repeated key while it
parses, where orjson (the next reader) keeps the last of two equal keys and needs a
separate check. YAML is the fallback for text that is not JSON.
"""

from __future__ import annotations

import datetime
import errno
import sys
from typing import Any, NamedTuple

import jiter

from specgen.duplicates import check_json, strict_yaml_loader
from specgen.errors import SpecError
from specgen.files import read_input, read_stream_limited


def _yaml() -> tuple[Any, type]:
    """PyYAML and its fastest safe loader, refusing repeated keys, imported only for a
    document that is not JSON (most are JSON, and the import is about a tenth of a small
    build)."""
    import yaml

    try:  # the C loader is ~10x faster; fall back quietly where libyaml is missing
        base: type = yaml.CSafeLoader
    except AttributeError:  # pragma: no cover - depends on how PyYAML was built
        base = yaml.SafeLoader
    return yaml, strict_yaml_loader(base)  # a repeated key is refused, not dropped


# Values a YAML document may expand to: one per byte of input, plus a floor for small
# documents. Real documents make about 0.03 values per byte (30 times below this, so
# anchors reused as shared schemas still fit), and a value costs memory whether it came
# from text or from an alias: at this bound an alias bomb takes about as much memory as
# a plain document of its size (tens of times the input), where 16 per byte let it take
# 270 times the input.
_YAML_VALUES_PER_BYTE = 1
_YAML_VALUES_FLOOR = 10_000


class Source(NamedTuple):  # a NamedTuple: see specgen/frozen.py
    """A loaded document and the name messages use for it (`-` reads as `stdin`)."""

    name: str
    doc: dict[str, Any]


def read_bytes(path: str) -> tuple[str, bytes]:
    """The bytes of `path`, or of stdin for `-`; a read failure is one line.

    A named input is a regular file or a pipe (`<(curl ...)`), read without waiting
    for a writer that may never come (`files.read_input`); a device, which may never
    end, or a folder is refused before it is opened.
    """
    name = "stdin" if path == "-" else path
    try:
        if path == "-":
            return name, read_stream_limited(sys.stdin.buffer)
        return name, read_input(path)
    except OSError as exc:
        why = exc.strerror or str(exc)
        if exc.errno == errno.EINVAL:
            why += " (give a file, a pipe, or - to read stdin)"
        raise SpecError(f"specgen: {name}: cannot read: {why}") from None


_UNREAD: Any = object()


def _strict_json(raw: bytes) -> Any:
    """`raw` read by jiter, refusing a repeated key; _UNREAD when jiter refuses the text,
    which leaves the verdict and its words to the readers below.

    One native pass does what orjson's parse and check_json's count did in two and a
    half: on GitHub's 13 MB document about 48 ms against 70. It reads JSON as orjson
    does, but for numbers orjson cannot hold: an integer wider than 64 bits stays
    exact (orjson made it a float, without a word), and a number beyond a double's
    range reads as infinity, as JavaScript's JSON.parse and YAML's `.inf` do (orjson
    refused it). jiter refuses nesting deeper than 200 levels, and orjson then reads
    the document as before.

    A repeated key goes below too: jiter stops reading at it, and the text after it may
    be text orjson refuses (NaN, a lone surrogate) that the full check's parser reads, so
    naming the key here would replace orjson's refusal with another. Below, orjson reads
    it first and the full check then names the key, as before jiter; a document that
    repeats a key is refused either way, so only refused documents pay the second parse.
    """
    try:
        return jiter.from_json(raw, allow_inf_nan=False, catch_duplicate_keys=True)
    except ValueError:
        return _UNREAD


def parse(name: str, raw: bytes) -> dict[str, Any]:
    """Parse JSON, else YAML, and insist on an object at the top level."""
    doc: Any = _strict_json(raw)
    if doc is _UNREAD:
        doc = _json_or_yaml(name, raw)
    if not isinstance(doc, dict):
        kind = "empty" if doc is None else type(doc).__name__
        raise SpecError(f"specgen: {name}: the top level must be an object, not {kind}")
    return doc


def _json_or_yaml(name: str, raw: bytes) -> Any:
    """What jiter did not read: YAML's reading of text that does not open like JSON,
    else orjson's, which gives the message for JSON both refuse and reads nesting deeper
    than jiter's limit. orjson is imported here: a build jiter reads never needs it."""
    if raw.lstrip()[:1] not in (b"{", b"["):
        return _yaml_document(name, raw)
    import orjson

    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise SpecError(f"specgen: {name}: invalid JSON: {_one_line(str(exc))}") from None
    check_json(name, raw, doc)  # orjson keeps the last of two equal keys without a word
    return doc


def _yaml_document(name: str, raw: bytes) -> Any:
    yaml, loader = _yaml()
    try:
        doc = yaml.load(raw, Loader=loader)
    except yaml.YAMLError as yexc:
        raise SpecError(f"specgen: {name}: invalid YAML: {_one_line(str(yexc))}") from None
    except (UnicodeDecodeError, ValueError, RecursionError) as yexc:
        raise SpecError(f"specgen: {name}: cannot parse: {_one_line(str(yexc))}") from None
    limit = _YAML_VALUES_PER_BYTE * len(raw) + _YAML_VALUES_FLOOR
    try:
        return _as_json(doc, [limit])
    except _Expands:
        raise SpecError(
            f"specgen: {name}: YAML aliases expand to more than {limit} values; "
            "refusing a document that grows that much on loading"
        ) from None
    except RecursionError:
        raise SpecError(f"specgen: {name}: YAML nests too deeply (or refers to itself)") from None
    except TypeError as texc:
        raise SpecError(f"specgen: {name}: {texc}") from None


def _key(key: Any) -> str:
    if isinstance(key, str):
        return key
    if isinstance(key, bool) or key is None:
        return {True: "true", False: "false", None: "null"}[key]
    if isinstance(key, int | float):
        return str(key)
    if isinstance(key, datetime.date):
        return key.isoformat()
    raise TypeError(f"a YAML mapping key of type {type(key).__name__} has no JSON equivalent")


class _Expands(Exception):
    """The YAML document grew past its value budget while being converted."""


def _as_json(node: Any, budget: list[int]) -> Any:
    """YAML's data model in JSON's: what the validator and the generator expect.

    YAML documents routinely write response codes as `200:`, an int key, and unquoted
    dates load as date objects; JSON has neither, and the validator refuses both.
    `budget` (one counter, shared by the whole walk) bounds the values made: YAML
    aliases let a few hundred bytes stand for a billion values, and every later step
    (validation, generation, output) would walk them all.
    """
    budget[0] -= 1
    if budget[0] < 0:
        raise _Expands
    if isinstance(node, dict):
        return {_key(k): _as_json(v, budget) for k, v in node.items()}
    if isinstance(node, list):
        return [_as_json(v, budget) for v in node]
    if isinstance(node, datetime.date):  # datetime is a date too
        return node.isoformat()
    if node is None or isinstance(node, str | int | float | bool):
        return node
    raise TypeError(f"a YAML value of type {type(node).__name__} has no JSON equivalent")


def load(path: str) -> Source:
    name, raw = read_bytes(path)
    return Source(name=name, doc=parse(name, raw))


def _one_line(text: str) -> str:
    return " ".join(text.split())
