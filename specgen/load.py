"""Reading an OpenAPI document from a file or stdin, as JSON or YAML.

orjson first: on large documents it parses several times faster than `json`, and most
published documents are JSON. YAML is the fallback for text that is not JSON.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import yaml

from specgen.errors import SpecError

try:  # the C loader is ~10x faster; fall back quietly where libyaml is missing
    _YamlLoader: type = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - depends on how PyYAML was built
    _YamlLoader = yaml.SafeLoader


@dataclass(frozen=True)
class Source:
    """A loaded document and the name messages use for it (`-` reads as `stdin`)."""

    name: str
    doc: dict[str, Any]
    raw: bytes


def read_bytes(path: str) -> tuple[str, bytes]:
    """The bytes of `path`, or of stdin for `-`; a read failure is one line."""
    if path == "-":
        return "stdin", sys.stdin.buffer.read()
    try:
        return path, Path(path).read_bytes()
    except OSError as exc:
        raise SpecError(f"specgen: {path}: cannot read: {exc.strerror or exc}") from None


def parse(name: str, raw: bytes) -> dict[str, Any]:
    """Parse JSON, else YAML, and insist on an object at the top level."""
    try:
        doc: Any = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        if raw.lstrip()[:1] in (b"{", b"["):
            raise SpecError(f"specgen: {name}: invalid JSON: {_one_line(str(exc))}") from None
        try:
            doc = yaml.load(raw, Loader=_YamlLoader)
        except yaml.YAMLError as yexc:
            raise SpecError(f"specgen: {name}: invalid YAML: {_one_line(str(yexc))}") from None
        except (UnicodeDecodeError, ValueError, RecursionError) as yexc:
            raise SpecError(f"specgen: {name}: cannot parse: {_one_line(str(yexc))}") from None
    if not isinstance(doc, dict):
        kind = "empty" if doc is None else type(doc).__name__
        raise SpecError(f"specgen: {name}: the top level must be an object, not {kind}")
    return doc


def load(path: str) -> Source:
    name, raw = read_bytes(path)
    return Source(name=name, doc=parse(name, raw), raw=raw)


def _one_line(text: str) -> str:
    return " ".join(text.split())
