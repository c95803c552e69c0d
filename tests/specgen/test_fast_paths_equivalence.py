"""The generator's fast paths answer exactly what the general code does.

`pattern_error` answers a plain pattern with one regex match and runs its rule-by-rule
checks for the rest; `_derive` splits a template whose parameters each fill a segment
with one regex and walks the segments for the rest; allow.json's percent-encoding finds
what to encode with one regex; `js_string` and `go_quote` return printable ASCII with
nothing to escape as it is; `naming.ident_chars` maps ASCII names with a byte table. The general code (or the old per-character rule) is the
oracle: over arbitrary strings built from the characters that matter (braces, `*`,
dots, `;`, `%`, quotes, backslashes, controls, non-ASCII), each fast path must give
the same answer.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from specgen import allow, naming, operations, render, report
from specgen.quoting import go_quote, js_string
from specgen.routes import (
    _CC_OR_TERMINATOR,
    MAX_SEGMENTS,
    _pattern_checks,
    has_control,
    pattern_error,
)
from tests.specgen.test_quoting_equivalence import old_go_quote, old_js_string

#: Characters each rule looks at, plus ordinary ones so that plain patterns are common.
_ROUTE_CHARS = st.sampled_from(list("/*.;%?#\\{}ab-_~$&+,:=@ \x00\x7f\x85é\u2028"))
routes = (
    st.builds(lambda s: "/" + s, st.text(_ROUTE_CHARS, max_size=24))
    | st.text(_ROUTE_CHARS, max_size=24)
    # around the segment bound, with and without a trailing slash or a wildcard
    | st.builds(
        lambda n, seg, end: seg * n + end,
        st.integers(MAX_SEGMENTS - 2, MAX_SEGMENTS + 2),
        st.sampled_from(["/a", "/*", "/a.b"]),
        st.sampled_from(["", "/", "/x"]),
    )
)


@settings(max_examples=3000, deadline=None)
@given(routes, st.booleans(), st.booleans())
@example("/a/", False, False)
@example("/a/", True, False)
@example("/", True, True)
@example("/.well-known/x", True, True)
@example("/a/*.json", True, True)
@example("/a/*.json", True, False)
@example("/a//b", True, True)
@example("/a/...", True, True)
@example("/a" * MAX_SEGMENTS + "/", True, False)
@example("/a" * (MAX_SEGMENTS + 1), True, False)
def test_pattern_error_fast_path_agrees_with_the_checks(
    path: str, trailing_slash: bool, partial: bool
) -> None:
    assert pattern_error(path, trailing_slash=trailing_slash, partial=partial) == (
        _pattern_checks(path, trailing_slash, partial)
    )


_TEMPLATE_CHARS = st.sampled_from(list("/{}{}*.;%ab-_~ é"))
templates = st.builds(lambda s: "/" + s, st.text(_TEMPLATE_CHARS, max_size=28))


@settings(max_examples=3000, deadline=None)
@given(templates, st.booleans())
@example("/repos/{owner}/{repo}/issues", True)
@example("/a/{}", True)
@example("/a/{b}.json", True)
@example("/a/{b}.json", False)
@example("/a/{b/c}", True)
@example("/", False)
@example("/a/", True)
def test_derive_fast_split_agrees_with_the_segment_walk(template: str, full: bool) -> None:
    fast = operations._derive(template, full)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(operations, "_WHOLE_SEGMENT_PARAMS", re.compile(r"(?!)"))
        walked = operations._derive(template, full)
    assert _fields(fast) == _fields(walked)


def _fields(derived: operations._Path) -> tuple[object, ...]:
    return tuple(getattr(derived, name) for name in derived.__slots__)


def old_encode(text: str) -> str:
    return "".join(
        ch
        if (ch.isascii() and ch.isprintable() and ch not in "%&=?#" and not ch.isspace())
        else "".join(f"%{b:02X}" for b in ch.encode())
        for ch in text
    )


@settings(max_examples=3000, deadline=None)
@given(st.text(st.characters(blacklist_categories=("Cs",))) | st.text(_ROUTE_CHARS))
@example("per_page")
@example("a b&c=d?e#f%g\t\x7f\x1fé\u2028")
def test_encode_agrees_with_the_per_character_rule(text: str) -> None:
    assert allow._encode(text) == old_encode(text)


#: Printable ASCII, where `js_string` and `go_quote` take their fast path unless one of
#: the characters they escape is present.
_PRINTABLE_ASCII = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=40)


@settings(max_examples=3000, deadline=None)
@given(
    _PRINTABLE_ASCII | st.text(st.sampled_from(list('ab/-_"\\<>& \x7f\x1f\u2028é')), max_size=12)
)
@example("\\")
@example('"')
@example("a<b>&c")
@example("security-advisories/list-global-advisories")
def test_quoting_fast_paths_agree_with_the_per_character_rules(text: str) -> None:
    assert js_string(text) == old_js_string(text)
    assert go_quote(text) == old_go_quote(text)


@settings(max_examples=3000, deadline=None)
@given(
    st.text(st.sampled_from(list('GET /a*?=&b%_-"\\<>\x1f\u2028é')), max_size=30)
    | st.text(max_size=30)
)
@example("GET /repos/*/*/issues?state&per_page&page")
@example("GET /a?x=\\u0026&y")
@example("GET /a?x=<&y")
def test_query_entry_text_agrees_with_escaping_every_character(value: str) -> None:
    assert render._query_text(value) == js_string(value).replace("\\u0026", "&")


def old_kind(message: str) -> str:
    """report.kind as it was: every pattern searched through re's cache, the subject
    matched lazily, quoted strings by a per-character alternation, no prefilter."""
    body = re.sub(r"^[A-Z]+ /\S*?:? ", "", message, count=1)
    for pattern, label in report._LABELS:
        if re.search(pattern, body) or re.search(pattern, message):
            return label
    return re.sub(r'(?:\b\w+ "…", )+\w+ "…"', '… "…"', re.sub(r'"(?:[^"\\]|\\.)*"', '"…"', body))


def old_example(message: str) -> str:
    match = re.match(r"^[A-Z]+ /\S*?:? ", message)
    return match.group(0).rstrip(": ") if match else message[:80]


#: Pieces of real messages (subjects, labels' phrases, quoted names, lists) and the
#: characters each pattern turns on, so that hypothesis composes near-misses of all of them.
_MESSAGE_PIECES = st.sampled_from(
    [
        "GET /a/{b}",
        "PUT /x:",
        "POST /",
        "get /a",
        "GET a",
        " ",
        ": ",
        "\t",
        "\n",
        ":",
        '"',
        "\\",
        '\\"',
        "…",
        '"…"',
        ", ",
        '"x", ',
        'query "q", ',
        'header "h"',
        "a",
        "é",
        "requires ",
        "only part of a segment",
        "host-API grants enforce only",
        "maps to route",
        "optional ",
        " cannot be sent through the broker",
        "has no operationId",
        'operationId "a/b" is not a plain JavaScript identifier, so its method is named "a_b"',
    ]
)
messages = st.lists(_MESSAGE_PIECES, max_size=10).map("".join)


@settings(max_examples=5000, deadline=None)
@given(messages | st.text(max_size=40))
@example('GET /a: optional query "x", query "y", header "z" cannot be sent through the broker')
@example('GET /a/{b}:: parameter "x\\"y" is renamed "y"')
@example('GET /a:\tb "x"')
@example('GET /a "unterminated \\" quote')
def test_report_kind_agrees_with_the_uncompiled_patterns(message: str) -> None:
    assert report.kind(message) == old_kind(message)
    assert report._example(message) == old_example(message)


_NOT_IDENT = re.compile(r"[^A-Za-z0-9_$]")


@settings(max_examples=3000, deadline=None)
@given(st.text(st.characters(max_codepoint=0x7F)) | st.text())
@example("repos/get-content")
@example("a$b_c\x00\x7f\x80é٣")
def test_ident_chars_agrees_with_the_regex(text: str) -> None:
    """ASCII names go through a byte table instead of the regex substitution."""
    assert naming.ident_chars(text) == _NOT_IDENT.sub("_", text)


def test_every_ascii_character_maps_as_the_regex_does() -> None:
    chars = "".join(chr(c) for c in range(0x80))
    assert naming.ident_chars(chars) == _NOT_IDENT.sub("_", chars)


def test_quoted_methods_are_what_js_string_writes() -> None:
    """call_spec looks a verb's JSON string up instead of quoting it."""
    assert operations._QUOTED_METHODS
    for method, quoted in operations._QUOTED_METHODS.items():
        assert quoted == js_string(method)


def test_has_control_answers_the_regex_for_every_code_point() -> None:
    """The printable fast path never hides a control character or a line terminator."""
    for cp in range(0x110000):
        ch = chr(cp)
        assert has_control(f"a{ch}b") == (_CC_OR_TERMINATOR.search(ch) is not None), hex(cp)


@settings(max_examples=3000, deadline=None)
@given(st.text(st.characters(blacklist_categories=("Cs",))) | st.text(_ROUTE_CHARS))
def test_has_control_agrees_with_the_regex(text: str) -> None:
    assert has_control(text) == (_CC_OR_TERMINATOR.search(text) is not None)
