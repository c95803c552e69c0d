"""Route rules shared by the generator and the broker.

One module on purpose: the patterns specgen writes into allow.json, the entries the
grants loader accepts and the request targets the broker approves must agree byte for
byte, or an operator's grant would mean something different at generation time than at
call time. Every rule here fails closed: a string is refused unless it is provably
canonical, because the broker approves exactly the bytes it then sends on the wire.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from specgen.quoting import go_quote

#: The verbs the reference's grants enforce (and `--compat reference` writes).
METHODS: tuple[str, ...] = ("GET", "PUT", "POST", "DELETE", "PATCH")
#: The verbs a grant may hold: HEAD and OPTIONS too. TRACE never: the
#: server echoes the request back, credential included.
GRANT_METHODS: tuple[str, ...] = (*METHODS, "HEAD", "OPTIONS")

# Bytes Go's url.PathEscape leaves alone in a path: the RFC 3986 unreserved set plus
# the sub-delims and ':' '@' '/' it does not escape. Anything else would be rewritten on
# the wire, so "approve == wire" could not hold for it. This matches any character
# outside that set, found in one C-level pass instead of a Python step per character.
_NOT_WIRE_SAFE = re.compile(r"[^A-Za-z0-9\-_.~$&+,/:;=@]")
# The extended grammar (`partial=True`: the default build, the grants loader, the broker's
# structured calls) also admits the RFC 3986 sub-delims `!`, `'`, `(` and `)` in literal
# text. Go's PathEscape escapes them, but RFC 3986 lets a path hold them as they are and
# httpx sends them unchanged (the broker still compares the URL it built with the
# approved path), and OData-style APIs need them: Microsoft Graph's `/drives('{id}')`
# and `/microsoft.graph.delta()`. A `*` still stands only for unreserved characters.
_NOT_WIRE_SAFE_EXTENDED = re.compile(r"[^A-Za-z0-9\-_.~$&+,/:;=@!'()]")
# What a `*` may stand for: one segment of RFC 3986 unreserved characters only, so a
# wildcard can never smuggle in `:verb`, `;params` or `$batch`-style suffixes.
_UNRESERVED_SEGMENT = re.compile(r"[A-Za-z0-9\-._~]+\Z")

# The separators Go's strings.Fields splits on (unicode.IsSpace). Python's str.split()
# also splits on the C0 separators U+001C-U+001F, which would let "GET\x1f/a" load as a
# route; a grant line with a control character in it must be refused instead.
_GO_SPACE = "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
_FIELD_SEPARATOR = re.compile(f"[{re.escape(_GO_SPACE)}]+")

ERR_ABSOLUTE = "path must be absolute"
ERR_RAW = "path contains a backslash, control character, query, or fragment"
ERR_ENCODED = "path must be decoded and canonical"
ERR_SEGMENTS = 'path must not contain empty, dot, traversal, or ";" segments'
ERR_WIRE = "path contains bytes that require wire encoding"
ERR_WILDCARD = "wildcard must occupy a complete path segment"
#: Segments a route may have: far past any API's (GitHub's deepest has 9), and a bound
#: on the depth of the route index, which the client walks and which is serialised for
#: it (a route of 500 segments loaded, then ended every run with a RecursionError).
MAX_SEGMENTS = 128
ERR_DEEP = f"path has more than {MAX_SEGMENTS} segments"


class RouteError(ValueError):
    """A route line or pattern a grant cannot hold; str() is the one-line reason."""


def is_control(ch: str) -> bool:
    """Unicode Cc (C0, DEL and C1) plus the two JavaScript line terminators."""
    return unicodedata.category(ch) == "Cc" or ch in "\u2028\u2029"


#: Unicode category Cc is exactly C0, DEL and C1 (a stability guarantee of the standard).
_CC = re.compile("[\x00-\x1f\x7f-\x9f]")
_CC_OR_TERMINATOR = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def has_control(s: str) -> bool:
    """Whether any character of `s` `is_control`, in one regex pass.

    Printable text (str.isprintable: no category Cc, Zl or Zp, among others) holds none,
    and says so in one C-level pass without the regex engine: nearly every name and path
    a document gives, checked once or more per operation."""
    return not s.isprintable() and _CC_OR_TERMINATOR.search(s) is not None


def _has_control(s: str) -> bool:
    return _CC.search(s) is not None


def _is_clean(path: str, trailing_slash: bool = True) -> bool:
    """True when the path has no empty, `.` or `..` segment (absolute paths only).

    One trailing `/` is allowed unless `trailing_slash` is False: `/a/` is an ordinary
    route, distinct from `/a` (many APIs, Mem0's among them, declare only the first).
    Go's path.Clean, which the reference used, removes it; `trailing_slash=False`
    keeps that rule for the reference-compatible build.
    """
    if path == "/":
        return True
    segments = path.split("/")[1:]
    if trailing_slash and len(segments) > 1 and segments[-1] == "":
        segments = segments[:-1]
    return all(seg not in ("", ".", "..") for seg in segments)


def _bad_segment(path: str) -> bool:
    """A segment holding `;` or made only of dots (`...`) is refused even when clean."""
    return any(";" in seg or (seg != "" and seg.strip(".") == "") for seg in path.split("/")[1:])


#: Patterns every rule of `pattern_error` admits whatever its flags: segments of wire-safe
#: characters other than `;`, none empty or starting with a dot (so none is `.`, `..` or
#: only dots), `*` only as a whole segment, and one trailing `/` at most.
_PLAIN_PATTERN = re.compile(r"(?:/(?:\*|[A-Za-z0-9\-_~$&+,:=@][A-Za-z0-9\-_.~$&+,:=@]*))+/?")


def pattern_error(path: str, *, trailing_slash: bool = True, partial: bool = False) -> str | None:
    """Why `path` is not a valid allow-entry pattern, or None when it is.

    The checks run in a fixed order so that a path with several problems always gets
    the same message; that message is part of the user-visible contract.
    `trailing_slash=False` refuses `/a/` as the reference did; `partial=True` admits a
    segment with one `*` between literal text (`*.json`, see `partial_segment`), which
    only the generator asks for until the grants loader and the broker take it, and
    the sub-delims `!'()` in literal text (see `_NOT_WIRE_SAFE_EXTENDED`).

    A pattern `_PLAIN_PATTERN` matches (nearly every route a document yields) passes
    every check, so one C-level match answers for it; the checks below, which also
    name what is wrong, run for the rest. The generator asks once per path (811 times
    for GitHub's document), and the checks cost about ten times the match.
    tests/specgen/test_fast_paths_equivalence.py holds the two to the same answers.
    """
    if (
        _PLAIN_PATTERN.fullmatch(path) is not None
        and (trailing_slash or not path.endswith("/"))
        and _segments(path) <= MAX_SEGMENTS
    ):
        return None
    return _pattern_checks(path, trailing_slash, partial)


def _pattern_checks(path: str, trailing_slash: bool, partial: bool) -> str | None:
    """`pattern_error`'s rules one by one, in their order."""
    if not path.startswith("/"):
        return ERR_ABSOLUTE
    if any(ch in "\\?#" for ch in path) or _has_control(path):
        return ERR_RAW
    if "%" in path:
        return ERR_ENCODED
    if not _is_clean(path, trailing_slash) or _bad_segment(path):
        return ERR_SEGMENTS
    wire_safe = _NOT_WIRE_SAFE_EXTENDED if partial else _NOT_WIRE_SAFE
    if wire_safe.search(path.replace("*", "x")):
        return ERR_WIRE
    for seg in path.split("/"):
        if "*" in seg and seg != "*" and not (partial and partial_segment(seg) is not None):
            return ERR_WILDCARD
    if _segments(path) > MAX_SEGMENTS:
        return ERR_DEEP
    return None


def _segments(path: str) -> int:
    """How many segments `path` has; a trailing slash adds none."""
    return path.count("/") - path.endswith("/")


def partial_segment(seg: str) -> tuple[str, str] | None:
    """(prefix, suffix) of a segment with exactly one `*` inside literal text, else None.

    The rule that makes `/files/{name}.json` matchable without ambiguity: one wildcard
    per segment, so a request segment splits one way only; the value it stands for is
    what lies between the literal prefix and suffix, must not be empty and is held to
    the same unreserved characters as a whole-segment `*` (so never `/`, `%` or `;`).
    """
    if seg.count("*") != 1 or seg == "*":
        return None
    prefix, suffix = seg.split("*")
    return prefix, suffix


def segment_matches(want: str, got: str) -> bool:
    """Does pattern segment `want` admit a (canonical) request segment `got`?"""
    if want == "*":
        return _UNRESERVED_SEGMENT.match(got) is not None
    parts = partial_segment(want)
    if parts is None:
        return want == got
    prefix, suffix = parts
    if len(got) <= len(prefix) + len(suffix):
        return False
    if not (got.startswith(prefix) and got.endswith(suffix)):
        return False
    return _UNRESERVED_SEGMENT.match(got[len(prefix) : len(got) - len(suffix)]) is not None


def segment_covers(mine: str, theirs: str) -> bool:
    """Does pattern segment `mine` admit every segment `theirs` admits?"""
    if mine == theirs:
        return True
    if "*" not in theirs:
        return segment_matches(mine, theirs)
    if mine == "*":
        parts = partial_segment(theirs)
        return parts is not None and all(
            _UNRESERVED_SEGMENT.match(p) is not None for p in parts if p
        )
    return False


def route_error(
    method: str, path: str, *, methods: tuple[str, ...] = METHODS, partial: bool = False
) -> str | None:
    """Why (method, path) cannot be a grant route, or None (ValidateHostRoute).

    `methods` and `partial` widen the reference's rule for the grants loader (HEAD,
    OPTIONS and `*.json`-style segments); the defaults are the reference's.
    """
    if method not in methods:
        return f'route method "{method}" is not one of {", ".join(methods)}'
    err = pattern_error(path, partial=partial)
    if err is not None:
        return f'route {method} "{path}": {err}'
    return None


@dataclass(frozen=True, order=True)
class Route:
    """An allow entry: a verb and a pattern whose `*` segments match one segment each.

    Ordering is (path, method), the order allow.json is written in.
    """

    path: str
    method: str

    def __str__(self) -> str:
        return f"{self.method} {self.path}"

    @property
    def segments(self) -> list[str]:
        return self.path.split("/")[1:]

    def matches(self, method: str, target: str) -> bool:
        """Does a (canonical) request target fall under this entry?"""
        # ASCII only: str.upper() folds some non-ASCII letters onto ASCII ones
        # ("poſt".upper() == "POST"), and a verb spelled that way is not one the grant lists.
        if not method.isascii() or method.upper() != self.method.upper():
            return False
        got = target.split("/")[1:]
        want = self.segments
        if len(got) != len(want):
            return False
        return all(segment_matches(w, g) for w, g in zip(want, got, strict=True))

    def covers(self, other: Route) -> bool:
        """Is every request `other` admits also admitted by this entry?

        Used to check that a grant's allow entries are instances of catalog routes:
        same verb, same segment count, each segment equal, or `*` (or `x*y`) here
        admitting the other's.
        """
        if self.method != other.method:
            return False
        mine, theirs = self.segments, other.segments
        if len(mine) != len(theirs):
            return False
        return all(segment_covers(m, t) for m, t in zip(mine, theirs, strict=True))


def parse_route_line(line: str, what: str = "allow entry") -> Route:
    """Parse `"METHOD /path"` as the grants file writes it; the method is upper-cased.

    Only the line's shape is checked here; callers then apply `route_error` so the
    message says which rule the pattern broke.
    """
    fields = _FIELD_SEPARATOR.split(line.strip(_GO_SPACE))
    if len(fields) != 2:
        raise RouteError(f'{what} {go_quote(line)} must be "METHOD /path"')
    method, path = fields
    if not path.startswith("/"):
        raise RouteError(f"{what} {go_quote(line)}: path must be absolute")
    return Route(path=path, method=method.upper())


def target_allowed(target: str) -> bool:
    """The broker's canonical-target rules (everything but the allow match).

    Stricter than `pattern_error` on purpose: a request target may not contain `*`
    (it is not an unreserved character), and any `%` at all is refused, even a
    harmless `%41`, because the broker only approves what it can compare byte for byte.
    """
    if not target.startswith("/"):
        return False
    if any(ch in "%?#\\" for ch in target) or _has_control(target):
        return False
    if not _is_clean(target) or _bad_segment(target):
        return False
    return _NOT_WIRE_SAFE.search(target) is None


def first_match(allow: list[Route] | tuple[Route, ...], method: str, target: str) -> Route | None:
    """The first allow entry admitting (method, target), or None to refuse.

    Order matters: the first matching entry is the one the trace records.
    """
    if not target_allowed(target):
        return None
    for route in allow:
        if route.matches(method, target):
            return route
    return None
