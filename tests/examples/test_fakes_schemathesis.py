"""Both examples' fakes, checked against their own OpenAPI documents by schemathesis.

Why: each example's page rests on its fake answering as the document says. The fakes
validate their own answers, but only on the requests the runs make; schemathesis
generates requests from the document (every operation, including the ones the fakes
leave unimplemented) and sends them to a real loopback server. Positive cases must get
no 5xx and answers valid against the document's schema for their status; negative
cases (a body or parameter the document forbids) must be refused with a 4xx, which is
what "checks every request against the document" means.

The number of examples is bounded and derandomised, so `make test` stays quick and
never flaky; set PLIMSOLL_SCHEMATHESIS_EXAMPLES to look harder.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import (
    content_type_conformance,
    negative_data_rejection,
    not_a_server_error,
    response_schema_conformance,
)

from examples.mem0_grant.fake import DOCUMENT as MEM0_DOCUMENT
from examples.mem0_grant.fake import FakeMem0
from examples.memory_grant.fake import DOCUMENT as MEMORY_DOCUMENT
from examples.memory_grant.fake import FakeAgentMemory

EXAMPLES = int(os.environ.get("PLIMSOLL_SCHEMATHESIS_EXAMPLES", "12"))
KEY = "schemathesis-key-0123456789"


@dataclass(frozen=True)
class Target:
    name: str
    document: Path
    scheme: str  # the Authorization scheme the fake requires
    prefix: str  # the path of the document's server URL

    def start(self) -> Any:
        fake = FakeAgentMemory(KEY) if self.name == "memory_grant" else FakeMem0(KEY)
        return fake.start()


TARGETS = {
    "memory_grant": Target("memory_grant", MEMORY_DOCUMENT, "Bearer", "/client/v4"),
    "mem0_grant": Target("mem0_grant", MEM0_DOCUMENT, "Token", ""),
}
SCHEMAS = {name: schemathesis.openapi.from_path(t.document) for name, t in TARGETS.items()}
OPERATIONS = [
    (name, result.ok().label)
    for name, schema in SCHEMAS.items()
    for result in schema.get_all_operations()
]


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, Any]]:
    fakes = {name: target.start() for name, target in TARGETS.items()}
    try:
        yield fakes
    finally:
        for fake in fakes.values():
            fake.stop()


def _operation(name: str, label: str) -> Any:
    method, path = label.split(" ", 1)
    return SCHEMAS[name][path][method]


def _exercise(servers: dict[str, Any], name: str, label: str, mode: GenerationMode) -> int:
    """Send up to EXAMPLES generated cases; returns how many were sent."""
    target, fake = TARGETS[name], servers[name]
    base_url = fake.url + target.prefix
    auth = {"Authorization": f"{target.scheme} {KEY}"}
    checks = (
        [not_a_server_error, response_schema_conformance, content_type_conformance]
        if mode is GenerationMode.POSITIVE
        else [not_a_server_error, negative_data_rejection]
    )
    sent = 0

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(case=_operation(name, label).as_strategy(generation_mode=mode))
    def check(case: schemathesis.Case) -> None:
        nonlocal sent
        response = case.call(base_url=base_url, headers=auth, timeout=10)
        sent += 1
        if mode is GenerationMode.NEGATIVE and response.status_code == 411:
            # the loopback server's own refusal of a chunked body (it reads only bodies
            # with Content-Length) is a refusal of the request, before the fake reads it
            return
        case.validate_response(response, checks=checks)

    check()
    return sent


@pytest.mark.parametrize(("name", "label"), OPERATIONS, ids=[f"{n}:{op}" for n, op in OPERATIONS])
def test_the_fake_answers_as_its_document_says(
    servers: dict[str, Any], name: str, label: str
) -> None:
    before = len(servers[name].requests)
    sent = _exercise(servers, name, label, GenerationMode.POSITIVE)
    assert sent > 0 and len(servers[name].requests) - before == sent


@pytest.mark.parametrize(("name", "label"), OPERATIONS, ids=[f"{n}:{op}" for n, op in OPERATIONS])
def test_the_fake_refuses_what_its_document_forbids(
    servers: dict[str, Any], name: str, label: str
) -> None:
    _exercise(servers, name, label, GenerationMode.NEGATIVE)


def test_every_operation_of_both_documents_is_checked() -> None:
    counts = {name: sum(1 for n, _ in OPERATIONS if n == name) for name in TARGETS}
    assert counts == {"memory_grant": 14, "mem0_grant": 55}
