"""The regex-driven text functions answer exactly what the per-character loops did.

`js_string`, `go_quote`, `visible`, `js_ident`, `one_line` and the route checks used to
walk every character in Python; they now let one regex pass find the characters that
matter. The old loops are kept here, verbatim, as the oracle: every code point, and
arbitrary strings, must give the same answer (the goldens prove it only for the
characters they hold).
"""

from __future__ import annotations

import sys
import unicodedata

from hypothesis import given, settings
from hypothesis import strategies as st

from specgen.naming import js_ident
from specgen.operations import one_line
from specgen.quoting import (
    _GO_ESCAPES,
    _JSON_ESCAPES,
    _escape,
    go_quote,
    is_invisible,
    js_string,
    ts_comment,
    visible,
)
from specgen.routes import has_control, is_control, pattern_error, target_allowed
from specgen.typescript import MAX_DOC, doc_text


def old_visible(text: str) -> str:
    if text.isascii() and text.isprintable():
        return text
    return "".join(_escape(ch) if is_invisible(ch) else ch for ch in text)


def old_js_string(value: str) -> str:
    out = ['"']
    for ch in value:
        esc = _JSON_ESCAPES.get(ch)
        if esc is not None:
            out.append(esc)
        elif ch < " " or is_invisible(ch):
            code = ord(ch)
            if code < 0x10000:
                out.append(f"\\u{code:04x}")
            else:
                code -= 0x10000
                out.append(f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def old_go_quote(value: str) -> str:
    out = ['"']
    for ch in value:
        if ch in _GO_ESCAPES:
            out.append(_GO_ESCAPES[ch])
        elif ch.isprintable() and not is_invisible(ch):
            out.append(ch)
        elif ord(ch) < 0x80:
            out.append(f"\\x{ord(ch):02x}")
        elif ord(ch) < 0x10000:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    out.append('"')
    return "".join(out)


_WIRE_SAFE = frozenset(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.~$&+,/:;=@"
)


def old_js_ident(raw: str) -> str:
    if not raw:
        return "_"
    out: list[str] = []
    for i, ch in enumerate(raw):
        if ch in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_$":
            out.append(ch)
        elif ch in "0123456789":
            out.append("_" + ch if i == 0 else ch)
        else:
            out.append("_")
    return "".join(out)


def old_one_line(text: str) -> str:
    return " ".join(
        "".join(
            " " if (ch.isspace() or unicodedata.category(ch) == "Cc") else ch for ch in text
        ).split()
    )


def test_every_code_point_reads_as_before() -> None:
    differ = []
    for code in range(sys.maxunicode + 1):
        ch = chr(code)
        if (
            has_control(f"ab{ch}") != is_control(ch)
            or js_ident(ch + ch) != old_js_ident(ch + ch)
            or one_line(f" a{ch}{ch}b ") != old_one_line(f" a{ch}{ch}b ")
            or (pattern_error(f"/a{ch}") == "path contains bytes that require wire encoding")
            != (ch not in _WIRE_SAFE and ch not in "\\?#%*" and unicodedata.category(ch) != "Cc")
        ):
            differ.append(hex(code))
    assert differ == []


@given(st.text(max_size=30))
def test_any_text_reads_as_before(text: str) -> None:
    assert has_control(text) == any(is_control(ch) for ch in text)
    assert js_ident(text) == old_js_ident(text)
    assert one_line(text) == old_one_line(text)
    if any(ch not in _WIRE_SAFE for ch in text):
        assert not target_allowed("/" + text)


def test_every_code_point_quotes_as_before() -> None:
    differ = []
    for start in range(0, sys.maxunicode + 1, 256):  # 256 code points to a string
        text = "".join(f"a{chr(code)}" for code in range(start, start + 256))
        if (
            js_string(text) != old_js_string(text)
            or go_quote(text) != old_go_quote(text)
            or visible(text) != old_visible(text)
        ):
            differ.append(hex(start))
    assert differ == []


@settings(max_examples=500)
@given(st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=60))
def test_any_string_quotes_as_before(text: str) -> None:
    assert js_string(text) == old_js_string(text)
    assert go_quote(text) == old_go_quote(text)
    assert visible(text) == old_visible(text)


def test_the_memo_does_not_change_a_repeated_answer() -> None:
    text = "\u202e<x>\u202e\x1b\U000e0041é"
    first = (js_string(text), go_quote(text), visible(text))
    assert first == (js_string(text), go_quote(text), visible(text))
    assert first == (old_js_string(text), old_go_quote(text), old_visible(text))


def old_doc_text(text: object) -> str:
    if not isinstance(text, str):
        return ""
    line = ts_comment(text)
    return line if len(line) <= MAX_DOC else line[: MAX_DOC - 1].rstrip() + "…"


_PROSE = st.text(alphabet=st.sampled_from(["a", "b", " ", "\n", "\t", "*", "/", "\x1f", "é"]))


@settings(max_examples=300)
@given(_PROSE.map(lambda t: t * 40), st.integers(0, 2000))
def test_long_descriptions_cut_as_before(text: str, at: int) -> None:
    """doc_text folds only the head of a long description when that fills the comment."""
    text = text[at:] + "*" + "/" * (at % 3) + text[:at]  # a `*/` anywhere, the cut included
    assert doc_text(text) == old_doc_text(text)
    assert doc_text(text[: MAX_DOC * 4 + 1]) == old_doc_text(text[: MAX_DOC * 4 + 1])
