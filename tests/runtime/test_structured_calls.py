"""Structured calls: the broker builds path, query, headers and body itself.

Each hostile case asserts the refusal (403, nothing reaching the API: respx counts the
calls) or the exact bytes on the wire when the case is legitimately encodable. The
property tests check that what the API receives decodes to exactly what was approved.
"""

from __future__ import annotations

import email.parser
import email.policy
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

import httpx
import pytest
import respx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runtime import Broker, HostRequest, Profile, Secret, run_with_grant
from runtime.contract import ObjectValue
from runtime.refusals import RULES
from specgen.allow import parse_entry
from specgen.routes import is_control
from tests.runtime.loopback import FakeAPI

KEY = "broker-token-structured-91c2"
ORIGIN = "https://api.internal"
FORBIDDEN = b"forbidden by sandbox capability allowlist\n"

ENTRIES: tuple[Any, ...] = (
    "GET /v1/users/*/items?state=open&per_page&page&q",
    {
        "route": "GET /v1/search",
        "query": ["ids", "tags", "words", "pipes", "filter", "one"],
        "headers": ["X-Request-Id", "X-Api-Version=2024-01-01", "X-List"],
        "style": {
            "ids": "form",
            "tags": "form,explode=false",
            "words": "spaceDelimited",
            "pipes": "pipeDelimited",
            "filter": "deepObject",
            "X-List": "simple",
        },
    },
    "GET /v1/files/*.json",
    "POST /v1/items",
    {"route": "POST /v1/forms", "body": ["application/x-www-form-urlencoded"]},
    {"route": "POST /v1/upload", "body": ["multipart/form-data"]},
    {"route": "POST /v1/notes", "body": ["text/plain", "application/json"]},
    {"route": "POST /v1/ping", "body": []},
    "DELETE /v1/items/*",
    {"route": "DELETE /v1/batch/", "body": ["application/json"]},
    "GET /v1/memories/",
    "HEAD /v1/items/*",
)


def profile(entries: tuple[Any, ...] = ENTRIES) -> Profile:
    parsed = tuple(parse_entry(e) for e in entries)
    return Profile(
        name="p",
        base_url=ORIGIN,
        global_name="host",
        allowed_callers=("*",),
        allow=tuple(e.route for e in parsed),
        entries=parsed,
        token=Secret(KEY),
    )


@pytest.fixture
def api() -> Iterator[respx.MockRouter]:
    with respx.mock(base_url=ORIGIN, assert_all_called=False) as router:
        router.route().mock(return_value=httpx.Response(200, json={"ok": True}))
        yield router


def call(
    route: str,
    values: tuple[str, ...] = (),
    *,
    method: str = "GET",
    query: tuple[tuple[str, Any], ...] = (),
    headers: tuple[tuple[str, Any], ...] = (),
    body: bytes | None = None,
    media_type: str | None = None,
) -> HostRequest:
    return HostRequest(
        method,
        "",
        body,
        route=route,
        values=values,
        query=query,
        headers=headers,
        media_type=media_type,
    )


def sent(api: respx.MockRouter) -> httpx.Request:
    assert api.calls.call_count == 1
    return api.calls.last.request


def refused(api: respx.MockRouter, request: HostRequest) -> str:
    """The call is refused with 403 and nothing sent; the guest's text is the text of
    the rule the trace records (runtime.refusals). Returns that rule's id."""
    broker = Broker(profile())
    reply = broker(request)
    assert api.calls.call_count == 0
    snapshot = broker.close()
    assert snapshot.denied == 1
    rule = snapshot.refused[0].rule
    assert reply.status == RULES[rule].status == 403
    if rule in ("route_not_granted", "call_malformed"):
        assert reply.body == FORBIDDEN
    else:
        prefix = RULES[rule].text.split("{name}")[0]
        assert reply.body.startswith(prefix.encode()) and reply.body.endswith(b"\n")
    return rule


# -- path values ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "wire"),
    [
        ("alice", "alice"),
        ("a b", "a%20b"),
        ("é", "%C3%A9"),
        ("user@example.com", "user%40example.com"),
        ("100%", "100%25"),
        ("%2F", "%252F"),
        ("a&b=c#d?e;f", "a%26b%3Dc%23d%3Fe%3Bf"),
        ("...", "..."),
        ("*", "%2A"),
        ("日本", "%E6%97%A5%E6%9C%AC"),
    ],
)
def test_a_path_value_is_one_encoded_segment(api: respx.MockRouter, value: str, wire: str) -> None:
    reply = Broker(profile())(call("/v1/users/*/items", (value,)))
    assert reply.status == 200
    request = sent(api)
    assert request.url.raw_path == f"/v1/users/{wire}/items?state=open".encode()
    assert unquote(request.url.raw_path.split(b"/")[3].decode()) == value


@pytest.mark.parametrize(
    "value",
    ["", ".", "..", "a/b", "/", "a\\b", "\\", "x\r\nHost: evil", "x\x00", "x\n", "\x7f", "x\u2028"],
)
def test_a_path_value_that_could_change_the_segments_is_refused(
    api: respx.MockRouter, value: str
) -> None:
    refused(api, call("/v1/users/*/items", (value,)))


def test_partial_segment_and_trailing_slash_and_head(api: respx.MockRouter) -> None:
    broker = Broker(profile())
    assert broker(call("/v1/files/*.json", ("a b",))).status == 200
    assert api.calls.last.request.url.raw_path == b"/v1/files/a%20b.json"
    assert broker(call("/v1/memories/")).status == 200
    assert api.calls.last.request.url.raw_path == b"/v1/memories/"
    assert broker(call("/v1/items/*", ("7",), method="HEAD")).status == 200
    assert api.calls.last.request.method == "HEAD"
    assert broker(call("/v1/memories")).status == 403  # /a and /a/ are different routes
    assert api.calls.call_count == 3


@pytest.mark.parametrize(
    ("route", "values"),
    [
        ("/v1/users/*/items", ()),
        ("/v1/users/*/items", ("a", "b")),
        ("/v1/users/*/../items", ("a",)),
        ("/v1/users//items", ()),
        ("/v1/users/*/items/", ("a",)),
        ("/v1/users/a/items?x=1", ()),
        ("v1/users/*/items", ("a",)),
        ("/v1/users/*/items#f", ("a",)),
        ("/v1/USERS/*/items", ("a",)),
        ("/v1/files/*", ("a.txt",)),
        ("/v1/files/*", (".json",)),
        ("/v1/secret", ()),
    ],
)
def test_a_route_pattern_the_grant_does_not_hold_is_refused(
    api: respx.MockRouter, route: str, values: tuple[str, ...]
) -> None:
    refused(api, call(route, values))


def test_a_literal_entry_admits_the_value_that_spells_it(api: respx.MockRouter) -> None:
    broker = Broker(profile(("GET /v1/users/me",)))
    assert broker(call("/v1/users/*", ("me",))).status == 200
    assert broker(call("/v1/users/*", ("you",))).status == 403
    assert broker(call("/v1/users/*", ("m%65",))).status == 403
    assert api.calls.call_count == 1


# -- query ------------------------------------------------------------------------------


def test_query_in_entry_order_with_the_pin_added(api: respx.MockRouter) -> None:
    q = (("page", "2"), ("per_page", "5"))
    assert Broker(profile())(call("/v1/users/*/items", ("a",), query=q)).status == 200
    assert sent(api).url.query == b"state=open&per_page=5&page=2"


def test_the_pin_may_be_repeated_exactly_never_changed(api: respx.MockRouter) -> None:
    broker = Broker(profile())
    assert broker(call("/v1/users/*/items", ("a",), query=(("state", "open"),))).status == 200
    for other in (
        "closed",
        "Open",
        "open ",
        ("open",),
        ("open", "closed"),
        ObjectValue((("a", "b"),)),
    ):
        reply = broker(call("/v1/users/*/items", ("a",), query=(("state", other),)))
        assert reply.status == 403, other
    assert api.calls.call_count == 1


@pytest.mark.parametrize(
    "query",
    [
        (("admin", "1"),),  # not listed
        (("State", "open"),),  # case differs: another name
        (("PAGE", "1"),),
        (("pаge", "1"),),  # Cyrillic а
        (("page\u200b", "1"),),
        (("page", "1"), ("page", "2")),  # duplicate name
        (("page", ("1", "2")),),  # array where a scalar is declared
        (("page", ObjectValue((("a", "1"),))),),
        (("page\r\nX-Evil: 1", "1"),),
        (("page", "1\r\nX-Evil: 1"),),
        (("page", "1\x00"),),
        (("q", "x" * 9000),),  # overlong
        (("page;admin", "1"),),
        (("page&admin", "1"),),
        (("page=1&admin", "1"),),
    ],
)
def test_hostile_query_is_refused(
    api: respx.MockRouter, query: tuple[tuple[str, Any], ...]
) -> None:
    refused(api, call("/v1/users/*/items", ("a",), query=query))


@pytest.mark.parametrize(
    ("value", "wire"),
    [
        ("a;b", "a%3Bb"),
        ("a&admin=1", "a%26admin%3D1"),
        ("x#frag", "x%23frag"),
        ("%2F..%2Fadmin", "%252F..%252Fadmin"),
        ("../admin", "..%2Fadmin"),
        ("a\\b", "a%5Cb"),
        ("a+b c", "a%2Bb%20c"),
        ("é", "%C3%A9"),
    ],
)
def test_query_values_are_encoded_never_interpreted(
    api: respx.MockRouter, value: str, wire: str
) -> None:
    assert Broker(profile())(call("/v1/users/*/items", ("a",), query=(("q", value),))).status == 200
    assert sent(api).url.query == f"state=open&q={wire}".encode()
    assert parse_qsl(sent(api).url.query.decode())[-1] == ("q", value)


def test_styles_serialise_the_openapi_way(api: respx.MockRouter) -> None:
    q = (
        ("ids", ("1", "2")),
        ("tags", ("a", "b,c")),
        ("words", ("x", "y")),
        ("pipes", ("p", "q")),
        ("filter", ObjectValue((("status", "open"), ("owner", "a b")))),
        ("one", "z"),
    )
    assert Broker(profile())(call("/v1/search", query=q)).status == 200
    assert sent(api).url.query == (
        b"ids=1&ids=2&tags=a,b%2Cc&words=x%20y&pipes=p%7Cq"
        b"&filter%5Bstatus%5D=open&filter%5Bowner%5D=a%20b&one=z"
    )


@pytest.mark.parametrize(
    "query",
    [
        (("filter", "flat"),),  # deepObject takes an object
        (("filter", ObjectValue((("a", "1"), ("a", "2")))),),  # repeated key
        (("filter", ObjectValue((("", "1"),))),),
        (("filter", ObjectValue((("a\r\n", "1"),))),),
        (("ids", ObjectValue((("a", "1"),))),),
        (("one", ("a", "b")),),
        (("ids", tuple(str(i) for i in range(300))),),  # too many parameters
    ],
)
def test_style_mismatches_are_refused(api: respx.MockRouter, query: Any) -> None:
    refused(api, call("/v1/search", query=query))


# -- headers ----------------------------------------------------------------------------


def test_listed_headers_travel_with_the_pin_and_the_entrys_spelling(api: respx.MockRouter) -> None:
    h = (("x-request-id", "r-1"), ("X-List", ("a", "b")))
    assert Broker(profile())(call("/v1/search", headers=h)).status == 200
    headers = sent(api).headers
    assert headers["X-Request-Id"] == "r-1"
    assert headers["X-Api-Version"] == "2024-01-01"
    assert headers["X-List"] == "a,b"
    assert headers["Authorization"] == f"Bearer {KEY}"
    assert [k for k, _ in sent(api).headers.raw].count(b"X-Request-Id") == 1


@pytest.mark.parametrize(
    "headers",
    [
        (("Authorization", "Bearer mine"),),
        (("Cookie", "a=1"),),
        (("Host", "evil"),),
        (("Content-Length", "0"),),
        (("Transfer-Encoding", "chunked"),),
        (("Connection", "close"),),
        (("Proxy-Authorization", "x"),),
        (("Content-Type", "text/html"),),
        (("X-Unlisted", "1"),),
        (("X-Request-Id", "a"), ("x-request-id", "b")),  # duplicate, case-folded
        (("X-Request-Id", "a\r\nAuthorization: Bearer x"),),
        (("X-Request-Id", "a\nb"),),
        (("X-Request-Id", "a\x00"),),
        (("X-Request-Id\r\nX-Evil", "1"),),
        (("X-Request-Id", "é"),),
        (("X-Request-Id", " padded"),),
        (("X-Request-Id", "x" * 5000),),
        (("X-Request-Id", ("a", "b")),),  # an array where one value is declared
        (("X-Api-Version", "1999-01-01"),),  # pinned
        (("X-Requеst-Id", "1"),),  # Cyrillic е
    ],
)
def test_hostile_headers_are_refused(api: respx.MockRouter, headers: Any) -> None:
    refused(api, call("/v1/search", headers=headers))


def test_a_header_the_credential_sets_can_never_be_granted() -> None:
    for name in ("Authorization", "proxy-anything", "X-Forwarded-For", "Host"):
        with pytest.raises(ValueError, match="set by the broker"):
            parse_entry({"route": "GET /a", "headers": [name]})


# -- bodies -----------------------------------------------------------------------------


def test_json_body_is_forwarded_byte_for_byte(api: respx.MockRouter) -> None:
    raw = b'{"b": 1.50, "a" : "\\u00e9"}'
    assert Broker(profile())(call("/v1/items", method="POST", body=raw)).status == 200
    assert sent(api).content == raw
    assert sent(api).headers["Content-Type"] == "application/json"


@pytest.mark.parametrize(
    ("route", "values", "method", "media"),
    [
        ("/v1/users/*/items", ("a",), "GET", None),  # GET never has a body
        ("/v1/items/*", ("a",), "DELETE", None),  # the entry gives DELETE none
        ("/v1/items/*", ("a",), "HEAD", None),
        ("/v1/ping", (), "POST", None),  # body: []
        ("/v1/items", (), "POST", "application/x-www-form-urlencoded"),  # JSON only
        ("/v1/forms", (), "POST", None),  # form only
        ("/v1/forms", (), "POST", "application/xml"),
        ("/v1/forms", (), "POST", "multipart/form-data"),
    ],
)
def test_a_body_where_the_grant_gives_none_is_refused(
    api: respx.MockRouter, route: str, values: tuple[str, ...], method: str, media: str | None
) -> None:
    refused(api, call(route, values, method=method, body=b'{"_method":"DELETE"}', media_type=media))


def test_a_documented_delete_body_is_carried(api: respx.MockRouter) -> None:
    raw = b'{"memory_ids":["a"]}'
    assert Broker(profile())(call("/v1/batch/", method="DELETE", body=raw)).status == 200
    assert sent(api).content == raw


def test_form_body_is_built_by_httpx_from_an_object(api: respx.MockRouter) -> None:
    raw = b'{"name": "a b&c=d", "n": 5, "ok": true, "tag": ["x", "y"]}'
    reply = Broker(profile())(
        call("/v1/forms", method="POST", body=raw, media_type="application/x-www-form-urlencoded")
    )
    assert reply.status == 200
    request = sent(api)
    assert request.headers["Content-Type"] == "application/x-www-form-urlencoded"
    assert parse_qsl(request.content.decode()) == [
        ("name", "a b&c=d"),
        ("n", "5"),
        ("ok", "true"),
        ("tag", "x"),
        ("tag", "y"),
    ]


@pytest.mark.parametrize(
    "raw",
    [
        b'"not an object"',
        b'{"a": {"nested": 1}}',
        b'{"a": null}',
        b'{"a": 1, "a": 2}',
        b'{"": 1}',
        b'{"a\\r\\nb": 1}',
    ],
)
def test_form_bodies_that_are_not_flat_objects_are_refused(
    api: respx.MockRouter, raw: bytes
) -> None:
    refused(
        api,
        call("/v1/forms", method="POST", body=raw, media_type="application/x-www-form-urlencoded"),
    )


def _parts(request: httpx.Request) -> list[tuple[str | None, str | None, bytes]]:
    head = f"Content-Type: {request.headers['Content-Type']}\r\n\r\n".encode()
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + request.content)
    return [
        (
            part.get_param("name", header="content-disposition"),
            part.get_filename(),
            part.get_payload(decode=True),
        )
        for part in message.iter_parts()
    ]


def test_multipart_boundary_injection_stays_inside_its_part(api: respx.MockRouter) -> None:
    fake = '\r\n--fake\r\nContent-Disposition: form-data; name="admin"\r\n\r\n1\r\n--fake--\r\n'
    import json

    raw = json.dumps(
        {
            "note": fake,
            "file": {"filename": 'evil".txt', "content": "--" + fake, "type": "text/plain"},
        }
    ).encode()
    reply = Broker(profile())(
        call("/v1/upload", method="POST", body=raw, media_type="multipart/form-data")
    )
    assert reply.status == 200
    request = sent(api)
    kind = request.headers["Content-Type"]
    assert kind.startswith("multipart/form-data; boundary=")
    boundary = kind.partition("boundary=")[2]
    assert len(boundary) == 32 and "fake" not in boundary
    parts = _parts(request)
    assert [p[0] for p in parts] == ["note", "file"]
    assert parts[0][2] == fake.encode()
    assert parts[1][2] == ("--" + fake).encode()


@pytest.mark.parametrize(
    "raw",
    [
        b'{"file": {"filename": "a\\r\\nb", "content": "x"}}',
        b'{"file": {"filename": "", "content": "x"}}',
        b'{"file": {"filename": "a", "content": 1}}',
        b'{"file": {"filename": "a", "content": "x", "type": "text/plain\\r\\nX: 1"}}',
        b'{"file": {"filename": "a", "content": "x", "extra": 1}}',
        b"{}",
    ],
)
def test_bad_multipart_parts_are_refused(api: respx.MockRouter, raw: bytes) -> None:
    refused(api, call("/v1/upload", method="POST", body=raw, media_type="multipart/form-data"))


def test_text_body(api: respx.MockRouter) -> None:
    reply = Broker(profile())(
        call("/v1/notes", method="POST", body=b'"hello\\nworld \\u00e9"', media_type="text/plain")
    )
    assert reply.status == 200
    assert sent(api).content == "hello\nworld é".encode()
    assert sent(api).headers["Content-Type"] == "text/plain; charset=utf-8"


# -- trace ------------------------------------------------------------------------------


def test_trace_keeps_parameter_names_never_values(api: respx.MockRouter) -> None:
    broker = Broker(profile())
    secret_value = "value-that-must-not-be-traced"
    q = (("q", secret_value), ("page", "3"))
    assert broker(call("/v1/users/*/items", (secret_value,), query=q)).status == 200
    h = (("X-Request-Id", secret_value),)
    assert broker(call("/v1/search", headers=h)).status == 200
    snap = broker.close()
    assert [r.params for r in snap.rows] == [
        ("state", "page", "q"),
        ("X-Request-Id", "X-Api-Version"),
    ]
    from runtime import audit_line, format_table

    assert secret_value not in audit_line("p", snap) + format_table(snap)
    assert '"params":["state","page","q"]' in audit_line("p", snap)


# -- properties: the wire is exactly what was approved ----------------------------------

TEXT = st.text(min_size=1, max_size=40).filter(lambda s: "\x00" not in s)
NAMES = st.sampled_from(["per_page", "page", "q"])


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(value=TEXT, params=st.dictionaries(NAMES, TEXT, max_size=3))
def test_property_wire_decodes_to_what_was_approved(value: str, params: dict[str, str]) -> None:
    with respx.mock(base_url=ORIGIN, assert_all_called=False) as api:
        api.route().mock(return_value=httpx.Response(200, json={}))
        broker = Broker(profile())
        reply = broker(call("/v1/users/*/items", (value,), query=tuple(params.items())))
        from runtime.broker.calls import path_value_error

        bad_value = path_value_error(value) is not None

        bad_param = any(is_control(ch) for v in params.values() for ch in v)
        if bad_value or bad_param:
            assert reply.status == 403 and api.calls.call_count == 0
            return
        assert reply.status == 200
        request = api.calls.last.request
        raw = request.url.raw_path.decode("ascii")
        path, _, query = raw.partition("?")
        segments = path.split("/")
        assert len(segments) == 5 and segments[:3] == ["", "v1", "users"]
        assert unquote(segments[3], errors="strict") == value
        expected = [("state", "open")] + [
            (n, params[n]) for n in ("per_page", "page", "q") if n in params
        ]
        assert parse_qsl(query, keep_blank_values=True) == expected
        assert urlsplit(str(request.url)).hostname == "api.internal"


# -- through the sandbox: the generated client sends structured calls ------------------

PREAMBLE = """
;(function () {
  const h = globalThis["host"];
  h["list"] = (user, options) => h.call({method: "GET", route: "/v1/users/*/items", query: ["state", "per_page", "page", "q"]}, [user], undefined, options);
  h["create"] = (body, options) => h.call({method: "POST", route: "/v1/forms", type: "application/x-www-form-urlencoded"}, [], body, options);
})();
"""


@pytest.fixture
def fake() -> Iterator[FakeAPI]:
    server = FakeAPI()
    yield server
    server.close()


def test_generated_style_methods_reach_the_api_through_the_sandbox(fake: FakeAPI) -> None:
    api = fake
    grant = Profile(
        name="p",
        base_url=api.url,
        global_name="host",
        allowed_callers=("*",),
        allow=tuple(parse_entry(e).route for e in ENTRIES),
        entries=tuple(parse_entry(e) for e in ENTRIES),
        preamble=PREAMBLE,
        token=Secret(KEY),
    )
    code = """
    const a = await host.list("ann lee@x", {per_page: 2, q: "a&b"});
    const b = await host.create({name: "n", n: 1});
    let e1 = "", e2 = "";
    try { await host.list("a", {admin: 1}); } catch (e) { e1 = e.message; }
    try { await host.list("a", {state: "closed"}); } catch (e) { e2 = e.message; }
    print(JSON.stringify([a, b, e1, e2]));
    """
    outcome = run_with_grant(code, grant)
    assert outcome.result.exit_code == 0, outcome.result.stderr
    assert [(s.method, s.path) for s in api.requests] == [
        ("GET", "/v1/users/ann%20lee%40x/items?state=open&per_page=2&q=a%26b"),
        ("POST", "/v1/forms"),
    ]
    assert api.requests[1].body == b"name=n&n=1"
    assert api.requests[1].headers["content-type"] == "application/x-www-form-urlencoded"
    out = outcome.result.stdout
    # an option the method does not have goes to the broker, which names it; a pin the
    # call contradicts is named too, never its value
    assert "host api 403: parameter not granted: admin" in out
    assert "host api 403: pinned value differs: state" in out
    assert "closed" not in out
    assert [r.rule for r in outcome.trace.refused] == ["parameter_not_granted", "pin_differs"]
    assert outcome.trace.denied == 2
    assert KEY not in out


FIELD = st.text(min_size=1, max_size=20).filter(lambda s: not any(is_control(c) for c in s))


@settings(max_examples=100, deadline=None)
@given(
    fields=st.dictionaries(
        FIELD, st.lists(st.text(max_size=20), min_size=1, max_size=3), max_size=4
    ),
    header=st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=40),
)
def test_property_form_fields_and_header_on_the_wire(
    fields: dict[str, list[str]], header: str
) -> None:
    import json

    entries = (
        {
            "route": "POST /v1/forms",
            "headers": ["X-Note"],
            "body": ["application/x-www-form-urlencoded"],
        },
    )
    with respx.mock(base_url=ORIGIN, assert_all_called=False) as api:
        api.route().mock(return_value=httpx.Response(200, json={}))
        raw = json.dumps(fields).encode()
        reply = Broker(profile(entries))(
            call(
                "/v1/forms",
                method="POST",
                headers=(("X-Note", header),),
                body=raw,
                media_type="application/x-www-form-urlencoded",
            )
        )
        # form values may hold any text (a newline in a textarea): urlencoding makes it
        # inert; names are held to no control character (FIELD), header values to ASCII
        padded = header != header.strip(" \t")
        if padded:
            assert reply.status == 403 and api.calls.call_count == 0
            return
        assert reply.status == 200
        request = api.calls.last.request
        assert request.headers["X-Note"] == header
        expected = [(k, v) for k, vs in fields.items() for v in vs]
        assert parse_qsl(request.content.decode(), keep_blank_values=True) == expected
