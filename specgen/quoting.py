"""String quoting that reproduces the reference's byte-exact outputs.

Generated files are compared byte for byte across machines and against the reference
implementation, so the escaping rules are spelled out here instead of relying on
whatever a JSON library happens to do with `<`, `&` or U+2028.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

# Characters a reader cannot see, yet that change what a model or a terminal is told:
# Unicode format characters (Cf: bidi overrides and isolates, zero-width characters,
# BOM, soft hyphen, most tag characters), controls (Cc: ESC starts terminal sequences),
# surrogates and line/paragraph separators, plus invisible characters of other
# categories: the whole tag block, variation selectors (which can smuggle data after
# any visible character), the combining grapheme joiner and the Hangul fillers.
_INVISIBLE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
_INVISIBLE_RANGES = (
    (0x034F, 0x034F),
    (0x115F, 0x1160),
    (0x3164, 0x3164),
    (0xFE00, 0xFE0F),
    (0xFFA0, 0xFFA0),
    (0xE0000, 0xE007F),
    (0xE0100, 0xE01EF),
)


def is_invisible(ch: str) -> bool:
    """Whether `ch` is a control or invisible character that must never pass through raw."""
    if ch.isascii():
        return ch < " " or ch == "\x7f"
    if unicodedata.category(ch) in _INVISIBLE_CATEGORIES:
        return True
    code = ord(ch)
    return any(lo <= code <= hi for lo, hi in _INVISIBLE_RANGES)


def _escape(ch: str) -> str:
    code = ord(ch)
    if code < 0x80:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def visible(text: str) -> str:
    """`text` with every invisible or control character written as a visible escape.

    The one filter for document text that reaches a model (description.txt) or an
    operator's terminal (messages): a title with a bidi override, tag characters that
    spell out instructions, or an ESC that retitles the terminal all show up as
    `\\u202e`, `\\U000e0041`, `\\x1b` instead of acting. Everything else is unchanged.
    """
    if text.isascii() and text.isprintable():
        return text
    return _MAYBE_INVISIBLE.sub(_visible_match, text)


#: Every character `visible` might change: ASCII controls and DEL, and anything
#: non-ASCII (whether that one is invisible is `is_invisible`'s call, memoised).
_MAYBE_INVISIBLE = re.compile("[\x00-\x1f\x7f]|[^\x00-\x7f]")


@lru_cache(maxsize=4096)
def _visible_char(ch: str) -> str:
    return _escape(ch) if is_invisible(ch) else ch


def _visible_match(match: re.Match[str]) -> str:
    return _visible_char(match.group())


# Go's json.Marshal escapes `<`, `>`, `&`, U+2028 and U+2029 so that JSON stays safe inside
# HTML and inside JS source (U+2028/U+2029 end a line in older JS), and writes control
# characters other than \n \r \t as \u00XX. We keep the rule: a route literal with `&` or
# a title with `</script>` must never change the meaning of the file it lands in.
_JSON_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_JSON_ESCAPES.update({ch: f"\\u{ord(ch):04x}" for ch in "<>&\u2028\u2029"})


def js_string(value: str) -> str:
    """A JSON string literal that is also safe inside JS and HTML source."""
    # One C-level regex pass: only the characters that may need an escape reach Python
    # (GitHub's document sends about 10,000 strings through here per build). Most are
    # printable ASCII without any of `"\<>&`, which the checks below see several times
    # faster than the regex scans them; tests/specgen/test_fast_paths_equivalence.py holds
    # both to the per-character rule.
    if (
        value.isascii()
        and value.isprintable()
        and '"' not in value
        and "\\" not in value
        and "<" not in value
        and ">" not in value
        and "&" not in value
    ):
        return f'"{value}"'
    return '"' + _JS_MAYBE.sub(_js_match, value) + '"'


#: Every character `js_string` might escape: its table, ASCII controls and DEL, and
#: anything non-ASCII (invisible ones are escaped); the rest is copied as it is.
_JS_MAYBE = re.compile('["\\\\<>&\x00-\x1f\x7f]|[^\x00-\x7f]')


@lru_cache(maxsize=4096)
def _js_char(ch: str) -> str:
    esc = _JSON_ESCAPES.get(ch)
    if esc is not None:
        return esc
    if ch < " " or is_invisible(ch):
        # \\u escapes keep the string's value; a bidi override or zero-width
        # character must not make the source read differently from what it does
        code = ord(ch)
        if code < 0x10000:
            return f"\\u{code:04x}"
        code -= 0x10000
        return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
    return ch


def _js_match(match: re.Match[str]) -> str:
    return _js_char(match.group())


_GO_ESCAPES = {
    "\a": "\\a",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\v": "\\v",
    "\\": "\\\\",
    '"': '\\"',
}


def go_quote(value: str) -> str:
    """Quote like Go's strconv.Quote, the form the reference uses in messages and headers.

    Printable characters stay as they are (non-ASCII included); everything else is
    escaped, so a hostile title can never end the comment line it is written into.
    Printable ASCII without `"` or `\\` (most names and paths) has nothing to escape and
    is seen so by a few C-level checks, several times faster than the regex scans it.
    """
    if value.isascii() and value.isprintable() and '"' not in value and "\\" not in value:
        return f'"{value}"'
    return '"' + _GO_MAYBE.sub(_go_match, value) + '"'


#: Every character `go_quote` might escape: its table, ASCII controls and DEL, and
#: anything non-ASCII; printable ASCII is copied as it is.
_GO_MAYBE = re.compile('["\\\\\x00-\x1f\x7f]|[^\x00-\x7f]')


@lru_cache(maxsize=4096)
def _go_char(ch: str) -> str:
    if ch in _GO_ESCAPES:
        return _GO_ESCAPES[ch]
    if ch.isprintable() and not is_invisible(ch):
        return ch
    if ord(ch) < 0x80:
        return f"\\x{ord(ch):02x}"
    if ord(ch) < 0x10000:
        return f"\\u{ord(ch):04x}"
    return f"\\U{ord(ch):08x}"


def _go_match(match: re.Match[str]) -> str:
    return _go_char(match.group())


#: Unicode category Cc: C0 controls, DEL and C1 controls.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


def ts_comment(value: str) -> str:
    """Text for one line of a `/** */` comment: whitespace and control characters folded
    to single spaces (no line can be added), every other invisible character (a bidi
    override, a zero-width or tag character) written as a visible escape, as in
    description.txt, and `*/` broken (the comment cannot end)."""
    # Control characters (category Cc) become spaces; str.split() then folds them with
    # every other whitespace character. One regex pass instead of a Python step per
    # character: GitHub's types.d.ts runs about 1.2 million characters through here.
    folded = fold_line(value)
    if folded.isascii():
        # Folded ASCII is printable ASCII (its controls became spaces), which `visible`
        # returns as it is after asking str.isprintable, a per-character check that
        # cost a third of this function on GitHub's 2,000 descriptions.
        return folded.replace("*/", "*\\/")
    return visible(folded).replace("*/", "*\\/")


def fold_line(value: str) -> str:
    """`value` on one line: control characters (category Cc) and runs of whitespace
    become single spaces, and none lead or trail."""
    if value.isascii():
        # ASCII text (most of a document's prose): a byte table maps its controls to
        # spaces, a quarter of the regex engine's cost.
        spaced = value.encode().translate(_ASCII_CONTROL_TO_SPACE).decode()
    elif value.isprintable():
        # Printable text holds no control character and no whitespace but the space
        # (str.isprintable), so non-ASCII summaries and names need no regex pass either.
        spaced = value
    else:
        # Control characters become spaces; str.split() then folds them with every
        # other whitespace character (str.isspace), one C-level pass each.
        return " ".join(_CONTROL.sub(" ", value).split())
    # The space is now the only whitespace left: halving its runs until none is left
    # takes a few C-level passes, where split and join made a string of every word
    # (about 1 us for a 300-character description, half the fold).
    # tests/specgen/test_typescript_equivalence.py (old_fold_line) holds both ways to
    # one answer.
    while "  " in spaced:
        spaced = spaced.replace("  ", " ")
    return spaced.strip(" ")


#: The ASCII controls (C0 and DEL: category Cc below 0x80) as spaces.
_ASCII_CONTROL_TO_SPACE = bytes.maketrans(bytes([*range(0x20), 0x7F]), b" " * 0x21)


#: Longest refusal line a command prints. Messages quote what they refuse, and a value
#: can be any length (a 10,000-character option, a document's name); past this the
#: middle of the line is cut, as its start names the input and its end says the rule.
LINE_LIMIT = 600


def capped(line: str, limit: int = LINE_LIMIT) -> str:
    """`line`, its middle replaced by ` ... (N characters cut) ... ` when over `limit`."""
    if len(line) <= limit:
        return line
    head = limit * 2 // 3
    tail = limit // 4
    return f"{line[:head]} ... ({len(line) - head - tail:,} characters cut) ... {line[-tail:]}"


def quoted(s: str) -> str:
    """`json_quoted` for a text that may be a file name: its undecodable bytes (which
    Python keeps as lone surrogates) written as \\xNN first."""
    return json_quoted(as_text(s))


def as_text(s: str) -> str:
    """`s` with the bytes a file name may hold that are not UTF-8 (surrogate-escaped by
    Python) written as `\\xNN` text; any other lone surrogate as the bytes it would take."""
    try:
        raw = s.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        raw = s.encode("utf-8", "surrogatepass")
    return raw.decode("utf-8", "backslashreplace")


def escaped_line(s: str) -> str:
    """`s` with every character `is_invisible` names (controls, line terminators, lone
    surrogates, bidi and tag characters) as \\uXXXX (\\UXXXXXXXX past U+FFFF): the
    escape a refusal line uses, so it stays one line and shows what it quotes."""
    if s.isascii() and s.isprintable():
        return s
    return "".join(_json_escape(ch) if is_invisible(ch) else ch for ch in s)


def _json_escape(ch: str) -> str:
    code = ord(ch)
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def json_quoted(s: str) -> str:
    """Go-%q-like quoting: a double-quoted string with JSON's escapes, always one line."""
    import json

    return escaped_line(json.dumps(s, ensure_ascii=False))
