"""The GitHub, Stripe and Slack fakes enforce their services' documented rules, and a grant
for Stripe or Slack gets through our broker only what those services accept.

Why: a fake that accepts whatever our client sends proves nothing about the real API.
The first half sends requests straight to each fake (httpx, no product code) and checks
each documented rule both ways; the second half runs agent code in the sandbox through
the real grant loader and broker against the Stripe and Slack fakes, with the preamble
specgen generates from their documents.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from examples.github_triage import fake as github
from examples.kit.fakes import slack, stripe
from runtime import load_grants, run_profile
from specgen import build as pipeline
from specgen.check import grant_drift

GH_TOKEN = "ghp_fakeTokenForTheTests0001"
STRIPE_KEY = "sk_test_fakeKeyForTheTests0001"
SLACK_TOKEN = "xoxb-fake-token-for-the-tests"
UA = {"User-Agent": "tests/1"}


@pytest.fixture
def gh() -> Iterator[httpx.Client]:
    with github.FakeGitHub(GH_TOKEN) as fake, httpx.Client(base_url=fake.url) as client:
        yield client


def _gh(client: httpx.Client, path: str, **kw: object) -> httpx.Response:
    headers = {"Authorization": f"Bearer {GH_TOKEN}", **UA, **kw.pop("headers", {})}  # type: ignore[dict-item]
    return client.request(kw.pop("method", "GET"), path, headers=headers, **kw)  # type: ignore[arg-type]


# -- GitHub ---------------------------------------------------------------------------


def test_github_refuses_a_request_without_user_agent_in_its_words(gh: httpx.Client) -> None:
    reply = gh.get(
        "/repos/acme/widgets/issues",
        headers={"Authorization": f"Bearer {GH_TOKEN}", "User-Agent": ""},
    )
    assert reply.status_code == 403
    assert reply.headers["content-type"] == "text/plain"
    assert reply.text.startswith(
        "Request forbidden by administrative rules. Please make sure your request has a "
        "User-Agent header"
    )
    assert _gh(gh, "/repos/acme/widgets/issues").status_code == 200


def test_github_takes_bearer_and_token_schemes_and_nothing_else(gh: httpx.Client) -> None:
    for value in (f"Bearer {GH_TOKEN}", f"token {GH_TOKEN}"):
        assert (
            _gh(gh, "/repos/acme/widgets/issues/1", headers={"Authorization": value}).status_code
            == 200
        )
    none = gh.get("/repos/acme/widgets/issues/1", headers=UA)
    assert none.status_code == 401
    assert none.json() == {
        "message": "Requires authentication",
        "documentation_url": "https://docs.github.com/rest",
        "status": "401",
    }
    for value in (GH_TOKEN, f"Basic {GH_TOKEN}", "Bearer ghp_other"):
        wrong = _gh(gh, "/repos/acme/widgets/issues/1", headers={"Authorization": value})
        assert wrong.status_code == 401 and wrong.json()["message"] == "Bad credentials"


def _links(reply: httpx.Response) -> dict[str, str]:
    out = {}
    for part in reply.headers.get("link", "").split(","):
        if part.strip():
            url, rel = part.split(";")
            out[rel.strip().removeprefix('rel="').removesuffix('"')] = url.strip()[1:-1]
    return out


def test_github_pages_with_a_link_header_to_the_last_page(gh: httpx.Client) -> None:
    seen, page, pages = [], 1, 0
    while True:
        reply = _gh(gh, f"/repos/acme/widgets/issues?labels=bug&state=open&per_page=2&page={page}")
        assert reply.status_code == 200
        seen += [issue["number"] for issue in reply.json()]
        pages += 1
        links = _links(reply)
        if "next" not in links:
            assert "last" not in links and "prev" in links
            break
        # GitHub's links name the repository by ID; the page number is what carries over.
        assert urlsplit(links["next"]).path == f"/repositories/{github.REPO_ID}/issues"
        query = parse_qs(urlsplit(links["next"]).query)
        assert query["labels"] == ["bug"] and query["per_page"] == ["2"]
        page = int(query["page"][0])
    assert pages == 3 and seen == [8, 7, 6, 5, 3, 1]  # open bugs, newest first
    one = _gh(gh, "/repos/acme/widgets/issues?labels=bug&per_page=100")
    assert "link" not in one.headers and len(one.json()) == 6


def test_github_sends_rate_limit_headers_and_a_304_costs_nothing(gh: httpx.Client) -> None:
    first = _gh(gh, "/repos/acme/widgets/issues/1")
    assert first.headers["x-ratelimit-limit"] == "5000"
    assert first.headers["x-ratelimit-remaining"] == "4999"
    assert first.headers["x-ratelimit-used"] == "1"
    assert first.headers["x-ratelimit-reset"].isdigit()
    tag = first.headers["etag"]
    again = _gh(gh, "/repos/acme/widgets/issues/1", headers={"If-None-Match": tag})
    assert again.status_code == 304 and again.content == b""
    assert again.headers["x-ratelimit-remaining"] == "4999"
    other = _gh(gh, "/repos/acme/widgets/issues/1", headers={"If-None-Match": 'W/"other"'})
    assert other.status_code == 200 and other.headers["x-ratelimit-remaining"] == "4998"


def test_github_creates_a_comment_with_201_and_location(gh: httpx.Client) -> None:
    reply = _gh(gh, "/repos/acme/widgets/issues/1/comments", method="POST", json={"body": "Seen."})
    assert reply.status_code == 201
    assert reply.headers["location"] == reply.json()["url"]
    assert reply.json()["user"]["login"] == github.BOT_LOGIN
    listed = _gh(gh, "/repos/acme/widgets/issues/1/comments").json()
    assert [c["body"] for c in listed] == ["Seen."]
    label = _gh(gh, "/repos/acme/widgets/labels", method="POST", json={"name": "needs repro"})
    assert label.status_code == 201
    assert label.headers["location"].endswith("/labels/needs%20repro")


def test_github_errors_are_its_json(gh: httpx.Client) -> None:
    for path in (
        "/repos/acme/other/issues",
        "/repos/acme/widgets/issues/99",
        "/repos/acme/widgets/issues/x",
    ):
        reply = _gh(gh, path)
        assert reply.status_code == 404 and reply.json()["message"] == "Not Found"
        assert set(reply.json()) == {"message", "documentation_url", "status"}
    missing = _gh(gh, "/repos/acme/widgets/issues/1/comments", method="POST", json={"text": "x"})
    assert missing.status_code == 422 and missing.json()["message"].startswith("Invalid request.")
    bad = _gh(
        gh,
        "/repos/acme/widgets/issues/1/comments",
        method="POST",
        content=b"{",
        headers={"Content-Type": "application/json"},
    )
    assert bad.status_code == 400 and bad.json()["message"] == "Problems parsing JSON"
    state = _gh(gh, "/repos/acme/widgets/issues?state=everything")
    assert state.status_code == 422
    version = _gh(gh, "/repos/acme/widgets/issues", headers={"X-GitHub-Api-Version": "2021-01-01"})
    assert version.status_code == 400
    ok = _gh(gh, "/repos/acme/widgets/issues", headers={"X-GitHub-Api-Version": "2022-11-28"})
    assert ok.status_code == 200


def test_github_adds_labels_to_an_issue(gh: httpx.Client) -> None:
    reply = _gh(
        gh, "/repos/acme/widgets/issues/1/labels", method="POST", json={"labels": ["triaged"]}
    )
    assert reply.status_code == 200 and [x["name"] for x in reply.json()] == ["bug", "triaged"]
    named = _gh(
        gh, "/repos/acme/widgets/issues/1/labels", method="POST", json={"labels": [{"name": "p1"}]}
    )
    assert [x["name"] for x in named.json()] == ["bug", "triaged", "p1"]
    # The prose allows a bare array; the document's schema does not, and the fake holds to it.
    bare = _gh(gh, "/repos/acme/widgets/issues/1/labels", method="POST", json=["p2"])
    assert bare.status_code == 422
    assert (
        _gh(
            gh, "/repos/acme/widgets/issues/1/labels", method="POST", json={"labels": []}
        ).status_code
        == 422
    )


def test_github_caps_per_page_at_100(gh: httpx.Client) -> None:
    reply = _gh(gh, "/repos/acme/widgets/issues?state=all&per_page=500")
    assert reply.status_code == 200 and len(reply.json()) == len(github.ISSUES)
    assert "link" not in reply.headers


def test_github_answers_an_unimplemented_operation_404(gh: httpx.Client) -> None:
    reply = _gh(gh, "/repos/acme/widgets/issues/1/timeline")
    assert reply.status_code == 404 and reply.json()["message"] == "Not Found"
    assert github.FakeGitHub.__module__ and reply.headers["x-ratelimit-limit"] == "5000"


# -- Stripe ---------------------------------------------------------------------------


@pytest.fixture
def st() -> Iterator[tuple[stripe.FakeStripe, httpx.Client]]:
    with stripe.FakeStripe(STRIPE_KEY) as fake, httpx.Client(base_url=fake.url) as client:
        yield fake, client


def test_stripe_takes_the_key_as_basic_user_or_bearer(
    st: tuple[stripe.FakeStripe, httpx.Client],
) -> None:
    _, client = st
    assert client.get("/v1/customers", auth=(STRIPE_KEY, "")).status_code == 200
    assert (
        client.get("/v1/customers", headers={"Authorization": f"Bearer {STRIPE_KEY}"}).status_code
        == 200
    )
    none = client.get("/v1/customers")
    assert none.status_code == 401 and none.json()["error"]["message"].startswith(
        "You did not provide an API key"
    )
    wrong = client.get("/v1/customers", auth=("sk_test_other1234", ""))
    assert wrong.status_code == 401 and STRIPE_KEY not in wrong.text
    assert wrong.json()["error"]["type"] == "invalid_request_error"


def test_stripe_reads_bracketed_form_fields(st: tuple[stripe.FakeStripe, httpx.Client]) -> None:
    _, client = st
    reply = client.post(
        "/v1/customers",
        auth=(STRIPE_KEY, ""),
        data={
            "email": "ana@example.com",
            "metadata[plan]": "pro",
            "metadata[seats]": "3",
            "expand[]": "tax",
        },
    )
    assert reply.status_code == 200, reply.text
    assert reply.json()["metadata"] == {"plan": "pro", "seats": "3"}
    unset = client.post(
        f"/v1/customers/{reply.json()['id']}", auth=(STRIPE_KEY, ""), data={"metadata[plan]": ""}
    )
    assert unset.json()["metadata"] == {"seats": "3"}
    unknown = client.post("/v1/customers", auth=(STRIPE_KEY, ""), data={"plan": "pro"})
    assert unknown.status_code == 400
    assert unknown.json()["error"] == {
        "message": "Received unknown parameter: plan",
        "type": "invalid_request_error",
        "param": "plan",
    }
    as_json = client.post("/v1/customers", auth=(STRIPE_KEY, ""), json={"email": "x@example.com"})
    assert as_json.status_code == 400
    expand = client.post("/v1/customers", auth=(STRIPE_KEY, ""), data={"expand[]": "nothing"})
    assert expand.status_code == 400 and expand.json()["error"]["param"] == "expand"
    long_key = client.post(
        "/v1/customers", auth=(STRIPE_KEY, ""), data={f"metadata[{'k' * 41}]": "v"}
    )
    assert long_key.status_code == 400


def test_stripe_idempotency_keys_replay_and_refuse_other_parameters(
    st: tuple[stripe.FakeStripe, httpx.Client],
) -> None:
    fake, client = st
    first = client.post(
        "/v1/customers",
        auth=(STRIPE_KEY, ""),
        data={"email": "a@example.com"},
        headers={"Idempotency-Key": "k-1"},
    )
    again = client.post(
        "/v1/customers",
        auth=(STRIPE_KEY, ""),
        data={"email": "a@example.com"},
        headers={"Idempotency-Key": "k-1"},
    )
    assert again.json() == first.json() and again.headers["idempotent-replayed"] == "true"
    assert len(fake.customers) == 1
    other = client.post(
        "/v1/customers",
        auth=(STRIPE_KEY, ""),
        data={"email": "b@example.com"},
        headers={"Idempotency-Key": "k-1"},
    )
    assert other.status_code == 400 and other.json()["error"]["type"] == "idempotency_error"
    assert len(fake.customers) == 1


def test_stripe_lists_with_has_more_and_starting_after(
    st: tuple[stripe.FakeStripe, httpx.Client],
) -> None:
    _, client = st
    for i in range(5):
        client.post("/v1/customers", auth=(STRIPE_KEY, ""), data={"email": f"c{i}@example.com"})
    ids, after = [], None
    while True:
        query = {"limit": 2} | ({"starting_after": after} if after else {})
        page = client.get("/v1/customers", auth=(STRIPE_KEY, ""), params=query).json()
        assert page["object"] == "list" and page["url"] == "/v1/customers"
        ids += [c["id"] for c in page["data"]]
        if not page["has_more"]:
            break
        after = page["data"][-1]["id"]
    assert ids == [f"cus_fake{i:06d}" for i in range(5, 0, -1)]
    assert client.get("/v1/customers?limit=101", auth=(STRIPE_KEY, "")).status_code == 400
    missing = client.get("/v1/customers/cus_nope", auth=(STRIPE_KEY, ""))
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "resource_missing"


# -- Slack ----------------------------------------------------------------------------


@pytest.fixture
def sl() -> Iterator[httpx.Client]:
    with slack.FakeSlack(SLACK_TOKEN) as fake, httpx.Client(base_url=fake.url + "/api") as client:
        yield client


def test_slack_errors_are_ok_false_at_200(sl: httpx.Client) -> None:
    none = sl.get("/conversations.list")
    assert (none.status_code, none.json()) == (200, {"ok": False, "error": "not_authed"})
    wrong = sl.get("/conversations.list", headers={"Authorization": "Bearer xoxb-other"})
    assert (wrong.status_code, wrong.json()) == (200, {"ok": False, "error": "invalid_auth"})
    query_token = sl.get("/conversations.list", params={"token": SLACK_TOKEN})
    assert query_token.json() == {"ok": False, "error": "not_authed"}
    auth = {"Authorization": f"Bearer {SLACK_TOKEN}"}
    lost = sl.post("/chat.postMessage", headers=auth, json={"channel": "C0NOPE0000", "text": "x"})
    assert (lost.status_code, lost.json()) == (200, {"ok": False, "error": "channel_not_found"})
    outside = sl.post("/chat.postMessage", headers=auth, json={"channel": "random", "text": "x"})
    assert outside.json() == {"ok": False, "error": "not_in_channel"}
    empty = sl.post("/chat.postMessage", headers=auth, json={"channel": "triage"})
    assert empty.json() == {"ok": False, "error": "no_text"}


def test_slack_takes_json_or_a_form_and_the_token_as_a_form_field(sl: httpx.Client) -> None:
    auth = {"Authorization": f"Bearer {SLACK_TOKEN}"}
    as_json = sl.post(
        "/chat.postMessage", headers=auth, json={"channel": "C0FAKE0003", "text": "a"}
    )
    as_form = sl.post("/chat.postMessage", headers=auth, data={"channel": "triage", "text": "b"})
    field = sl.post(
        "/chat.postMessage", data={"channel": "triage", "text": "c", "token": SLACK_TOKEN}
    )
    assert [r.json()["ok"] for r in (as_json, as_form, field)] == [True, True, True]
    history = sl.get("/conversations.history", headers=auth, params={"channel": "C0FAKE0003"})
    assert [m["text"] for m in history.json()["messages"]][:3] == ["c", "b", "a"]


def test_slack_pages_with_cursors(sl: httpx.Client) -> None:
    auth = {"Authorization": f"Bearer {SLACK_TOKEN}"}
    names, cursor = [], ""
    while True:
        page = sl.get(
            "/conversations.list",
            headers=auth,
            params={"limit": 1, "cursor": cursor} if cursor else {"limit": 1},
        ).json()
        names += [c["name"] for c in page["channels"]]
        cursor = page["response_metadata"]["next_cursor"]
        if not cursor:
            break
    assert names == ["general", "random", "triage"]  # public channels only, by default
    texts, cursor = [], ""
    while True:
        params = {"channel": "C0FAKE0001", "limit": 2} | ({"cursor": cursor} if cursor else {})
        page = sl.get("/conversations.history", headers=auth, params=params).json()
        texts += [m["text"] for m in page["messages"]]
        if not page["has_more"]:
            assert "response_metadata" not in page
            break
        cursor = page["response_metadata"]["next_cursor"]
    assert texts == [f"general message {i}" for i in range(5, 0, -1)]
    bad = sl.get("/conversations.list", headers=auth, params={"cursor": "bm9wZQ=="})
    assert bad.json() == {"ok": False, "error": "invalid_cursor"}


# -- through the broker ---------------------------------------------------------------


def _grant(tmp_path: Path, document: Path, global_name: str, profile: dict) -> Path:
    """The generated client for `document`, and a grants file holding one profile."""
    spec = pipeline.run(str(document), pipeline.Options(global_name=global_name))
    pipeline.write(spec, tmp_path)
    path = tmp_path / "grants.json"
    profile = {
        "global": global_name,
        "allowed_callers": ["agent"],
        "preamble_file": "preamble.js",
        "base_url_overrides": ["http://127.0.0.1:*"],
        **profile,
    }
    path.write_text(json.dumps({"profiles": {"p": profile}}))
    return path


#: Stripe's documented Basic form: the secret key as the user, the password empty
#: (`curl -u sk_test_...:`). The fake takes that or Bearer
#: (`test_stripe_takes_the_key_as_basic_user_or_bearer`) and nothing else.
STRIPE_PROFILE = {
    "base_url": "https://api.stripe.com",
    "token": {"type": "basic", "user_env": "STRIPE_SECRET_KEY", "password": ""},
    "allow": [
        {
            "route": "POST /v1/customers",
            "headers": ["Idempotency-Key"],
            "body": ["application/x-www-form-urlencoded"],
            # Stripe's document: `encoding: {metadata: {style: deepObject, explode: true}}`.
            "encoding": {"metadata": "deepObject", "expand": "deepObject"},
        },
        {"route": "POST /v1/customers/*", "body": ["application/x-www-form-urlencoded"]},
        "GET /v1/customers?limit&starting_after",
        "GET /v1/customers/*",
    ],
}

STRIPE_CODE = """
const made = await stripe.PostCustomers({
  email: "ana@example.com", metadata: {plan: "pro", seats: 3}, expand: ["tax"],
});
print(made.id, made.metadata.plan, made.metadata.seats);
// A name the code writes with brackets itself still travels as written.
const spelled = await stripe.PostCustomersCustomer(made.id, {"metadata[tier]": "gold"});
print(Object.keys(spelled.metadata).sort().join(" "));
for (const who of ["ben", "chen"]) await stripe.PostCustomers({email: who + "@example.com"});
const ids = [];
let after;
do {
  const page = await stripe.GetCustomers(after ? {limit: 2, starting_after: after} : {limit: 2});
  for (const c of page.data) ids.push(c.id);
  after = page.has_more ? page.data[page.data.length - 1].id : undefined;
} while (after);
print(ids.join(" "));
const form = {method: "POST", route: "/v1/customers", headers: ["Idempotency-Key"],
              type: "application/x-www-form-urlencoded"};
const once = await stripe.call(form, [], {email: "dana@example.com"}, {"Idempotency-Key": "run-1"});
const twice = await stripe.call(form, [], {email: "dana@example.com"}, {"Idempotency-Key": "run-1"});
print(once.id === twice.id);
try {
  await stripe.call(form, [], {email: "eli@example.com"}, {"Idempotency-Key": "run-1"});
  print("accepted");
} catch (e) { print("refused upstream:", e.message.includes("400")); }
"""


def test_a_stripe_grant_sends_what_stripe_accepts(tmp_path: Path) -> None:
    grants = load_grants(
        _grant(tmp_path, stripe.DOCUMENT, "stripe", STRIPE_PROFILE),
        environ={"STRIPE_SECRET_KEY": STRIPE_KEY},
    )
    with stripe.FakeStripe(STRIPE_KEY) as fake:
        profile = grants.select("p", "agent").with_base_url(fake.url)
        outcome = run_profile(STRIPE_CODE, profile, caller="agent", clock="fixed")
        log, bodies = fake.requests, fake.bodies
        customers = fake.customers
    assert outcome.result.exit_code == 0, outcome.result.stderr
    assert outcome.result.stdout.splitlines() == [
        "cus_fake000001 pro 3",
        "plan seats tier",
        "cus_fake000003 cus_fake000002 cus_fake000001",
        "true",
        "refused upstream: true",
    ]
    assert all(r.carried_token for r in log)
    assert [r.status for r in log] == [200] * 8 + [400]
    # The broker turned the code's objects into Stripe's brackets, as the entry's
    # encoding (the document's) says, and Stripe's parser nested them again.
    assert bodies[0] == (
        b"email=ana%40example.com&metadata%5Bplan%5D=pro&metadata%5Bseats%5D=3&expand%5B%5D=tax"
    )
    assert customers["cus_fake000001"]["metadata"] == {"plan": "pro", "seats": "3", "tier": "gold"}
    assert len(customers) == 4  # the replayed create made nothing new


def test_check_accepts_the_stripe_grant_and_refuses_an_encoding_the_document_does_not_say(
    tmp_path: Path,
) -> None:
    spec = pipeline.run(str(stripe.DOCUMENT), pipeline.Options(global_name="stripe"))
    path = _grant(tmp_path, stripe.DOCUMENT, "stripe", STRIPE_PROFILE)
    # Stripe documents Idempotency-Key in its API reference, not in its OpenAPI document,
    # so check names it; the encoding draws no line.
    unlisted = (
        'profile "p": allow entry "POST /v1/customers" names header "Idempotency-Key", which '
        "the document does not declare for that route"
    )
    assert grant_drift(spec, path, "p") == [unlisted]
    drifted = json.loads(json.dumps(STRIPE_PROFILE))
    drifted["allow"][0]["encoding"] = {"metadata": "form,explode=false", "email": "deepObject"}
    problems = grant_drift(spec, _grant(tmp_path, stripe.DOCUMENT, "stripe", drifted), "p")
    assert problems == [
        unlisted,
        'profile "p": allow entry "POST /v1/customers" encodes form field "metadata" as '
        '"form,explode=false"; the document declares "deepObject"',
        'profile "p": allow entry "POST /v1/customers" encodes form field "email" as '
        '"deepObject"; the document declares "form"',
    ]


SLACK_PROFILE = {
    "base_url": "https://slack.com",
    "token": {
        "type": "static",
        "env": "SLACK_BOT_TOKEN",
        "header": "Authorization",
        "value": "Bearer {token}",
    },
    "allow": [
        {
            "route": "POST /api/chat.postMessage",
            "body": ["application/x-www-form-urlencoded", "application/json"],
        },
        "GET /api/conversations.list?limit&cursor",
        "GET /api/conversations.history?channel&limit&cursor",
    ],
}

SLACK_CODE = """
const names = [];
let cursor = "";
do {
  const page = await slack.conversations_list(cursor ? {limit: 2, cursor} : {limit: 2});
  for (const c of page.channels) names.push(c.name);
  cursor = page.response_metadata.next_cursor;
} while (cursor);
print(names.join(" "));
let texts = [], next = "";
do {
  const page = await slack.conversations_history(next ? {channel: "C0FAKE0001", limit: 2, cursor: next}
                                                      : {channel: "C0FAKE0001", limit: 2});
  for (const m of page.messages) texts.push(m.text);
  next = page.has_more ? page.response_metadata.next_cursor : "";
} while (next);
print(texts.length, texts[0]);
const posted = await slack.chat_postMessage({channel: "triage", text: "three bugs need a look"});
print(posted.ok, posted.channel);
const asJson = await slack.call({method: "POST", route: "/api/chat.postMessage", type: "application/json"},
                                [], {channel: "C0FAKE0003", blocks: [{type: "section"}], text: "json"});
print(asJson.ok);
// Slack answers a refusal with HTTP 200: the call resolves, and only `ok` says it failed.
const outside = await slack.chat_postMessage({channel: "random", text: "hello"});
print(outside.ok, outside.error);
const lost = await slack.chat_postMessage({channel: "nowhere", text: "hello"});
print(lost.ok, lost.error);
"""


def test_a_slack_grant_sends_what_slack_accepts(tmp_path: Path) -> None:
    grants = load_grants(
        _grant(tmp_path, slack.DOCUMENT, "slack", SLACK_PROFILE),
        environ={"SLACK_BOT_TOKEN": SLACK_TOKEN},
    )
    with slack.FakeSlack(SLACK_TOKEN) as fake:
        profile = grants.select("p", "agent").with_base_url(fake.url)
        outcome = run_profile(SLACK_CODE, profile, caller="agent", clock="fixed")
        log = fake.requests
        triage = [m["text"] for m in fake.channels["C0FAKE0003"].messages]
    assert outcome.result.exit_code == 0, outcome.result.stderr
    assert outcome.result.stdout.splitlines() == [
        "general random triage",
        "5 general message 5",
        "true C0FAKE0003",
        "true",
        "false not_in_channel",
        "false channel_not_found",
    ]
    assert all(r.carried_token and r.status == 200 for r in log)
    assert triage[-2:] == ["three bugs need a look", "json"]
    # The trace shows a 200 for the refused posts: Slack's errors are in the body.
    assert [row.status for row in outcome.trace.rows][-2:] == [200, 200]
