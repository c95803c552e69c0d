"""Envelope decoding (the reference's raw call): statuses, texts and the raw body bytes."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runtime import HostRequest as Envelope
from runtime.sandbox.envelope import (
    MAX_ENVELOPE_BYTES,
    TEXT_INVALID,
    TEXT_TOO_LARGE,
    EnvelopeRefusal,
    decode,
)

TOO_LARGE = EnvelopeRefusal(413, TEXT_TOO_LARGE)
INVALID = EnvelopeRefusal(400, TEXT_INVALID)


def test_texts_are_exact():
    assert TEXT_TOO_LARGE == "host api request envelope too large\n"
    assert TEXT_INVALID == "invalid host api request envelope\n"


def test_empty_and_oversize_are_413():
    assert decode(b"") == TOO_LARGE
    pad = b" " * (MAX_ENVELOPE_BYTES - len(b'{"method":"GET","path":"/a"}'))
    assert decode(b'{"method":"GET","path":"/a"}' + pad) == Envelope("GET", "/a", None)
    assert decode(b'{"method":"GET","path":"/a"}' + pad + b" ") == TOO_LARGE


@pytest.mark.parametrize(
    "raw",
    [
        b"not json",
        b"[1]",
        b'"s"',
        b"{",
        b'{"method":"GET","path":"/a"} x',
        b'{"method":"GET","path":"/a"}{}',
        b'{"method":"GET","path":"/a","extra":1}',
        b'{"method":1,"path":"/a"}',
        b'{"method":"GET","path":["/a"]}',
        b'{"method":null,"path":"/a"}',
        b'{"method":"GET","path":"/a","body":NaN}',
        b'{"method":"GET","path":"/a","body":Infinity}',
        b'{"method":"GET",}',
        b'{"method" "GET"}',
        b"\xff\xfe",
        b'{"method":"GET","path":"/a","body":' + b"[" * 100000 + b"]" * 100000 + b"}",
    ],
)
def test_malformed_is_400(raw):
    assert decode(raw) == INVALID


def test_body_is_the_guests_exact_bytes():
    raw = '{ "method" : "POST", "path":"/x", "body" :  {"b": 1.50, "a" : "\\u00e9é", "n": null}  }'.encode()
    assert decode(raw) == Envelope(
        "POST", "/x", '{"b": 1.50, "a" : "\\u00e9é", "n": null}'.encode()
    )


def test_body_null_is_sent_and_absent_body_is_none():
    assert decode(b'{"method":"POST","path":"/x","body":null}') == Envelope("POST", "/x", b"null")
    assert decode(b'{"method":"POST","path":"/x"}') == Envelope("POST", "/x", None)


def test_keys_match_case_insensitively_and_last_duplicate_wins():
    assert decode(b'{"METHOD":"GET","Path":"/a","path":"/b","BODY":1}') == Envelope(
        "GET", "/b", b"1"
    )


def test_missing_method_or_path_is_empty_like_go():
    assert decode(b"{}") == Envelope("", "", None)


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(),
        lambda c: st.lists(c) | st.dictionaries(st.text(), c),
        max_leaves=10,
    )
)
def test_any_json_body_round_trips_byte_for_byte(value):
    import json

    body = json.dumps(value, ensure_ascii=False, indent=1)
    raw = ('{"method":"PUT","path":"/p","body":' + body + "}").encode()
    assert decode(raw) == Envelope("PUT", "/p", body.encode())
