"""The fake Agent Memory API, exercised over real loopback HTTP with httpx.

Every answer is checked against the document's response schema for its operation and
status by a validator built here from the raw document (not the fake's own), so a fake
that drifted from the document fails even if its internal checks drifted with it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from openapi_schema_validator import OAS30Validator, oas30_format_checker
from referencing import Registry
from referencing.jsonschema import DRAFT4

from examples.memory_grant import fake as fake_module
from examples.memory_grant.fake import (
    EXAMPLE_ACCOUNT,
    FakeAgentMemory,
    RecordedRequest,
    recall_score,
    terms,
)
from tests import conftest as prerequisites

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "memory_grant"
SHARED = "data/cloudflare-agent-memory"
DOC = json.loads((EXAMPLE / "agent-memory.openapi.json").read_text())
TOKEN = "fake-agent-memory-token-held-by-the-broker"
AUTH = {"Authorization": f"Bearer {TOKEN}"}

A = f"/client/v4/accounts/{EXAMPLE_ACCOUNT}/agent-memory/namespaces"
NS = f"{A}/support-agent"
ME = f"{NS}/profiles/customer-42"
SPANISH = "The customer wants replies in Spanish."

_REGISTRY: Registry[Any] = Registry().with_resource("urn:doc", DRAFT4.create_resource(DOC))


def _escape(s: str) -> str:
    return s.replace("~", "~0").replace("/", "~1")


def _operations() -> dict[str, tuple[str, str, dict[str, Any]]]:
    ops = {}
    for path, item in DOC["paths"].items():
        for method, op in item.items():
            if method != "parameters":
                ops[op["operationId"]] = (method, path, op)
    return ops


OPERATIONS = _operations()


def assert_documented(operation_id: str, response: httpx.Response) -> Any:
    """The response is JSON, and valid for the document's entry for its status."""
    assert response.headers["content-type"] == "application/json"
    body = orjson.loads(response.content)
    method, path, op = OPERATIONS[operation_id]
    status = str(response.status_code)
    key = status if status in op["responses"] else f"{status[0]}XX"
    assert key in op["responses"], f"{operation_id} documents no {status} response"
    pointer = (
        f"/paths/{_escape(path)}/{method}/responses/{_escape(key)}/content/application~1json/schema"
    )
    validator = OAS30Validator(
        {"$ref": f"urn:doc#{pointer}"}, registry=_REGISTRY, format_checker=oas30_format_checker
    )
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(body)]
    assert errors == [], f"{operation_id} {status}: {errors}"
    return body


@pytest.fixture
def api() -> Iterator[FakeAgentMemory]:
    with FakeAgentMemory(TOKEN) as server:
        yield server


@pytest.fixture
def client(api: FakeAgentMemory) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=api.url, headers=AUTH) as c:
        yield c


def post(client: httpx.Client, path: str, body: Any) -> httpx.Response:
    return client.post(
        path, content=orjson.dumps(body), headers={"Content-Type": "application/json"}
    )


def test_the_documents_sha256_is_the_one_provenance_records() -> None:
    recorded = re.search(r"Its SHA-256 \(`([0-9a-f]{64})`", (EXAMPLE / "PROVENANCE.md").read_text())
    assert recorded is not None
    raw = (EXAMPLE / "agent-memory.openapi.json").read_bytes()
    assert hashlib.sha256(raw).hexdigest() == recorded.group(1)


def test_copies_of_the_document_are_byte_exact() -> None:
    shared = prerequisites.shared(SHARED)
    for name in ("agent-memory.openapi.json", "LICENSE.cloudflare-api-schemas", "PROVENANCE.md"):
        assert (EXAMPLE / name).read_bytes() == (shared / name).read_bytes(), name


def test_routes_are_the_documents_fourteen_operations(api: FakeAgentMemory) -> None:
    served = {(op.method, api.document.prefix + op.template) for op in api.document.operations}
    documented = {(m.upper(), "/client/v4" + p) for m, p, _ in OPERATIONS.values()}
    assert served == documented
    assert len(served) == 14
    assert api.document.prefix == "/client/v4"


def test_the_pages_five_runs_get_the_pages_answers_and_sizes(
    api: FakeAgentMemory, client: httpx.Client
) -> None:
    body = orjson.dumps({"content": SPANISH, "sessionId": "chat-7"})
    assert len(body) == 73
    r = client.post(f"{ME}/remember", content=body)
    assert r.status_code == 200
    assert assert_documented("agent-memory-remember", r)["result"]["id"] == (
        "01JFAKEMEM0000000000000001"
    )
    assert len(r.content) == 295

    body = orjson.dumps({"query": "Which language does the customer want?"})
    assert len(body) == 50
    r = client.post(f"{ME}/recall", content=body)
    result = assert_documented("agent-memory-recall", r)["result"]
    assert result["answer"] == SPANISH
    assert result["candidates"][0]["id"] == "01JFAKEMEM0000000000000001"
    assert result["candidates"][0]["score"] == 0.5
    assert len(r.content) == 249

    r = client.get(f"{ME}/memories/{result['candidates'][0]['id']}")
    assert assert_documented("agent-memory-memory-get", r)["result"]["content"] == SPANISH
    assert len(r.content) == 295

    body = orjson.dumps({"query": "What language should replies use?"})
    assert len(body) == 45
    r = client.post(f"{ME}/recall", content=body)
    result = assert_documented("agent-memory-recall", r)["result"]
    assert (result["count"], result["answer"]) == (1, SPANISH)
    assert len(r.content) == 250

    assert [
        (q.method, q.path.removeprefix(A), q.carried_token, q.status) for q in api.requests
    ] == [
        ("POST", "/support-agent/profiles/customer-42/remember", True, 200),
        ("POST", "/support-agent/profiles/customer-42/recall", True, 200),
        (
            "GET",
            "/support-agent/profiles/customer-42/memories/01JFAKEMEM0000000000000001",
            True,
            200,
        ),
        ("POST", "/support-agent/profiles/customer-42/recall", True, 200),
    ]


def test_every_operation_answers_within_the_document(client: httpx.Client) -> None:
    """All 14 operations, success and refusal, each answer validated against its schema."""
    seen: set[tuple[str, int]] = set()

    def check(op: str, r: httpx.Response, status: int) -> Any:
        assert r.status_code == status, r.text
        seen.add((op, status))
        return assert_documented(op, r)

    other = f"{A}/other-ns"
    p = f"{other}/profiles/p-1"
    check("agent-memory-namespace-create", post(client, A, {"name": "other-ns"}), 201)
    check("agent-memory-namespace-create", post(client, A, {"name": "other-ns"}), 409)
    check("agent-memory-namespace-create", post(client, A, {"name": "Not A Name"}), 400)
    check("agent-memory-namespace-get", client.get(other), 200)
    check("agent-memory-namespace-get", client.get(f"{A}/missing"), 404)
    listed = check("agent-memory-namespace-list", client.get(A), 200)
    assert [n["name"] for n in listed["result"]] == ["support-agent", "other-ns"]
    assert listed["result_info"] == {"count": 2, "per_page": 20}
    page = check("agent-memory-namespace-list", client.get(f"{A}?per_page=1&order=name"), 200)
    assert page["result_info"] == {"count": 1, "per_page": 1, "cursor": "1"}
    check("agent-memory-namespace-list", client.get(f"{A}?per_page=many"), 400)

    check("agent-memory-profile-list", client.get(f"{other}/profiles"), 200)
    check("agent-memory-profile-list", client.get(f"{A}/missing/profiles"), 404)
    check("agent-memory-recall", post(client, f"{p}/recall", {"query": "anything"}), 404)
    check("agent-memory-remember", post(client, f"{p}/remember", {"content": ""}), 400)
    m1 = check(
        "agent-memory-remember",
        post(client, f"{p}/remember", {"content": "Prefers email over phone.", "sessionId": "s-1"}),
        200,
    )["result"]
    check(
        "agent-memory-ingest",
        post(
            client,
            f"{p}/ingest",
            {
                "sessionId": "s-2",
                "messages": [
                    {"role": "user", "content": "My invoices go to billing@example.com."},
                    {"role": "assistant", "content": "Noted."},
                ],
            },
        ),
        200,
    )
    check("agent-memory-ingest", post(client, f"{p}/ingest", {"messages": []}), 400)
    profiles = check("agent-memory-profile-list", client.get(f"{other}/profiles"), 200)
    assert [x["name"] for x in profiles["result"]] == ["p-1"]

    memories = check("agent-memory-memory-list", client.get(f"{p}/memories"), 200)
    assert [m["id"][-1] for m in memories["result"]] == ["1", "2"]
    assert "content" not in memories["result"][0]
    only = check("agent-memory-memory-list", client.get(f"{p}/memories?session_id=s-2"), 200)
    assert [m["type"] for m in only["result"]] == ["event"]
    check("agent-memory-memory-list", client.get(f"{p}/memories?type=opinion"), 400)
    check("agent-memory-memory-list", client.get(f"{other}/profiles/nobody/memories"), 404)

    recalled = check("agent-memory-recall", post(client, f"{p}/recall", {"query": "invoice?"}), 200)
    assert recalled["result"]["answer"] == "My invoices go to billing@example.com."
    none = check("agent-memory-recall", post(client, f"{p}/recall", {"query": "weather"}), 200)
    assert none["result"] == {"candidates": [], "count": 0}
    check("agent-memory-recall", post(client, f"{p}/recall", {"q": "x"}), 400)

    summary = check("agent-memory-summary", post(client, f"{p}/summary", {}), 200)
    assert summary["result"]["summary"] == (
        "- Prefers email over phone.\n- My invoices go to billing@example.com."
    )
    check("agent-memory-summary", post(client, f"{p}/summary", {"sessionId": "s-9"}), 404)

    check("agent-memory-memory-get", client.get(f"{p}/memories/{m1['id']}"), 200)
    check("agent-memory-memory-get", client.get(f"{p}/memories/01JFAKEMEM0000000000000099"), 404)
    check("agent-memory-memory-get", client.get(f"{p}/memories/not-an-id"), 400)
    deleted = check("agent-memory-memory-delete", client.delete(f"{p}/memories/{m1['id']}"), 200)
    assert deleted["result"]["content"] == "Prefers email over phone."
    check("agent-memory-memory-delete", client.delete(f"{p}/memories/{m1['id']}"), 404)

    check("agent-memory-session-delete", client.delete(f"{p}/sessions/s-2"), 200)
    check("agent-memory-session-delete", client.delete(f"{p}/sessions/s-2"), 404)
    assert check("agent-memory-memory-list", client.get(f"{p}/memories"), 200)["result"] == []

    check("agent-memory-profile-delete", client.delete(p), 200)
    check("agent-memory-profile-delete", client.delete(p), 404)
    check("agent-memory-namespace-delete", client.delete(other), 200)
    check("agent-memory-namespace-delete", client.delete(other), 404)

    assert {op for op, _ in seen} == set(OPERATIONS)
    assert {op for op, status in seen if status < 300} == set(OPERATIONS)


def test_a_bad_body_is_refused_with_a_pointer(client: httpx.Client) -> None:
    r = post(client, f"{ME}/remember", {"sessionId": "chat-7"})
    body = assert_documented("agent-memory-remember", r)
    assert r.status_code == 400
    assert body["errors"] == [
        {
            "code": 1001,
            "message": "request body at /content: 'content' is a required property",
            "source": {"pointer": "/content"},
        }
    ]
    r = client.post(f"{ME}/remember", content=b"{not json")
    assert r.status_code == 400
    assert assert_documented("agent-memory-remember", r)["errors"][0]["message"] == (
        "request body is not valid JSON"
    )
    r = client.post(f"{ME}/remember")
    assert (r.status_code, r.json()["errors"][0]["message"]) == (400, "request body is required")


@pytest.mark.parametrize(
    ("headers", "status", "carried"),
    [
        ({}, 401, False),
        ({"Authorization": "Basic abc"}, 401, False),
        ({"Authorization": "Bearer wrong-token"}, 403, False),
        ({"Authorization": f"Bearer {TOKEN}x"}, 403, False),
        (AUTH, 200, True),
    ],
)
def test_only_the_expected_bearer_token_is_served(
    api: FakeAgentMemory, headers: dict[str, str], status: int, carried: bool
) -> None:
    with httpx.Client(base_url=api.url, headers=headers) as c:
        r = c.get(f"{NS}")
    assert r.status_code == status
    body = assert_documented("agent-memory-namespace-get", r)
    assert body["success"] is (status == 200)
    operation = "agent-memory-namespace-get" if carried else None
    assert api.requests == [RecordedRequest("GET", NS, carried, status, operation)]
    if status == 401:
        assert r.headers["www-authenticate"].startswith("Bearer")


def test_a_refused_request_changes_nothing(api: FakeAgentMemory) -> None:
    with httpx.Client(base_url=api.url) as c:
        r = post(c, f"{ME}/remember", {"content": SPANISH})
    assert r.status_code == 401
    with httpx.Client(base_url=api.url, headers=AUTH) as c:
        r = post(c, f"{ME}/remember", {"content": SPANISH})
    assert r.json()["result"]["id"] == "01JFAKEMEM0000000000000001"


def test_the_log_never_holds_the_token(api: FakeAgentMemory, client: httpx.Client) -> None:
    post(client, f"{ME}/remember", {"content": SPANISH})
    with httpx.Client(base_url=api.url, headers={"Authorization": "Bearer wrong"}) as c:
        c.get(NS)
    assert TOKEN not in repr(api.requests)
    assert "wrong" not in repr(api.requests)
    assert [q.carried_token for q in api.requests] == [True, False]


def test_unknown_routes_and_methods_answer_in_the_envelope(
    api: FakeAgentMemory, client: httpx.Client
) -> None:
    r = client.get("/client/v4/accounts/42/agent-memory/elsewhere")
    assert (r.status_code, r.json()["errors"][0]["code"], r.json()["result"]) == (404, 7003, None)
    r = client.put(NS)
    assert r.status_code == 405
    assert r.headers["allow"] == "DELETE, GET"
    assert r.json()["success"] is False
    assert [(q.status, q.operation_id) for q in api.requests] == [(404, None), (405, None)]


def test_account_ids_must_match_the_documents_pattern(client: httpx.Client) -> None:
    r = client.get("/client/v4/accounts/abc/agent-memory/namespaces")
    assert r.status_code == 400
    assert assert_documented("agent-memory-namespace-list", r)["errors"][0]["message"].startswith(
        "path parameter account_id"
    )


def test_memories_are_kept_per_account_namespace_and_profile(client: httpx.Client) -> None:
    post(client, f"{A}", {"name": "second"})
    post(client, f"{ME}/remember", {"content": SPANISH})
    for elsewhere in (
        f"{NS}/profiles/customer-43",
        f"{A}/second/profiles/customer-42",
    ):
        assert client.get(f"{elsewhere}/memories/01JFAKEMEM0000000000000001").status_code == 404
    other_account = ME.replace(EXAMPLE_ACCOUNT, "43")
    assert client.get(f"{other_account}/memories/01JFAKEMEM0000000000000001").status_code == 404


def test_ids_count_per_instance_and_output_repeats_byte_for_byte() -> None:
    def session() -> list[bytes]:
        with FakeAgentMemory(TOKEN) as api, httpx.Client(base_url=api.url, headers=AUTH) as c:
            out = [post(c, f"{ME}/remember", {"content": f"fact {i}"}).content for i in range(3)]
            out.append(post(c, f"{ME}/recall", {"query": "fact 2"}).content)
            out.append(c.get(A).content)
            return out

    first, second = session(), session()
    assert first == second
    ids = [orjson.loads(b)["result"]["id"] for b in first[:3]]
    assert ids == [f"01JFAKEMEM000000000000000{i}" for i in (1, 2, 3)]
    assert all(len(i) == 26 for i in ids)
    assert all(b.endswith(b"}\n") and b"\n" not in b[:-1] for b in first)


def test_recall_scoring_is_word_overlap_over_the_memorys_words() -> None:
    memory = terms(SPANISH)
    assert memory == {"customer", "want", "reply", "spanish"}
    assert recall_score(terms("Which language does the customer want?"), memory) == 0.5
    assert recall_score(terms("What language should replies use?"), memory) == 0.25
    assert recall_score(terms("What is the weather?"), memory) == 0.0


def test_recall_ranks_the_better_match_first(client: httpx.Client) -> None:
    post(client, f"{ME}/remember", {"content": "The customer lives in Madrid."})
    post(client, f"{ME}/remember", {"content": SPANISH})
    r = post(client, f"{ME}/recall", {"query": "Does the customer want Spanish replies?"})
    result = assert_documented("agent-memory-recall", r)["result"]
    assert result["answer"] == SPANISH
    assert [c["score"] for c in result["candidates"]] == [1.0, 0.333]
    assert result["count"] == 2


def test_a_response_that_breaks_the_schema_is_caught(api: FakeAgentMemory) -> None:
    """The schema check used above can fail: a memory without `content` is refused."""
    good = {
        "success": True,
        "errors": [],
        "messages": [],
        "result": {
            "id": "01JFAKEMEM0000000000000001",
            "type": "fact",
            "summary": "s",
            "content": "c",
            "sessionId": None,
            "createdAt": fake_module.CLOCK,
            "updatedAt": fake_module.CLOCK,
        },
    }
    assert api.document.response_errors("agent-memory-memory-get", 200, good) == []
    bad = {**good, "result": {k: v for k, v in good["result"].items() if k != "content"}}
    assert api.document.response_errors("agent-memory-memory-get", 200, bad) == [
        "/result: 'content' is a required property"
    ]
    response = httpx.Response(
        200, content=orjson.dumps(bad), headers={"content-type": "application/json"}
    )
    with pytest.raises(AssertionError, match="content"):
        assert_documented("agent-memory-memory-get", response)


def test_the_fake_refuses_an_empty_token() -> None:
    with pytest.raises(ValueError, match="token"):
        FakeAgentMemory("")


def test_standalone_serves_until_stopped() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "examples.memory_grant.fake", "--port", "0", "--token", TOKEN],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("fake Agent Memory API listening on http://127.0.0.1:")
        assert line.rstrip().endswith("/client/v4")
        base = line.split(" on ", 1)[1].strip().removesuffix("/client/v4")
        r = httpx.get(f"{base}{NS}", headers=AUTH)
        assert (r.status_code, r.json()["result"]["name"]) == (200, "support-agent")
        assert proc.stdout.readline() == f"200 GET {NS} (token)\n"
        assert TOKEN not in line
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_standalone_without_a_token_says_why_in_one_line() -> None:
    env = {k: v for k, v in os.environ.items() if k != "CLOUDFLARE_API_TOKEN"}
    proc = subprocess.run(
        [sys.executable, "-m", "examples.memory_grant.fake", "--port", "0"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 2
    assert proc.stderr == "fake: no token: pass --token TOKEN or set CLOUDFLARE_API_TOKEN\n"


@pytest.mark.parametrize("port", ["65536", "-1"])
def test_standalone_with_a_port_out_of_range_is_a_usage_error(
    port: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from examples.memory_grant.fake import main

    with pytest.raises(SystemExit) as exit_info:
        main(["--port", port, "--token", TOKEN])
    assert exit_info.value.code == 2
    assert f"argument --port: {port} is not a port (0-65535)" in capsys.readouterr().err


def test_a_body_the_fake_will_not_read_is_refused_and_still_logged(
    api: FakeAgentMemory, client: httpx.Client
) -> None:
    r = client.post(f"{ME}/remember", content=iter([b'{"content":', b'"x"}']))
    assert r.status_code == 411
    assert r.json()["success"] is False
    assert r.headers["connection"] == "close"
    assert api.requests == [RecordedRequest("POST", f"{ME}/remember", True, 411, None)]
    assert client.get(NS).status_code == 200  # the client reconnects; the fake still serves


def test_an_answer_outside_the_document_becomes_a_loud_500(
    monkeypatch: pytest.MonkeyPatch, api: FakeAgentMemory, client: httpx.Client
) -> None:
    """The fake checks its own answers; a handler that drifts cannot pass as a 200."""

    def drifted(*args: Any) -> tuple[int, dict[str, Any]]:
        return 200, {"success": True, "errors": [], "messages": [], "result": {"name": 7}}

    monkeypatch.setitem(fake_module._HANDLERS, "agent-memory-namespace-get", drifted)
    r = client.get(NS)
    assert r.status_code == 500
    assert r.json()["errors"][0]["message"].startswith("fake answered outside the document: ")
    assert api.requests[-1].status == 500
