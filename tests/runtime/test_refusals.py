"""One refusal vocabulary: the broker refuses by rule, the guest reads that rule's text
(naming a parameter, never a value), the trace and the audit record the rule's id and
never a name the guest chose."""

from __future__ import annotations

import json

import pytest
import respx

from runtime import Broker, audit_line
from runtime.refusals import RULES, guest_text, shown_name
from tests.runtime.test_structured_calls import api, call, profile  # noqa: F401

ISSUES = "/v1/users/*/items"


def _refused(request, entries=None) -> tuple[int, bytes, str, dict]:  # type: ignore[no-untyped-def]
    broker = Broker(profile() if entries is None else profile(entries))
    reply = broker(request)
    snapshot = broker.close()
    line = audit_line("p", snapshot)
    return reply.status, reply.body, line, json.loads(line)


def test_an_unlisted_parameter_is_named_and_the_route_is_not_blamed(
    api: respx.MockRouter,  # noqa: F811
) -> None:
    status, body, line, record = _refused(call(ISSUES, ("a",), query=(("sort", "secret-v"),)))
    assert (status, body) == (403, b"parameter not granted: sort\n")
    assert api.calls.call_count == 0
    assert record["denied"] == 1
    assert record["refused"] == [
        {"rule": "parameter_not_granted", "method": "GET", "route": ISSUES}
    ]
    assert "sort" not in line and "secret-v" not in line  # the guest's name and value


def test_a_pin_that_differs_is_named_without_its_value(api: respx.MockRouter) -> None:  # noqa: F811
    status, body, line, record = _refused(call(ISSUES, ("a",), query=(("state", "closed"),)))
    assert (status, body) == (403, b"pinned value differs: state\n")
    assert b"closed" not in body and "closed" not in line
    assert record["refused"][0]["rule"] == "pin_differs"


def test_a_body_type_the_entry_lacks_is_named(api: respx.MockRouter) -> None:  # noqa: F811
    request = call("/v1/notes", method="POST", body=b"<x/>", media_type="application/xml")
    status, body, _, record = _refused(request)
    assert (status, body) == (403, b"body type not granted: application/xml\n")
    assert record["refused"][0]["rule"] == "body_type_not_granted"


def test_an_unlisted_header_is_a_parameter_not_granted(api: respx.MockRouter) -> None:  # noqa: F811
    status, body, _, record = _refused(call(ISSUES, ("a",), headers=(("X-Admin", "1"),)))
    assert (status, body) == (403, b"parameter not granted: x-admin\n")
    assert record["refused"][0]["rule"] == "parameter_not_granted"


def test_a_route_not_granted_keeps_the_reference_bytes(api: respx.MockRouter) -> None:  # noqa: F811
    status, body, _, record = _refused(call("/v1/other/*", ("a",)))
    assert (status, body) == (403, b"forbidden by sandbox capability allowlist\n")
    assert record["refused"] == [{"rule": "route_not_granted"}]


def test_a_malformed_call_on_a_granted_route_is_its_own_rule(api: respx.MockRouter) -> None:  # noqa: F811
    status, body, _, record = _refused(call(ISSUES, ("a/b",)))
    assert (status, body) == (403, b"forbidden by sandbox capability allowlist\n")
    assert record["refused"] == [{"rule": "call_malformed"}]


def test_the_budget_is_a_rule_too(api: respx.MockRouter) -> None:  # noqa: F811
    broker = Broker(profile())
    for _ in range(profile().max_calls):
        broker(call(ISSUES, ("a",)))
    reply = broker(call(ISSUES, ("a",)))
    record = json.loads(audit_line("p", broker.close()))
    assert (reply.status, reply.body) == (429, b"host api call budget for this run is exhausted\n")
    assert record["refused"] == [{"rule": "budget_exhausted"}]


@pytest.mark.parametrize(
    ("name", "shown"),
    [
        ("sort", "sort"),
        ("filter[state]", "filter[state]"),
        ("a b", '"a b"'),
        ("é\n", '"\\u00e9\\n"'),
        ("x" * 100, json.dumps("x" * 64)),
    ],
)
def test_a_name_that_is_not_a_plain_token_is_quoted_ascii(name: str, shown: str) -> None:
    assert shown_name(name) == shown
    text = guest_text("parameter_not_granted", name)
    assert text == "parameter not granted: " + shown
    assert text.isascii() and "\n" not in text


def test_every_rule_has_a_status_a_text_and_a_hint() -> None:
    assert RULES["approval_declined"].status == 403  # reserved for the approval step
    for rule_id, rule in RULES.items():
        assert rule.id == rule_id and rule.status in (403, 413, 429, 503)
        assert rule.text.isascii() and rule.hint.partition(": ")[1] == ": "
