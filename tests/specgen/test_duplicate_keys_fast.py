"""The colon count that lets most documents skip the second parse never lets a repeated
key through: whenever it says "no repeat", the full check agrees, and a document that
repeats a key is refused with the same message as before."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specgen.duplicates import check_json, may_repeat_a_key
from specgen.errors import SpecError

# Keys and strings full of what could confuse a count: colons, quotes, backslashes,
# and colons written as escapes.
_TEXT = st.text(alphabet=st.sampled_from(["a", ":", '"', "\\", "b", " ", "é"]), max_size=6)


def _write(node: Any, escape_colons: bool, spaced: bool) -> str:
    """JSON text of `node` where objects are lists of pairs (so keys may repeat)."""
    if isinstance(node, tuple):  # an object: a tuple of (key, value) pairs
        sep = " : " if spaced else ":"
        return (
            "{"
            + ",".join(
                _write_str(k, escape_colons) + sep + _write(v, escape_colons, spaced)
                for k, v in node
            )
            + "}"
        )
    if isinstance(node, list):
        return "[" + ",".join(_write(v, escape_colons, spaced) for v in node) + "]"
    if isinstance(node, str):
        return _write_str(node, escape_colons)
    return json.dumps(node)


def _write_str(text: str, escape_colons: bool) -> str:
    out = json.dumps(text, ensure_ascii=False)
    return out.replace(":", "\\u003a") if escape_colons else out


_NODES = st.recursive(
    st.one_of(st.none(), st.integers(-5, 5), _TEXT),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.lists(st.tuples(_TEXT, inner), max_size=4).map(tuple),
    ),
    max_leaves=12,
)


def _repeats(node: Any) -> bool:
    if isinstance(node, tuple):
        keys = [k for k, _ in node]
        return len(set(keys)) != len(keys) or any(_repeats(v) for _, v in node)
    if isinstance(node, list):
        return any(_repeats(v) for v in node)
    return False


def _refusal(raw: bytes, doc: Any = None) -> str | None:
    try:
        if doc is None:
            check_json("doc.json", raw)
        else:
            check_json("doc.json", raw, doc)
    except SpecError as exc:
        return str(exc)
    return None


@settings(max_examples=400)
@given(st.lists(st.tuples(_TEXT, _NODES), max_size=5).map(tuple), st.booleans(), st.booleans())
def test_the_count_never_clears_a_repeated_key(top: Any, escape_colons: bool, spaced: bool) -> None:
    raw = _write(top, escape_colons, spaced).encode()
    doc = orjson.loads(raw)
    if _repeats(top):
        assert may_repeat_a_key(raw, doc)
        assert _refusal(raw, doc) is not None
    # with or without the count, the same verdict and the same words
    assert _refusal(raw, doc) == _refusal(raw)


def test_a_clean_document_passes_without_the_second_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    clean = b'{"a": {"b:c": "x:\\u003a", "d": [1, {"e": "y"}]}, "f" : "g"}'
    assert not may_repeat_a_key(clean, orjson.loads(clean))

    def no_second_parse(*_args: Any, **_kwargs: Any) -> Any:
        raise AssertionError("the full check ran")

    monkeypatch.setattr(json, "loads", no_second_parse)
    check_json("doc.json", clean, orjson.loads(clean))


@pytest.mark.parametrize(
    ("raw", "where"),
    [
        (b'{"a": 1, "a": 2}', "the top level"),
        (b'{"p": {"x:y": 1, "x\\u003ay": 2}}', "/p"),  # equal once decoded
        (b'{"p": [{"k": "v:w"}, {"k": {"z": ":"}, "k": "::"}]}', "/p/1"),
    ],
)
def test_repeated_keys_are_named_as_before(raw: bytes, where: str) -> None:
    message = _refusal(raw, orjson.loads(raw))
    assert message is not None and message.endswith(f"in the object at {where}")
    assert message == _refusal(raw)


def test_what_orjson_cannot_write_back_goes_to_the_full_check() -> None:
    deep = b'{"a":' * 300 + b"1" + b"}" * 300  # orjson writes at most 254 levels
    doc = json.loads(deep)
    assert may_repeat_a_key(deep, doc)
    assert _refusal(deep, doc) is None
    wide = b'{"n": 123456789012345678901234567890, "n": 1}'
    assert _refusal(wide, json.loads(wide)) is not None
