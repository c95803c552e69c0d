"""Form bodies with nested objects and arrays, serialised as the allow entry's `encoding`.

What the wire carries is read back with the standard library's `parse_qsl` (not our
encoder), and the Stripe fake (tests/examples/test_service_fakes.py) checks the same
bytes against Stripe's documented brackets. The refusals assert nothing reached the API.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qsl

import httpx
import pytest
import respx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runtime import Broker, HostRequest, Profile, Secret
from runtime.broker.calls import MAX_FORM_DEPTH, MAX_FORM_FIELDS
from specgen.allow import AllowError, entry_json, parse_entry
from specgen.operations import form_encoding_of
from specgen.routes import is_control

ORIGIN = "https://api.internal"
FORM = "application/x-www-form-urlencoded"
FORBIDDEN = b"forbidden by sandbox capability allowlist\n"
ENTRY = {
    "route": "POST /v1/customers",
    "body": [FORM],
    "encoding": {
        "metadata": "deepObject",
        "expand": "deepObject",
        "items": "deepObject",
        "tags": "form,explode=false",
        "color": "form,explode=false",
    },
}


def profile(entry: Any = ENTRY) -> Profile:
    parsed = parse_entry(entry)
    return Profile(
        name="p",
        base_url=ORIGIN,
        global_name="host",
        allowed_callers=("*",),
        allow=(parsed.route,),
        entries=(parsed,),
        token=Secret("broker-token-form-encoding-1"),
    )


@pytest.fixture
def api() -> Iterator[respx.MockRouter]:
    with respx.mock(base_url=ORIGIN, assert_all_called=False) as router:
        router.route().mock(return_value=httpx.Response(200, json={"ok": True}))
        yield router


def post(body: object, entry: Any = ENTRY) -> tuple[int, bytes]:
    raw = json.dumps(body).encode()
    reply = Broker(profile(entry))(
        HostRequest("POST", "", raw, route="/v1/customers", media_type=FORM)
    )
    return reply.status, reply.body


def wire(api: respx.MockRouter) -> list[tuple[str, str]]:
    assert api.calls.call_count == 1
    request = api.calls.last.request
    assert request.headers["Content-Type"] == FORM
    return parse_qsl(request.content.decode("ascii"), keep_blank_values=True)


def test_deep_objects_and_arrays_travel_in_stripes_brackets(api: respx.MockRouter) -> None:
    status, _ = post(
        {
            "email": "ana@example.com",
            "metadata": {"plan": "pro", "seats": 3, "vip": True},
            "expand": ["tax", "sources"],
            "items": [{"price": "price_1", "quantity": 2}, {"price": "price_2"}],
        }
    )
    assert status == 200
    assert wire(api) == [
        ("email", "ana@example.com"),
        ("metadata[plan]", "pro"),
        ("metadata[seats]", "3"),
        ("metadata[vip]", "true"),
        ("expand[]", "tax"),
        ("expand[]", "sources"),
        ("items[0][price]", "price_1"),
        ("items[0][quantity]", "2"),
        ("items[1][price]", "price_2"),
    ]


def test_a_deep_object_field_may_still_be_a_scalar(api: respx.MockRouter) -> None:
    """Stripe unsets all metadata with `metadata=`: a scalar needs no brackets."""
    assert post({"metadata": ""})[0] == 200
    assert wire(api) == [("metadata", "")]


def test_form_without_explode_joins_with_commas(api: respx.MockRouter) -> None:
    assert post({"tags": ["a", "b c"], "color": {"R": 100, "G": 200}})[0] == 200
    assert wire(api) == [("tags", "a,b c"), ("color", "R,100,G,200")]


def test_the_default_form_style_repeats_arrays_and_keeps_bracketed_names(
    api: respx.MockRouter,
) -> None:
    """A field the encoding does not name keeps what a form body always did: an array
    repeats its name, and a name the guest wrote with brackets is sent as written."""
    assert post({"ids": [1, 2], "metadata[plan]": "pro"})[0] == 200
    assert wire(api) == [("ids", "1"), ("ids", "2"), ("metadata[plan]", "pro")]


def _nest(depth: int) -> object:
    value: object = "x"
    for _ in range(depth):
        value = {"k": value}
    return value


@pytest.mark.parametrize(
    "body",
    [
        {"other": {"a": 1}},  # an object where the encoding gives no deepObject
        {"ids": [{"a": 1}]},  # an object inside a default-style array
        {"tags": [["a"]]},  # an array inside a comma-joined one
        {"color": {"R": {"x": 1}}},
        {"metadata": {"a]b": "x"}},  # a key forging structure
        {"metadata": {"a[b": "x"}},
        {"metadata": {"": "x"}},
        {"metadata": {"a\r\nb": "x"}},
        {"metadata": {"plan": None}},
        {"metadata": _nest(MAX_FORM_DEPTH + 1)},  # one bracket too many
        {"expand": [str(i) for i in range(MAX_FORM_FIELDS + 1)]},
        {"ids": list(range(MAX_FORM_FIELDS + 1))},
    ],
)
def test_what_the_encoding_cannot_carry_is_refused(api: respx.MockRouter, body: object) -> None:
    assert post(body) == (403, FORBIDDEN)
    assert api.calls.call_count == 0


def test_the_deepest_nesting_allowed_is_sent(api: respx.MockRouter) -> None:
    assert post({"metadata": _nest(MAX_FORM_DEPTH)})[0] == 200
    ((name, value),) = wire(api)
    assert name == "metadata" + "[k]" * MAX_FORM_DEPTH and value == "x"


_key = st.text(st.characters(codec="utf-8", exclude_characters="[]"), min_size=1, max_size=8)
_scalar = st.one_of(st.text(max_size=8), st.integers(-1000, 1000), st.booleans())
_value = st.recursive(
    _scalar,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(_key, inner, min_size=1, max_size=3)
    ),
    max_leaves=12,
)


def _expected(prefix: str, value: object) -> list[tuple[str, str]]:
    """Stripe's brackets, stated from its documentation rather than from calls.py."""
    if isinstance(value, dict):
        return [pair for k, v in value.items() for pair in _expected(f"{prefix}[{k}]", v)]
    if isinstance(value, list):
        nested = any(isinstance(v, dict | list) for v in value)
        return [
            pair
            for i, v in enumerate(value)
            for pair in _expected(f"{prefix}[{i}]" if nested else f"{prefix}[]", v)
        ]
    if isinstance(value, bool):
        return [(prefix, "true" if value else "false")]
    return [(prefix, str(value))]


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(metadata=_value)
def test_any_nested_value_reads_back_as_its_brackets(
    api: respx.MockRouter, metadata: object
) -> None:
    api.reset()
    status, _ = post({"metadata": metadata})
    if not all(_control_free(metadata)) or _depth(metadata) > MAX_FORM_DEPTH:
        assert status == 403
        return
    assert status == 200
    want = _expected("metadata", metadata)
    if not want:  # an empty object or array sends no field, and so no body at all
        return
    assert wire(api) == want


def _depth(value: object) -> int:
    """How many containers nest along the deepest path: the brackets of its longest name."""
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    return 0


def _control_free(value: object) -> Iterator[bool]:
    """One flag per object key: False for a key the broker must refuse."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield not any(is_control(ch) for ch in k)
            yield from _control_free(v)
    elif isinstance(value, list):
        for v in value:
            yield from _control_free(v)


# -- the entry language ------------------------------------------------------------


def test_an_entry_round_trips_its_encoding() -> None:
    entry = parse_entry(ENTRY)
    assert entry.form_style("metadata") == "deepObject"
    assert entry.form_style("email") == "form"
    assert parse_entry(entry_json(entry)) == entry
    assert entry_json(entry)["encoding"] == ENTRY["encoding"]  # type: ignore[index]


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"route": "POST /v1/a", "encoding": {"m": "deepObject"}}, "which the entry's body does not permit"),
        ({"route": "POST /v1/a", "body": [FORM], "encoding": {"m": "spaceDelimited"}},
         'encoding "spaceDelimited" of "m" is not one of form, form,explode=false, deepObject'),
        ({"route": "POST /v1/a", "body": [FORM], "encoding": {"m[x]": "deepObject"}},
         "holds a control character or a bracket"),
        ({"route": "POST /v1/a", "body": [FORM], "encoding": ["m"]}, "encoding must be an object"),
    ],
)  # fmt: skip
def test_entries_whose_encoding_cannot_hold_are_refused(entry: object, message: str) -> None:
    with pytest.raises(AllowError, match="allow entry") as info:
        parse_entry(entry)
    assert message in str(info.value)


# -- what the generator reads from a document ------------------------------------------


def test_the_generator_reads_the_documents_form_encoding() -> None:
    body = {
        "content": {
            "application/x-www-form-urlencoded; charset=utf-8": {
                "encoding": {
                    "metadata": {"style": "deepObject", "explode": True},
                    "tags": {"explode": False},  # style form by default
                    "ids": {"style": "form", "explode": True},  # the default: not written
                    "pipes": {"style": "pipeDelimited"},  # not a form style the broker builds
                    "a[b]": {"style": "deepObject"},  # a name the entry language refuses
                    "photo": {"contentType": "image/png"},
                }
            },
            "application/json": {"encoding": {"other": {"style": "deepObject"}}},
        }
    }
    assert form_encoding_of(body) == (("metadata", "deepObject"), ("tags", "form,explode=false"))
    assert form_encoding_of({"content": {"application/json": {}}}) == ()
    assert form_encoding_of({"content": {FORM: {"encoding": "deepObject"}}}) == ()
