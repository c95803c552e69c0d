"""Media types: which a body may be sent as, and how a body of each kind travels.

One module for the generator (which types an operation's request body may have, how
types.d.ts types it), the allow-entry language (which types an entry may list) and the
runtime (how the broker builds a body, how the sandbox hands a reply body to the guest),
so a type means the same thing when it is generated, granted, sent and received.

Three kinds:

* JSON (`application/json`, `text/json`, any `+json`): a JS value, serialised as JSON;
* text (`text/*`, XML, YAML, CSV, JavaScript, `+xml`, `+yaml`, ...): a string, as UTF-8;
* binary (everything else: `application/octet-stream`, images, PDF, zip, tar): bytes.

Form and multipart bodies are JSON objects the broker turns into their encoding; for
the request side they are kinds of their own (see `runtime/broker/calls.py`).
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Literal

JSON = "application/json"
FORM = "application/x-www-form-urlencoded"
MULTIPART = "multipart/form-data"
TEXT = "text/plain"
OCTET = "application/octet-stream"

Kind = Literal["json", "text", "binary"]

# RFC 9110 8.3.1: type "/" subtype, both tokens (no wildcard, no parameter).
_TOKEN = r"[!#$%&'+\-.^_`|~0-9a-z]+"
_CONCRETE = re.compile(f"{_TOKEN}/{_TOKEN}")
#: application/* subtypes that are text, not bytes.
_TEXT_APPLICATION = frozenset(
    {
        "xml",
        "yaml",
        "x-yaml",
        "csv",
        "javascript",
        "x-javascript",
        "ecmascript",
        "graphql",
        "sql",
        "ndjson",
        "x-ndjson",
        "jsonl",
        "x-jsonlines",
        "text",
        "x-sh",
        "x-www-form-urlencoded",
    }
)


def essence(raw: str) -> str:
    """The type without parameters, lower-case: `Text/XML; charset=x` -> `text/xml`."""
    return raw.partition(";")[0].strip().lower()


def is_concrete(media: str) -> bool:
    """Can `media` be a request's Content-Type as written (lower-case, no wildcard,
    no parameter)?"""
    return _CONCRETE.fullmatch(media) is not None


@lru_cache(maxsize=512)
def kind(media: str) -> Kind:
    """How a body of this type (any spelling, parameters allowed) is held by JS code."""
    media = essence(media)
    top, _, sub = media.partition("/")
    if media == JSON or media == "text/json" or sub.endswith("+json"):
        return "json"
    if top == "text" or sub in _TEXT_APPLICATION or sub.endswith(("+xml", "+yaml")):
        return "text"
    return "binary"


def concrete(raw: str) -> str | None:
    """The Content-Type a body the document declares as `raw` is sent with, or None.

    `*/*` and `application/*` are JSON (what the generator sent for them before any
    other type could travel), `text/*` is `text/plain`, `application/*+json` JSON and
    `application/*+xml` XML, another wildcard (`image/*`) `application/octet-stream`;
    a concrete type keeps its own name (`application/merge-patch+json`), since a server
    may refuse a PATCH whose Content-Type is not the one it documents.
    """
    media = essence(raw)
    if media in ("*/*", "application/*"):
        return JSON
    if media == "text/*":
        return TEXT
    top, slash, sub = media.partition("/")
    if not slash or "*" not in sub or not _CONCRETE.fullmatch(top + "/x"):
        return media if is_concrete(media) else None
    if sub.endswith("+json"):  # application/*+json: any JSON type, so JSON itself
        return JSON
    if sub.endswith("+xml"):
        return "application/xml"
    return OCTET if sub == "*" else None


__all__ = [
    "FORM",
    "JSON",
    "MULTIPART",
    "OCTET",
    "TEXT",
    "Kind",
    "concrete",
    "essence",
    "is_concrete",
    "kind",
]
