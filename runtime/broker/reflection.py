"""Does an upstream reply carry the key back? Encoded, escaped or in pieces, not only verbatim.

Why a module of its own: an echo endpoint or a debug page that reflects the
Authorization header hands the guest the key, and an upstream (or a guest choosing an
endpoint that transforms what it echoes) rarely reflects it byte for byte. The broker
asks `Reflection.found(body)` before delivering any reply; a hit is a 502, never the body.

What is caught, for every secret the credential names (each at least 8 bytes; shorter
ones only verbatim):

- the key verbatim, and as UTF-16 (LE and BE, at any byte offset);
- hex, lower, upper or mixed case;
- base64, standard and URL-safe alphabets, padded or not, at each of the three byte
  alignments (the characters that depend only on the key's bits are the needle, so the
  key embedded in a longer encoded blob is caught too);
- any mix of JSON escapes (every escape RFC 8259 has: `\\"`, `\\\\`, `\\/`, `\\n` and the
  other one-letter ones, `\\uXXXX` in either case and as surrogate pairs; so Go's and
  .NET's escaping of `+ < > &`, fully escaped strings, and a key holding a quote or a
  backslash echoed through `json.dumps`) and of percent-encoding, by searching decoded
  views of the body as well as the raw bytes;
- long pieces: for a key of 24 bytes or more, every 16-byte window at a stride of 4, so
  any run of 19 or more consecutive key bytes (each half of a split 38-byte key, say) is
  found, raw or in the decoded views.

What stays best effort (docs/security.md says so too): a key split into pieces shorter
than that, reordered, compressed, encrypted, or in an encoding not listed (base32,
base64 of UTF-16, HTML entities, double encodings beyond one JSON and one percent
layer); and a guest that learns the key bit by bit through the upstream's behaviour
(status codes, timing). The key is never sent anywhere but the grant's origin; this check
is the last line against an upstream that echoes it.

Cost: the needles are computed once per broker; each body is scanned with `bytes.find`
per needle (a handful: about 13 for a 40-byte key), over at most three views (raw,
JSON-unescaped, percent-decoded) plus a lower-cased one for hex, each built in one
linear pass and only when the body holds a `\\` or `%` at all.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable
from urllib.parse import unquote_to_bytes

#: Shortest secret checked in encoded forms and pieces; shorter ones only verbatim.
MIN_SECRET = 8
#: Window length and stride of the substring needles, and the key length from which
#: windows are used: a key of 24+ bytes is caught from any 19 consecutive bytes.
WINDOW, STRIDE, WINDOWED_FROM = 16, 4, 24

#: Every JSON escape (RFC 8259 section 7): a surrogate pair first, so an astral
#: character decodes to its UTF-8 bytes, then one `\\uXXXX`, then the two-character
#: escapes. A key holding `"` or `\\` reaches a JSON body as `\\"` or `\\\\`.
_JSON_ESCAPE = re.compile(
    rb"\\u([Dd][89ABab][0-9A-Fa-f]{2})\\u([Dd][C-Fc-f][0-9A-Fa-f]{2})"
    rb"|\\u([0-9A-Fa-f]{4})"
    rb'|\\(["\\/bfnrt])'
)
_SHORT_ESCAPES = {
    b'"': b'"',
    b"\\": b"\\",
    b"/": b"/",
    b"b": b"\b",
    b"f": b"\f",
    b"n": b"\n",
    b"r": b"\r",
    b"t": b"\t",
}


class Reflection:
    """The needles for one credential's secrets, and the check a reply body must pass."""

    __slots__ = ("_hex", "_needles")

    def __init__(self, secrets: Iterable[str]) -> None:
        needles: set[bytes] = set()
        hexes: set[bytes] = set()
        for secret in secrets:
            key = secret.encode("utf-8")
            if not key:
                continue
            needles.add(key)
            if len(key) < MIN_SECRET:
                continue
            needles.add(secret.encode("utf-16-le"))
            needles.add(secret.encode("utf-16-be"))
            hexes.add(key.hex().encode("ascii"))
            needles.update(_base64_needles(key))
            if len(key) >= WINDOWED_FROM:
                for start in range(0, len(key) - WINDOW + 1, STRIDE):
                    needles.add(key[start : start + WINDOW])
                needles.add(key[-WINDOW:])
        # Longest first: no shorter needle's hit is ever needed when a longer one hits,
        # and the order is fixed so the scan is deterministic.
        self._needles = tuple(sorted(needles, key=lambda n: (-len(n), n)))
        self._hex = tuple(sorted(hexes))

    def found(self, body: bytes) -> bool:
        """Does `body` hold a secret in any of the forms the module docstring lists?"""
        if not self._needles:
            return False
        for view in _views(body):
            if any(needle in view for needle in self._needles):
                return True
        if self._hex:
            lowered = body.lower()
            if any(h in lowered for h in self._hex):
                return True
        return False

    def __repr__(self) -> str:
        return f"Reflection(<{len(self._needles) + len(self._hex)} needles>)"


def _base64_needles(key: bytes) -> set[bytes]:
    """The base64 characters that depend only on the key, at each of the 3 alignments."""
    out: set[bytes] = set()
    for offset in range(3):
        encoded = base64.b64encode(b"\0" * offset + key).rstrip(b"=")
        first = -(-8 * offset // 6)  # the first character holding only key bits
        last = (8 * (offset + len(key))) // 6  # one past the last such character
        core = encoded[first:last]
        if len(core) >= MIN_SECRET:
            out.add(core)
            out.add(core.translate(_URLSAFE))
    return out


_URLSAFE = bytes.maketrans(b"+/", b"-_")


def _views(body: bytes) -> Iterable[bytes]:
    """The body, then its JSON-unescaped and percent-decoded forms when they differ."""
    yield body
    if b"\\" in body:
        unescaped = _JSON_ESCAPE.sub(_unescape, body)
        yield unescaped
        if b"%" in unescaped:
            yield unquote_to_bytes(unescaped)
    if b"%" in body:
        yield unquote_to_bytes(body)


def _unescape(match: re.Match[bytes]) -> bytes:
    high, low, code, short = match.groups()
    if high is not None:
        point = 0x10000 + ((int(high, 16) - 0xD800) << 10) + (int(low, 16) - 0xDC00)
        return chr(point).encode("utf-8")
    if code is not None:
        return chr(int(code, 16)).encode("utf-8", "surrogatepass")
    return _SHORT_ESCAPES[short]


__all__ = ["MIN_SECRET", "STRIDE", "WINDOW", "WINDOWED_FROM", "Reflection"]
