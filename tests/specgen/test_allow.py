"""The allow-entry language (specgen/allow.py): both spellings, and every refusal."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from specgen.allow import (
    AllowEntry,
    AllowError,
    Permit,
    declaration_problems,
    entry_json,
    header_forbidden,
    parse_entry,
    pin_error,
)
from specgen.params import Parameter, ParameterLocation, SchemaSummary
from specgen.routes import Route

ISSUES = Route(path="/repos/*/*/issues", method="GET")


def test_a_bare_string_names_no_parameter() -> None:
    entry = parse_entry("GET /repos/*/*/issues")
    assert entry == AllowEntry(ISSUES)
    assert entry.query == entry.headers == ()


def test_the_string_form_names_and_pins_query_parameters() -> None:
    entry = parse_entry("GET /repos/*/*/issues?state=open&per_page&page")
    assert entry.route == ISSUES
    assert entry.query == (Permit("state", "open"), Permit("per_page"), Permit("page"))


def test_the_string_form_percent_decodes_and_keeps_plus() -> None:
    entry = parse_entry("GET /a?q=a%20b%26c%3Dd&x=1+2&e=")
    assert entry.query == (Permit("q", "a b&c=d"), Permit("x", "1+2"), Permit("e", ""))


def test_the_object_form_adds_headers_and_takes_values_literally() -> None:
    entry = parse_entry(
        {
            "route": "GET /repos/*/*/issues",
            "query": ["per_page", "state=open", "q=a%20b"],
            "headers": ["X-Request-Id", "X-GitHub-Api-Version=2022-11-28"],
        }
    )
    assert entry.route == ISSUES
    assert entry.query == (Permit("per_page"), Permit("state", "open"), Permit("q", "a%20b"))
    assert entry.headers == (Permit("X-Request-Id"), Permit("X-GitHub-Api-Version", "2022-11-28"))
    assert entry.header_names() == {"x-request-id", "x-github-api-version"}


@pytest.mark.parametrize(
    "raw",
    [
        "GET /a",
        "GET /a?x",
        "GET /a?q=a%20b%26c&r=%25",
        {"route": "GET /a", "headers": ["X-A", "X-B=1"]},
        {"route": "GET /a", "query": ["a=b c"], "headers": ["X-A"]},
    ],
)
def test_entry_json_reads_back_as_the_same_entry(raw: object) -> None:
    entry = parse_entry(raw)
    assert parse_entry(entry_json(entry)) == entry


@given(
    st.lists(
        st.tuples(
            st.text(min_size=1, max_size=8).filter(lambda s: s.isprintable()),
            st.none() | st.text(max_size=8).filter(lambda s: s.isprintable()),
        ),
        max_size=4,
        unique_by=lambda t: t[0],
    )
)
def test_any_query_list_round_trips_through_the_string_form(
    items: list[tuple[str, str | None]],
) -> None:
    entry = AllowEntry(ISSUES, tuple(Permit(n, v) for n, v in items))
    assert parse_entry(entry_json(entry)) == entry


HEADERS_NEVER = [
    "Authorization",
    "authorization",
    "AUTHORIZATION",
    "Cookie",
    "Host",
    "Content-Length",
    "Transfer-Encoding",
    "Connection",
    "Proxy-Authorization",
    "proxy-connection",
    "Content-Type",
    "Accept-Encoding",
    "X-Forwarded-For",
    "TE",
    "Upgrade",
    "Content-MD5",
    # Request-rewrite headers: a server that honours one runs another method or path
    # than the one the broker matched against the grant.
    "X-HTTP-Method-Override",
    "x-http-method",
    "X-Method-Override",
    "X-Original-URL",
    "X-Rewrite-URL",
]


@pytest.mark.parametrize("name", HEADERS_NEVER)
def test_a_header_the_broker_owns_is_refused_in_any_case(name: str) -> None:
    with pytest.raises(AllowError, match="set by the broker"):
        parse_entry({"route": "GET /a", "headers": [name]})
    with pytest.raises(AllowError, match="set by the broker"):
        parse_entry({"route": "GET /a", "headers": [f"{name}=x"]})


def test_a_header_the_token_block_sets_is_refused_too() -> None:
    assert header_forbidden("x-api-key", reserved=["X-API-Key"])
    with pytest.raises(AllowError, match="set by the broker"):
        parse_entry({"route": "GET /a", "headers": ["X-Api-Key"]}, reserved=["X-API-Key"])
    assert parse_entry({"route": "GET /a", "headers": ["X-Api-Key"]}).headers


@pytest.mark.parametrize("bad", ["\r", "\n", "\x00", "\r\n", "\x7f", "\u2028"])
def test_control_characters_are_refused_in_names_and_values(bad: str) -> None:
    for raw in (
        {"route": "GET /a", "query": [f"a{bad}b"]},
        {"route": "GET /a", "query": [f"a=x{bad}Host: evil"]},
        {"route": "GET /a", "headers": [f"X-A=x{bad}Host: evil"]},
    ):
        with pytest.raises(AllowError, match="control character"):
            parse_entry(raw)
    encoded = "".join(f"%{b:02X}" for b in bad.encode())
    with pytest.raises(AllowError, match="control character"):
        parse_entry(f"GET /a?q=x{encoded}y")
    with pytest.raises(AllowError, match="control character"):
        parse_entry(f"GET /a?q{encoded}=1")


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("GET /a?x&x", 'query parameter "x" is listed twice'),
        ("GET /a?x=1&x=2", 'query parameter "x" is listed twice'),
        ({"route": "GET /a", "headers": ["X-A", "x-a"]}, 'header "x-a" is listed twice'),
        ({"route": "GET /a", "headers": ["X-A=1", "X-A=2"]}, "listed twice"),
        ("GET /a?", "nothing after ?"),
        ("GET /a?x&&y", "an empty item"),
        ("GET /a?=1", "name is empty"),
        ("GET /a?x y", "whitespace"),
        ("GET /a?q=%zz", "not %XX"),
        ("GET /a?q=%ff", "invalid UTF-8"),
        ({"route": "GET /a", "headers": ["Bad Name"]}, "not an HTTP field name"),
        ({"route": "GET /a", "headers": ["X:A"]}, "not an HTTP field name"),
        ({"route": "GET /a", "headers": ["X-\u00e9"]}, "not an HTTP field name"),
        ({"route": "GET /a", "headers": [""]}, "name is empty"),
        ({"route": "GET /a?x"}, 'go in "query"'),
        ({"route": "GET /a", "pin": {}}, 'unknown key "pin"'),
        ({"query": ["x"]}, '"route" must be'),
        ({"route": "GET /a", "query": "x"}, "must be a list of strings"),
        ({"route": "GET /a", "query": [1]}, "must be a list of strings"),
        (["GET /a"], "must be"),
        ("GET", 'must be "METHOD /path"'),
    ],
)
def test_refusals_name_what_and_why(raw: object, message: str) -> None:
    with pytest.raises(AllowError) as exc:
        parse_entry(raw)
    assert message in str(exc.value)
    assert "\n" not in str(exc.value)


def _p(name: str, where: ParameterLocation, **schema: object) -> Parameter:
    return Parameter(name, where, False, SchemaSummary(**schema), "form", True)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("value", "schema", "ok"),
    [
        ("open", {"type": "string", "enum": ("open", "closed", "all")}, True),
        ("opened", {"type": "string", "enum": ("open", "closed", "all")}, False),
        ("30", {"type": "integer"}, True),
        ("-3", {"type": "integer"}, True),
        ("3.5", {"type": "integer"}, False),
        ("1e3", {"type": "number"}, True),
        ("NaN", {"type": "number"}, False),
        ("inf", {"type": "number"}, False),
        ("true", {"type": "boolean"}, True),
        ("True", {"type": "boolean"}, False),
        ("anything", {}, True),
        ("a,b", {"type": "array", "items": "string"}, True),
    ],
)
def test_a_pinned_value_is_checked_against_its_schema(
    value: str, schema: dict[str, object], ok: bool
) -> None:
    assert (pin_error(value, SchemaSummary(**schema)) is None) is ok  # type: ignore[arg-type]


def test_declaration_problems_name_undeclared_parameters_and_bad_pins() -> None:
    query = [_p("state", ParameterLocation.QUERY, type="string", enum=("open", "closed"))]
    query.append(_p("per_page", ParameterLocation.QUERY, type="integer"))
    headers = [_p("X-Request-Id", ParameterLocation.HEADER)]
    good = parse_entry(
        {"route": "GET /a", "query": ["state=open", "per_page=50"], "headers": ["x-request-id"]}
    )
    assert declaration_problems(good, query, headers) == []
    bad = parse_entry(
        {
            "route": "GET /a",
            "query": ["state=opened", "admin", "per_page=x"],
            "headers": ["X-Debug"],
        }
    )
    problems = declaration_problems(bad, query, headers)
    assert len(problems) == 4
    assert 'pins query parameter "state" to "opened"' in problems[0]
    assert 'names query parameter "admin", which the document does not declare' in problems[1]
    assert "is not an integer" in problems[2]
    assert 'names header "X-Debug"' in problems[3]
    # a query name is exact: case matters there, unlike for headers
    assert declaration_problems(parse_entry("GET /a?State"), query, headers)


@pytest.mark.parametrize(
    ("method", "header", "accepted"),
    [
        ("GET", "If-None-Match", True),
        ("HEAD", "if-none-match", True),
        ("PUT", "If-None-Match", True),  # `*`: create only if nothing is there
        ("GET", "If-Modified-Since", True),
        ("POST", "If-Modified-Since", False),  # RFC 9110 13.1.3: GET and HEAD only
        ("PATCH", "If-Match", True),
        ("DELETE", "If-Unmodified-Since", True),
        ("GET", "If-Match", False),  # the lost-update guards are for writes
        ("GET", "If-Range", False),  # conditional, but not one of the four
        ("GET", "If-None-Match-X", False),
        ("GET", "X-If-None-Match", False),
    ],
)
def test_http_conditional_headers_need_no_declaration_and_nothing_else_does(
    method: str, header: str, accepted: bool
) -> None:
    entry = parse_entry({"route": f"{method} /a", "headers": [header]})
    problems = declaration_problems(entry, [], [])
    assert (problems == []) is accepted, problems
    if not accepted:
        assert f'names header "{header}", which the document does not declare' in problems[0]


def test_a_conditional_header_on_the_wrong_method_says_where_it_may_go() -> None:
    entry = parse_entry({"route": "GET /a", "headers": ["If-Match"]})
    (problem,) = declaration_problems(entry, [], [])
    assert problem.endswith(
        '(HTTP\'s conditional header "If-Match" may be listed undeclared only on '
        "DELETE, PATCH, POST, PUT)"
    )


def test_response_headers_in_the_object_form_round_trip() -> None:
    from specgen.allow import entry_json, parse_entry

    raw = {"route": "GET /v1/items", "response_headers": ["Link", "X-RateLimit-*"]}
    entry = parse_entry(raw)
    assert entry.response_headers == ("link", "x-ratelimit-*")
    assert parse_entry(entry_json(entry)) == entry
    # the string form is unchanged: it has no way to say it, and reads as before
    assert parse_entry("GET /v1/items?page").response_headers == ()


def test_response_header_patterns_match_names_and_prefixes_only() -> None:
    from specgen.allow import response_header_readable

    patterns = ("link", "x-ratelimit-*")
    assert response_header_readable("link", patterns)
    assert response_header_readable("x-ratelimit-remaining", patterns)
    assert response_header_readable("content-type", ())
    assert not response_header_readable("linked", patterns)
    assert not response_header_readable("x-ratelimit", patterns)
    assert not response_header_readable("etag", patterns)
    # a forbidden name is never readable, whatever the patterns say
    assert not response_header_readable("set-cookie", ("set-*",))
    assert not response_header_readable("www-authenticate", ("www-authenticate",))
