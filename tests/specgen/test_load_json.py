"""jiter reads a JSON document as orjson did, refuses a repeated key with the words the
full check used, and differs only where orjson could not hold a number."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner
from hypothesis import example, given, settings
from hypothesis import strategies as st

from specgen import load
from specgen.cli import cli
from specgen.duplicates import check_json
from specgen.errors import SpecError
from specgen.load import parse
from tests.specgen.test_review_build import DUPLICATES

_KEYS = st.text(
    alphabet=st.sampled_from([*'ab:"\\/\u00e9\u2028\x00\x1f', "\U0001f600"]), max_size=4
)


@st.composite
def _number_text(draw: Any) -> str:
    """A JSON number as a document may write it: sign, long mantissas, fractions and
    exponents of every size a double holds, so rounding is compared too."""
    digits = draw(st.text(alphabet="0123456789", min_size=1, max_size=25))
    whole = digits.lstrip("0") or "0"
    text = ("-" if draw(st.booleans()) else "") + whole
    # an integer that may not fit in 64 bits is where orjson and jiter differ: a fraction
    # makes it a float in both
    if len(whole) > 18 or draw(st.booleans()):
        text += "." + draw(st.text(alphabet="0123456789", min_size=1, max_size=25))
    if draw(st.booleans()):
        exponent = draw(st.integers(-340, 300 - len(whole)))
        plus = "+" if exponent >= 0 and draw(st.booleans()) else ""
        text += draw(st.sampled_from("eE")) + plus + str(exponent)
    return text


@st.composite
def _json_text(draw: Any, depth: int = 0) -> str:
    """JSON text with every string character escaped or not at random and whitespace
    anywhere JSON allows it; keys in one object are distinct."""
    ws = draw(st.sampled_from(["", " ", "\n\t", "\r\n "]))
    kind = draw(st.sampled_from(["object", "array", "scalar"] if depth < 4 else ["scalar"]))
    if kind == "object":
        keys = draw(st.lists(_KEYS, max_size=4, unique=True))
        pairs = [f"{ws}{_string(k, draw)}{ws}:{ws}{draw(_json_text(depth + 1))}" for k in keys]
        return "{" + ",".join(pairs) + ws + "}"
    if kind == "array":
        items = draw(st.lists(_json_text(depth + 1), max_size=3))
        return "[" + ",".join(f"{ws}{item}" for item in items) + ws + "]"
    return draw(
        st.one_of(
            _number_text(),
            st.sampled_from(["true", "false", "null"]),
            _KEYS.map(lambda s: _string(s, draw)),
        )
    )


def _string(text: str, draw: Any) -> str:
    out = []
    for ch in text:
        if ch in '"\\' or ord(ch) < 0x20 or draw(st.booleans()):
            if ord(ch) > 0xFFFF:
                c = ord(ch) - 0x10000
                out.append(f"\\u{0xD800 + (c >> 10):04x}\\u{0xDC00 + (c & 0x3FF):04x}")
            else:
                out.append(f"\\u{ord(ch):04{draw(st.sampled_from('xX'))}}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


@settings(max_examples=1500, deadline=None)
@given(_json_text())
@example('{"a": 0.1000000000000000055511151231257827, "b": 2.2250738585072011e-308}')
@example('{"n": -0.0, "m": 1E+2, "k": 9223372036854775807, "j": -9223372036854775808}')
@example('{"s": "\\ud83d\\ude00\\u2028\\u0000"}')
def test_jiter_reads_what_orjson_reads(text: str) -> None:
    raw = ('{"openapi":"3.0.0","x":' + text + "}").encode("utf-8")
    # orjson's text of each reading: 1 and 1.0, or 0.0 and -0.0, compare unequal here
    assert orjson.dumps(parse("doc.json", raw)) == orjson.dumps(orjson.loads(raw))


@pytest.mark.parametrize(("raw", "key"), DUPLICATES)
def test_a_repeated_key_gets_the_full_checks_words(raw: str, key: str) -> None:
    data = raw.encode("utf-8")
    with pytest.raises(SpecError) as by_load:
        parse("doc.json", data)
    with pytest.raises(SpecError) as by_full_check:
        check_json("doc.json", data)
    assert str(by_load.value) == str(by_full_check.value)


def test_numbers_orjson_could_not_hold() -> None:
    """An integer wider than 64 bits stays exact (orjson read 2**70 + 1 as a float);
    a number beyond a double's range reads as infinity (orjson refused the document)."""
    doc = parse("doc.json", b'{"wide": 1180591620717411303425, "big": 1e400, "small": -1e400}')
    assert doc["wide"] == 2**70 + 1 and isinstance(doc["wide"], int)
    assert doc["big"] == math.inf and doc["small"] == -math.inf
    assert orjson.loads(b'{"wide": 1180591620717411303425}')["wide"] != 2**70 + 1


def test_nesting_deeper_than_jiter_reads_is_read_by_orjson(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    inner = '{"d":1}'
    for _ in range(300):
        inner = '{"n":' + inner + "}"
    raw = ('{"openapi":"3.0.0","x":' + inner + "}").encode()
    fallback = load._json_or_yaml
    read_by: list[str] = []

    def recorded(name: str, text: bytes) -> Any:
        read_by.append(name)
        return fallback(name, text)

    monkeypatch.setattr(load, "_json_or_yaml", recorded)
    assert parse("deep.json", raw) == json.loads(raw)
    assert read_by == ["deep.json"]  # jiter refused it; the fallback read it


def test_text_that_is_not_json_reads_as_yaml_or_is_refused_as_json() -> None:
    assert parse("doc.yaml", b"openapi: 3.0.0\na: 1\n") == {"openapi": "3.0.0", "a": 1}
    with pytest.raises(SpecError, match=r"^specgen: doc\.json: invalid JSON: "):
        parse("doc.json", b'{"openapi": "3.0.0", "a": }')
    with pytest.raises(SpecError, match="the top level must be an object, not list"):
        parse("doc.json", b"[1, 2]")


def test_a_json_document_is_read_by_jiter_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fallback readers run only for what jiter refused."""

    def fallback(*_args: Any) -> Any:
        raise AssertionError("the fallback reader ran")

    monkeypatch.setattr(load, "_json_or_yaml", fallback)
    assert parse("doc.json", b'{"openapi": "3.0.0", "x": [1, 2.5, "\\u003a"]}')["x"][2] == ":"


def test_a_document_with_an_infinite_enum_builds_valid_types(tmp_path: Path) -> None:
    doc = {
        "openapi": "3.0.3",
        "info": {"title": "t", "version": "1"},
        "paths": {
            "/a": {
                "get": {
                    "operationId": "getA",
                    "responses": {
                        "200": {
                            "description": "ok",
                            "content": {
                                "application/json": {
                                    "schema": {"type": "number", "enum": ["INF", 2]}
                                }
                            },
                        }
                    },
                }
            }
        },
    }
    spec = tmp_path / "inf.json"
    spec.write_text(json.dumps(doc).replace('"INF"', "1e400"))
    result = CliRunner().invoke(cli, ["build", str(spec), "-o", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    types = (tmp_path / "out" / "types.d.ts").read_text()
    assert "getA(): Promise<number>;" in types and "Infinity" not in types


def _paths_twice_beside(deep: str) -> bytes:
    """Two `/items` paths (the second would silently replace the first) beside `deep`."""
    return (
        '{"openapi": "3.0.3", "paths": {"/items": {"get": {}}, "/items": {"delete": {}}},'
        ' "x-deep": ' + deep + "}"
    ).encode()


def _call_at_depth(frames: int, fn: Any) -> Any:
    return fn() if frames == 0 else _call_at_depth(frames - 1, fn)


@pytest.mark.parametrize("caller_frames", [0, 400])
@pytest.mark.parametrize("depth", [150, 500, 900, 990, 1000, 1023])
def test_a_repeated_key_is_refused_however_deep_the_document_nests(
    depth: int, caller_frames: int
) -> None:
    """Nesting that jiter refuses (past 200) and orjson reads (up to 1024) goes to the full
    check, the standard library's recursive parser: when that ran out of Python's recursion
    limit (about 990 levels, fewer the deeper the caller's stack), the document was
    accepted with its repeated key, and the build silently lost the first `/items`."""
    raw = _paths_twice_beside("[" * depth + "1" + "]" * depth)
    limit = sys.getrecursionlimit()
    with pytest.raises(SpecError) as info:
        _call_at_depth(caller_frames, lambda: parse("deep.json", raw))
    assert str(info.value) == 'specgen: deep.json: duplicate key "/items" in the object at /paths'
    assert sys.getrecursionlimit() == limit  # the room made for the full check is given back


def test_nesting_past_what_orjson_reads_is_refused_as_before_even_with_a_repeated_key() -> None:
    raw = _paths_twice_beside("[" * 1025 + "1" + "]" * 1025)
    with pytest.raises(
        SpecError, match=r"^specgen: deep\.json: invalid JSON: depth limit exceeded"
    ):
        parse("deep.json", raw)


def test_a_full_check_that_runs_out_of_room_refuses(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail closed: should the full check ever run out of recursion room on a document
    orjson read, the document is refused, not let through unchecked. (The standard
    library's parser is made to run out here: how deep it reaches depends on the
    Python version, whose C recursion limit differs.)"""

    def out_of_room(*_args: Any, **_kwargs: Any) -> Any:
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(json, "loads", out_of_room)
    # deeper than jiter reads (200) and orjson writes back (255): the full check runs
    raw = b'{"openapi": "3.0.3", "x-deep": ' + b"[" * 300 + b"1" + b"]" * 300 + b"}"
    with pytest.raises(SpecError) as info:
        parse("deep.json", raw)
    assert str(info.value) == "specgen: deep.json: nests too deeply to check for repeated keys"


@pytest.mark.parametrize(
    ("tail", "message"),
    [
        ("NaN", "unexpected character, expected a JSON value: line 1 column 43 (char 42)"),
        ('"\\ud800"', "no low surrogate in string: line 1 column 44 (char 43)"),
        ("Infinity", "unexpected character, expected a JSON value: line 1 column 43 (char 42)"),
    ],
)
def test_text_that_is_not_json_keeps_orjsons_words_though_a_key_repeats_before(
    tail: str, message: str
) -> None:
    """jiter stops at the first repeated key; what follows may be text JSON refuses but the
    standard library reads (NaN, Infinity, a lone surrogate). As at df9246f, orjson's
    refusal of the text comes first, not the repeated key found by a parser that read it."""
    raw = ('{"openapi": "3.0.3", "a": 1, "a": 2, "z": ' + tail + "}").encode()
    with pytest.raises(SpecError) as info:
        parse("doc.json", raw)
    assert str(info.value) == f"specgen: doc.json: invalid JSON: {message}"
