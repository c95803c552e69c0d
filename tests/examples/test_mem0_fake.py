"""The Mem0 fake's own checks: the scheme, the slash, the document's parameters and bodies,
and answers that repeat byte for byte."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from examples.mem0_grant.fake import FakeMem0

KEY = "fake-key-123"
ADD = {
    "user_id": "alice",
    "metadata": {"topic": "food"},
    "messages": [
        {"role": "user", "content": "Alice is vegetarian."},
        {"role": "assistant", "content": "Noted."},
        {"role": "user", "content": "Alice is allergic to nuts."},
    ],
}


@pytest.fixture
def api() -> Iterator[tuple[FakeMem0, httpx.Client]]:
    with (
        FakeMem0(KEY) as fake,
        httpx.Client(base_url=fake.url, headers={"Authorization": f"Token {KEY}"}) as client,
    ):
        yield fake, client


def test_only_token_with_the_key_is_let_in(api: tuple[FakeMem0, httpx.Client]) -> None:
    fake, client = api
    assert client.get("/v1/ping/").status_code == 200
    for value in (f"Bearer {KEY}", KEY, "Token wrong", f"token {KEY}"):
        reply = client.get("/v1/ping/", headers={"Authorization": value})
        assert reply.status_code == 401, value
    assert [r.carried_token for r in fake.requests] == [True, False, False, False, False]


def test_a_second_authorization_header_is_refused(api: tuple[FakeMem0, httpx.Client]) -> None:
    fake, _client = api
    headers = [("Authorization", f"Token {KEY}"), ("Authorization", f"Token {KEY}")]
    assert fake.handle("GET", "/v1/ping/", headers, b"").status == 401


def test_the_trailing_slash_is_part_of_the_route(api: tuple[FakeMem0, httpx.Client]) -> None:
    _fake, client = api
    reply = client.get("/v1/memories", params={"user_id": "alice"})
    assert reply.status_code == 404 and "end in /" in reply.json()["detail"]
    assert client.get("/v1/memories/", params={"user_id": "alice"}).status_code == 200


def test_query_parameters_are_the_documents(api: tuple[FakeMem0, httpx.Client]) -> None:
    _fake, client = api
    ok = client.get("/v1/memories/", params={"user_id": "alice", "page": 1, "page_size": 5})
    assert ok.status_code == 200 and ok.json()["results"] == []
    for params in (
        {"user_id": "alice", "colour": "red"},  # undeclared
        {"user_id": ["alice", "bob"]},  # a scalar twice
        {"user_id": "alice", "page": "one", "page_size": 2},  # not an integer
        {"user_id": "alice", "limit": 201},  # over the schema's maximum
        {"page": 1},  # no entity: the API's own rule
    ):
        assert client.get("/v1/memories/", params=params).status_code == 400, params


def test_bodies_are_checked_against_the_document(api: tuple[FakeMem0, httpx.Client]) -> None:
    _fake, client = api
    assert client.post("/v1/memories/", json={"messages": "x", "user_id": "a"}).status_code == 400
    assert client.post("/v1/memories/", content=b"{not json").status_code == 400
    assert client.post("/v2/memories/search/", json={"query": "x"}).status_code == 400
    bad = client.post("/v1/memories/", json={"messages": []})
    assert bad.status_code == 400 and set(bad.json()) == {"error", "details"}  # its 400 schema


def test_add_search_list_repeat_byte_for_byte() -> None:
    def session() -> list[bytes]:
        with (
            FakeMem0(KEY) as fake,
            httpx.Client(base_url=fake.url, headers={"Authorization": f"Token {KEY}"}) as client,
        ):
            out = [client.post("/v1/memories/", json=ADD).content]
            out.append(
                client.post(
                    "/v2/memories/search/",
                    json={"query": "nuts", "filters": {"user_id": "alice"}},
                ).content
            )
            out.append(
                client.get(
                    "/v1/memories/", params={"user_id": "alice", "page": 1, "page_size": 1}
                ).content
            )
            return out

    first, second = session(), session()
    assert first == second
    assert b'"event_id":"6576656e-0000-4000-8000-000000000001"' in first[0]
    assert b'"memory":"Alice is allergic to nuts."' in first[1] and b"vegetarian" not in first[1]
    assert b'"next":"https://api.mem0.ai/v1/memories/?user_id=alice&page=2&page_size=1"' in first[2]


def test_an_unimplemented_operation_is_a_404_after_its_checks(
    api: tuple[FakeMem0, httpx.Client],
) -> None:
    _fake, client = api
    assert client.post("/v3/memories/add/", json={"messages": 1}).status_code == 400
    reply = client.get("/v1/stats/")
    assert reply.status_code == 404 and "not implemented" in reply.json()["detail"]
