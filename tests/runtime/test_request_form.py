"""The broker's requests are the ones httpx itself would make of the same pieces, and
its path values are encoded as urllib's `quote` encodes them.

`Policy.build` makes a request with no body or a body of bytes as one stream, adding
Host and Content-Length itself instead of going through httpx's content encoding; each
request it makes is compared here, header by header and byte by byte, with the one
httpx builds from the same method, URL, headers and content.
"""

from __future__ import annotations

from urllib.parse import quote

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from runtime.broker.calls import _encode
from runtime.broker.policy import _bytes_request
from specgen.allow import FORBIDDEN_HEADERS

URLS = ["https://api.example.com/v1/items", "http://127.0.0.1:8123/a/b?x=1&y=%20"]
#: Names a grant may give a request (never one that frames it: specgen.allow).
HEADER = st.tuples(
    st.text("abcdefghijklmnopqrstuvwxyz-", min_size=1, max_size=12).filter(
        lambda name: name not in FORBIDDEN_HEADERS
    ),
    st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=20),
)


@given(
    method=st.sampled_from(["GET", "DELETE", "HEAD", "POST", "PUT", "PATCH", "OPTIONS"]),
    url=st.sampled_from(URLS),
    headers=st.lists(HEADER, max_size=4),
    content=st.one_of(st.none(), st.binary(max_size=64)),
)
def test_a_bytes_request_is_the_one_httpx_makes(
    method: str, url: str, headers: list[tuple[str, str]], content: bytes | None
) -> None:
    timeout = httpx.Timeout(5.0).as_dict()
    ours = _bytes_request(method, httpx.URL(url), headers, content, timeout)
    theirs = httpx.Request(
        method, url, headers=headers, content=content or None, extensions={"timeout": timeout}
    )
    theirs.read()
    assert ours.method == theirs.method
    assert str(ours.url) == str(theirs.url) and ours.url.raw_path == theirs.url.raw_path
    assert ours.headers.raw == theirs.headers.raw
    assert ours.content == theirs.content
    assert b"".join(ours.stream) == b"".join(theirs.stream)
    assert ours.extensions == theirs.extensions


@pytest.mark.parametrize("content", [None, b"", b'{"a":1}'])
def test_a_bodiless_post_says_its_length_is_zero(content: bytes | None) -> None:
    request = _bytes_request("POST", httpx.URL(URLS[0]), [], content, {})
    assert request.headers["content-length"] == str(len(content or b""))


@given(st.text() | st.text("abcXYZ019_.~-%/ +\u00e9"))
def test_a_path_value_is_encoded_as_urllib_quotes_it(text: str) -> None:
    """The unreserved fast path of the broker's path encoding changes no value's bytes."""
    try:
        expected = quote(text, safe="", encoding="utf-8", errors="strict")
    except UnicodeEncodeError:
        with pytest.raises(UnicodeEncodeError):
            _encode(text)
        return
    assert _encode(text) == expected
