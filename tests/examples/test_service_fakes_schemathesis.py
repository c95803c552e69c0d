"""The GitHub, Stripe and Slack fakes, checked against their own OpenAPI documents by schemathesis.

Why: the fakes are there to hold our client and broker to what the real services
accept, so they must first be held to the services' documents. schemathesis generates
requests from each document and sends them to the fake on loopback. Positive cases must
get no 5xx and answers valid for their status; negative cases (a value the document
forbids) must be refused. GitHub and Stripe are checked on the operations the fakes
implement (the rest are routed and answered 404, which `test_service_fakes.py` shows);
Slack on all three of its operations.

Slack answers every error as HTTP 200 with `ok: false`, and its document files those
under `default`; the Slack check validates an `ok: false` body against `default` and an
`ok: true` one against `200` (history's `response_metadata` set aside, as
`examples.kit.fakes.slack.DEVIATIONS` lists), with the document's validator, not the
fake's. Bounded and derandomised, like the other examples' check;
PLIMSOLL_SCHEMATHESIS_EXAMPLES looks harder.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import orjson
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from jsonschema.exceptions import best_match
from openapi_schema_validator import OAS30Validator
from referencing import Registry
from referencing.jsonschema import DRAFT4
from schemathesis import GenerationMode
from schemathesis.checks import (
    content_type_conformance,
    negative_data_rejection,
    not_a_server_error,
    response_schema_conformance,
)

from examples.github_triage import fake as github
from examples.kit.fakes import slack, stripe

EXAMPLES = int(os.environ.get("PLIMSOLL_SCHEMATHESIS_EXAMPLES", "8"))
TOKENS = {
    "github": "ghp_fake0123456789",
    "stripe": "sk_test_fake0123456789",
    "slack": "xoxb-fake-0123",
}


@dataclass(frozen=True)
class Target:
    make: Callable[[str], Any]
    document: Any
    prefix: str
    auth: str
    #: operationIds checked (None: all of the document's)
    operations: frozenset[str] | None
    #: path values that reach the fake's data rather than a 404
    path_values: dict[str, str]


TARGETS = {
    "github": Target(
        github.FakeGitHub,
        github.DOCUMENT,
        "",
        f"Bearer {TOKENS['github']}",
        frozenset(github._HANDLERS),
        {"owner": github.OWNER, "repo": github.REPO},
    ),
    "stripe": Target(
        stripe.FakeStripe,
        stripe.DOCUMENT,
        "",
        f"Bearer {TOKENS['stripe']}",
        frozenset(
            {
                "PostCustomers",
                "GetCustomers",
                "GetCustomersCustomer",
                "PostCustomersCustomer",
                "DeleteCustomersCustomer",
            }
        ),
        {},
    ),
    "slack": Target(slack.FakeSlack, slack.DOCUMENT, "/api", f"Bearer {TOKENS['slack']}", None, {}),
}
SCHEMAS = {name: schemathesis.openapi.from_path(t.document) for name, t in TARGETS.items()}


def _operations() -> list[tuple[str, str]]:
    out = []
    for name, schema in SCHEMAS.items():
        wanted = TARGETS[name].operations
        for result in schema.get_all_operations():
            op = result.ok()
            if wanted is None or op.definition.raw.get("operationId") in wanted:
                out.append((name, op.label))
    return out


OPERATIONS = _operations()


def _negatable(name: str, label: str) -> bool:
    """Whether the document forbids anything on this operation: a body, or a parameter
    whose schema is more than "any string". An operation taking only strings (GitHub's
    get-a-label) has no negative case for schemathesis to make."""
    method, path = label.split(" ", 1)
    raw = SCHEMAS[name][path][method].definition.raw
    if "requestBody" in raw:
        return True
    for param in raw.get("parameters", []):
        if "$ref" in param:
            param = SCHEMAS[name].raw_schema["components"]["parameters"][
                param["$ref"].split("/")[-1]
            ]
        if param.get("schema", {}) != {"type": "string"} or (
            param.get("required") and param["in"] != "path"
        ):
            return True
    return False


NEGATABLE = [(n, op) for n, op in OPERATIONS if _negatable(n, op)]


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, Any]]:
    fakes = {name: t.make(TOKENS[name]).start() for name, t in TARGETS.items()}
    try:
        yield fakes
    finally:
        for fake in fakes.values():
            fake.stop()


def _slack_body_check(label: str) -> Callable[[Any], None]:
    """An ok:false body against `default`, an ok:true one against `200`, straight from
    the document (history's response_metadata set aside: a listed deviation)."""
    doc = orjson.loads(slack.DOCUMENT.read_bytes())
    registry = Registry().with_resource("urn:slack", DRAFT4.create_resource(doc))
    method, path = label.split(" ", 1)
    responses = doc["paths"][path][method.lower()]["responses"]

    def check(response: Any) -> None:
        body = response.json()
        key = "200" if body.get("ok") is True else "default"
        if body.get("ok") is False and body.get("error") in ("invalid_cursor", "invalid_arguments"):
            return  # a listed deviation: Slack documents them, the 2021 document does not
        if path == "/conversations.history" and key == "200":
            assert isinstance(
                body.pop("response_metadata", {"next_cursor": ""})["next_cursor"], str
            )
        schema = responses[key]["content"]["application/json"]["schema"]
        validator = OAS30Validator(
            schema, registry=registry, _resolver=registry.resolver(base_uri="urn:slack")
        )
        error = best_match(validator.iter_errors(body))
        assert error is None, f"{label}: {error.message if error else ''}"
        assert response.status_code == 200

    return check


def _exercise(servers: dict[str, Any], name: str, label: str, mode: GenerationMode) -> int:
    target, fake = TARGETS[name], servers[name]
    method, path = label.split(" ", 1)
    operation = SCHEMAS[name][path][method]
    headers = {"Authorization": target.auth, "User-Agent": "schemathesis"}
    if name == "slack":
        checks = [not_a_server_error] + (
            [content_type_conformance] if mode is GenerationMode.POSITIVE else []
        )
        body_check = _slack_body_check(label) if mode is GenerationMode.POSITIVE else None
    else:
        checks = (
            [not_a_server_error, response_schema_conformance, content_type_conformance]
            if mode is GenerationMode.POSITIVE
            else [not_a_server_error, negative_data_rejection]
        )
        body_check = None
    sent = 0

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(case=operation.as_strategy(generation_mode=mode))
    def check(case: schemathesis.Case) -> None:
        nonlocal sent
        if mode is GenerationMode.POSITIVE and case.path_parameters:
            for key, value in target.path_values.items():
                if key in case.path_parameters:
                    case.path_parameters[key] = value
        response = case.call(base_url=fake.url + target.prefix, headers=headers, timeout=10)
        sent += 1
        if mode is GenerationMode.NEGATIVE and response.status_code in (411, 414):
            # the HTTP server's own refusals (a chunked body, a request line
            # over 64 KiB) are refusals of the invalid request, before the fake reads it
            return
        case.validate_response(response, checks=checks)
        if body_check is not None:
            body_check(response)

    check()
    return sent


@pytest.mark.parametrize(("name", "label"), OPERATIONS, ids=[f"{n}:{op}" for n, op in OPERATIONS])
def test_the_fake_answers_as_its_document_says(
    servers: dict[str, Any], name: str, label: str
) -> None:
    before = len(servers[name].requests)
    sent = _exercise(servers, name, label, GenerationMode.POSITIVE)
    assert sent > 0 and len(servers[name].requests) - before == sent


@pytest.mark.parametrize(("name", "label"), NEGATABLE, ids=[f"{n}:{op}" for n, op in NEGATABLE])
def test_the_fake_refuses_what_its_document_forbids(
    servers: dict[str, Any], name: str, label: str
) -> None:
    _exercise(servers, name, label, GenerationMode.NEGATIVE)


def test_the_operations_checked() -> None:
    counts = {name: sum(1 for n, _ in OPERATIONS if n == name) for name in TARGETS}
    assert counts == {"github": 10, "stripe": 5, "slack": 3}
    assert sorted(set(OPERATIONS) - set(NEGATABLE)) == [
        ("github", "GET /repos/{owner}/{repo}/labels/{name}")
    ]
