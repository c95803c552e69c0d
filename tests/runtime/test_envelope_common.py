"""The envelope's orjson path decodes exactly as the scanner does, or leaves it to it.

`envelope.decode` tries `_common` (orjson, for the envelopes the generated client sends
with nothing to keep verbatim) before the hand-written scanner. Whatever envelope the
guest writes, with keys in any case, repeated, unknown or missing, values of any JSON
type, odd numbers and spacing, the answer must be the scanner's.
"""

from __future__ import annotations

import json

from hypothesis import example, given, settings
from hypothesis import strategies as st

from runtime.sandbox import envelope

KEYS = [
    "method", "path", "route", "values", "type", "client", "body", "query", "headers",
    "Method", "ROUTE", "Values", "extra", "",
]  # fmt: skip
NUMBERS = ["0", "-0", "7", "-12", "1e2", "1.5", "-0.0", "123456789012345678901234567890"]
SPACE = st.sampled_from(["", " ", "\n", "\t ", "\r\n"])


def _text(draw: st.DrawFn) -> str:
    choice = draw(st.integers(0, 3))
    if choice == 0:
        return json.dumps(draw(st.sampled_from(["GET", "post", "/a/*", "gh", "", "-0"])))
    if choice == 1:
        return json.dumps(draw(st.text(max_size=8)))
    if choice == 2:
        return draw(st.sampled_from(['"\\ud800"', '"a\\u0000b"', '"\\u00e9"', '"\\/"']))
    return json.dumps(draw(st.text(max_size=4)), ensure_ascii=False)


@st.composite
def scalars(draw: st.DrawFn) -> str:
    kind = draw(st.integers(0, 3))
    if kind == 0:
        return _text(draw)
    if kind == 1:
        return draw(st.sampled_from(NUMBERS))
    if kind == 2:
        return draw(st.sampled_from(["true", "false", "null"]))
    return str(draw(st.integers(-(2**70), 2**70)))


@st.composite
def values(draw: st.DrawFn) -> str:
    kind = draw(st.integers(0, 3))
    if kind <= 1:
        return draw(scalars())
    if kind == 2:
        items = draw(st.lists(scalars(), max_size=4))
        return "[" + ",".join(items) + "]"
    pairs = draw(st.lists(st.tuples(st.sampled_from(["a", "A", "b"]), scalars()), max_size=3))
    return "{" + ",".join(f'"{k}":{v}' for k, v in pairs) + "}"


@st.composite
def envelopes(draw: st.DrawFn) -> bytes:
    pairs = draw(st.lists(st.tuples(st.sampled_from(KEYS), values()), max_size=7))
    gap = draw(SPACE)
    inner = ("," + gap).join(f'{gap}"{k}"{gap}:{gap}{v}' for k, v in pairs)
    text = draw(st.sampled_from(["", "\ufeff", " "])) + "{" + inner + gap + "}"
    text += draw(st.sampled_from(["", " ", "\n", "x", "}"]))
    return text.encode("utf-8", "surrogatepass")


@st.composite
def near_client_envelopes(draw: st.DrawFn) -> bytes:
    """Envelopes one step from the client's: its keys, each value of a random JSON type
    (a list of random scalars for `values`), sometimes a key repeated or in another case."""
    keys = draw(st.permutations(["method", "route", "values", "client", "type", "path"]))
    keys = keys[: draw(st.integers(1, 6))]
    if draw(st.booleans()):
        keys.append(draw(st.sampled_from([*keys, "Method", "values", "body", "query"])))
    pairs = []
    for key in keys:
        if key == "values" and draw(st.integers(0, 4)):
            value = "[" + ",".join(draw(st.lists(scalars(), max_size=4))) + "]"
        elif key in ("method", "route", "client", "path") and draw(st.integers(0, 3)):
            value = _text(draw)
        else:
            value = draw(values())
        pairs.append(f'"{key}":{value}')
    return ("{" + ",".join(pairs) + "}").encode("utf-8", "surrogatepass")


@settings(max_examples=1000)
@given(raw=near_client_envelopes(), payload=st.sampled_from([None, b"x"]))
@example(raw=b'{"method":"GET","route":"/a/*","values":[-0]}', payload=None)
@example(raw=b'{"method":"GET","route":"/a/*","values":[true,false]}', payload=None)
@example(raw=b'{"method":"GET","route":"/a/*","values":[1e2,1.0]}', payload=None)
@example(
    raw=b'{"method":"GET","route":"/a/*","values":[123456789012345678901234567]}', payload=None
)
@example(raw=b'{"method":"GET","Method":"POST","route":"/a/*"}', payload=None)
@example(raw=b'{"method":"GET","route":"/a/*","values":["\\ud800"]}', payload=None)
@example(raw=b'{"method":"GET","route":null,"path":"/a"}', payload=None)
@example(raw=b'{"method":"GET","route":"/a/*","values":null}', payload=None)
@example(raw=b'\xef\xbb\xbf{"method":"GET","path":"/a"}', payload=None)
def test_an_envelope_near_the_clients_decodes_as_the_scanner_decodes_it(
    raw: bytes, payload: bytes | None
):
    assert envelope.decode(raw, payload) == envelope._scanned(raw, payload)


@st.composite
def client_envelopes(draw: st.DrawFn) -> bytes:
    """What the generated client's `structured` and `call` send (JSON.stringify)."""
    client = draw(st.sampled_from(["gh", "memory"]))
    method = draw(st.sampled_from(["GET", "POST", "DELETE"]))
    if draw(st.booleans()):
        return json.dumps({"method": method, "path": draw(st.text()), "client": client}).encode()
    parts = draw(st.lists(st.one_of(st.text(), st.integers(-(2**40), 2**40)), max_size=4))
    found = {"method": method, "route": "/repos/*/*", "values": parts, "client": client}
    return json.dumps(found, separators=(",", ":"), ensure_ascii=False).encode()


@settings(max_examples=500)
@given(raw=envelopes(), payload=st.sampled_from([None, b"", b"bytes"]))
def test_any_envelope_decodes_as_the_scanner_decodes_it(raw: bytes, payload: bytes | None):
    assert envelope.decode(raw, payload) == envelope._scanned(raw, payload)


@given(raw=client_envelopes(), payload=st.sampled_from([None, b"x"]))
def test_the_clients_envelopes_take_the_orjson_path_and_agree(raw: bytes, payload: bytes | None):
    decoded = envelope._common(raw, payload)
    if b"-0" in raw or (payload is not None and b'"path"' in raw):
        assert decoded is None
    else:
        assert decoded is not None
    assert envelope.decode(raw, payload) == envelope._scanned(raw, payload)
