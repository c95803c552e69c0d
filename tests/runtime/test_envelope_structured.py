"""The structured envelope, decoded exactly, at the decoder itself.

test_structured_calls.py proves structured calls end to end through the sandbox and the
broker; this file pins what `decode` alone returns for each field, so a change in the
scanner shows here in milliseconds (mutation testing found that nothing at this level
looked at `values`, `query`, `headers` or `type`: tests/mutation).
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from runtime import HostRequest as Envelope
from runtime.contract import ObjectValue
from runtime.sandbox.envelope import (
    STATUS_INVALID,
    STATUS_TOO_LARGE,
    TEXT_INVALID,
    TEXT_TOO_LARGE,
    EnvelopeRefusal,
    decode,
)

INVALID = EnvelopeRefusal(STATUS_INVALID, TEXT_INVALID)


def structured(**fields: object) -> bytes:
    return json.dumps({"method": "GET", "route": "/v1/items/*", **fields}).encode()


def test_a_structured_call_decodes_every_field_as_the_guest_sent_it() -> None:
    raw = structured(
        values=["a b", 5, 2.5, True, False, ""],
        query={"q": "x", "n": 10, "on": True, "off": False, "tags": ["a", 1, False], "gone": None},
        headers={"X-Trace": "t", "X-Deep": {"k": "v", "b": True, "n": 1}},
        type="text/plain",
        body="hi",
    )
    assert decode(raw) == Envelope(
        "GET",
        "",
        b'"hi"',
        route="/v1/items/*",
        values=("a b", "5", "2.5", "true", "false", ""),
        query=(
            ("q", "x"),
            ("n", "10"),
            ("on", "true"),
            ("off", "false"),
            ("tags", ("a", "1", "false")),
        ),
        headers=(
            ("X-Trace", "t"),
            ("X-Deep", ObjectValue((("k", "v"), ("b", "true"), ("n", "1")))),
        ),
        media_type="text/plain",
    )


def test_a_structured_call_with_only_a_route_gets_the_defaults() -> None:
    assert decode(structured()) == Envelope("GET", "", None, route="/v1/items/*")
    assert decode(structured(values=None, query=None, headers=None, type=None)) == Envelope(
        "GET", "", None, route="/v1/items/*"
    )


@pytest.mark.parametrize("text", ["", "x", "true", "false", "0", "a b"])
def test_a_string_value_stays_that_string(text: str) -> None:
    """A string "true" is not the boolean true, and no string becomes "true"/"false"."""
    decoded = decode(structured(values=[text], query={"q": text}, headers={"h": [text]}))
    assert isinstance(decoded, Envelope)
    assert decoded.values == (text,)
    assert decoded.query == (("q", text),)
    assert decoded.headers == (("h", (text,)),)


@pytest.mark.parametrize(
    "fields",
    [
        {"route": 5},
        {"route": None},
        {"route": ["/v1"]},
        {"type": 5},
        {"type": ["text/plain"]},
        {"route": 5, "type": "text/plain"},
        {"values": "a"},
        {"values": {"a": 1}},
        {"values": [["a"]]},
        {"values": [{"a": 1}]},
        {"values": [None]},
        {"query": ["q", "x"]},
        {"query": "q=x"},
        {"query": {"q": [["x"]]}},
        {"query": {"q": {"k": ["x"]}}},
        {"headers": {"h": [{"k": "v"}]}},
        {"headers": 1},
        {"path": "/v1/items/1"},
    ],
)
def test_a_structured_call_of_the_wrong_shape_is_a_400_refusal(fields: dict) -> None:
    assert decode(structured(**fields)) == INVALID


@pytest.mark.parametrize("raw", ["{~", "{\x7f", "{\u00e9", "{\u00e9}", "{ ~ }", "{}~"])
def test_only_a_closing_brace_closes_an_empty_object(raw: str) -> None:
    """`s[i] == "}"` -> `s[i] >= "}"` accepted `{~` as the empty envelope."""
    assert decode(raw.encode()) == INVALID
    assert decode(b"{ }") == Envelope("", "", None)


def test_a_refusal_is_a_frozen_hashable_value() -> None:
    refusal = decode(b"{")
    assert refusal == INVALID and hash(refusal) == hash(INVALID)
    with pytest.raises(dataclasses.FrozenInstanceError):
        refusal.status = 200  # type: ignore[misc]


@pytest.mark.parametrize(
    "raw",
    [
        "|}",  # `s[i] != "{"` -> `s[i] < "{"` took any character after "{" as an opening
        "}}",
        "~}",
        "\u00e9}",
        '{"method";"GET"}',  # `s[i] != ":"` -> `s[i] < ":"` took ";" or "=" as the colon
        '{"method"="GET"}',
        '{"method"~"GET"}',
        '{"method" \u00e9 "GET"}',
        '{"method":"GET";"path":"/a"}',
        '{"method":"GET"|',
        '{"method":"GET""path":"/a"}',  # `s[i] == ","` -> `s[i] <= ","` took '"' or '+'
        '{"method":"GET"+"path":"/a"}',
        '{xmethod":"GET"}',  # `s[i] != '"'` -> `s[i] < '"'` took any later character
        '{"method","GET"}',  # `s[i] != ":"` -> `s[i] > ":"` took ',' or '-'
        '{"method"-"GET"}',
        '{"method":"GET","path":"/a"}x',  # one character after the closing brace: kills
        '{"method":"GET"}}',  # `i += 1` -> `i += 2` past it (trailing data unseen)
        "{}x",
    ],
)
def test_only_json_punctuation_delimits_the_envelope(raw: str) -> None:
    assert decode(raw.encode()) == INVALID


@pytest.mark.parametrize("lead", [" ", "\t", "   ", " \n\r"])
def test_an_object_after_an_odd_run_of_whitespace_decodes(lead: str) -> None:
    """kills `_skip_ws(s, i + 1)` -> `i | 1` and `i ^ 1` after the "{" (equal to i + 1 only
    when the brace sits at an even index)."""
    assert decode((lead + '{"method":"GET","path":"/a"}').encode()) == Envelope("GET", "/a")
    assert decode((lead + "{}").encode()) == Envelope("", "", None)


def test_the_size_limit_is_exact() -> None:
    """kills MAX_ENVELOPE_BYTES = 1114112 -> 1114113 and -> 1114111: the limit is the
    reference's 1 MiB + 64 KiB, written out here, not read back from the module."""
    limit = 1024 * 1024 + 64 * 1024
    head = b'{"method":"GET","path":"/a"}'
    exact = head + b" " * (limit - len(head))
    assert decode(exact) == Envelope("GET", "/a")
    assert decode(exact + b" ") == EnvelopeRefusal(STATUS_TOO_LARGE, TEXT_TOO_LARGE)
