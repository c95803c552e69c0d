"""String quoting that reproduces the reference's byte-exact outputs.

Generated files are compared byte for byte across machines and against the reference
implementation, so the escaping rules are spelled out here instead of relying on
whatever a JSON library happens to do with `<`, `&` or U+2028.
"""

from __future__ import annotations

# Go's json.Marshal escapes `<`, `>`, `&`, U+2028 and U+2029 so that JSON stays safe inside
# HTML and inside JS source (U+2028/U+2029 end a line in older JS), and writes control
# characters other than \n \r \t as \u00XX. We keep the rule: a route literal with `&` or
# a title with `</script>` must never change the meaning of the file it lands in.
_JSON_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_JSON_ESCAPES.update({ch: f"\\u{ord(ch):04x}" for ch in "<>&\u2028\u2029"})


def js_string(value: str) -> str:
    """A JSON string literal that is also safe inside JS and HTML source."""
    out = ['"']
    for ch in value:
        esc = _JSON_ESCAPES.get(ch)
        if esc is not None:
            out.append(esc)
        elif ch < " ":
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


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
    """
    out = ['"']
    for ch in value:
        if ch in _GO_ESCAPES:
            out.append(_GO_ESCAPES[ch])
        elif ch.isprintable():
            out.append(ch)
        elif ord(ch) < 0x80:
            out.append(f"\\x{ord(ch):02x}")
        elif ord(ch) < 0x10000:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    out.append('"')
    return "".join(out)
