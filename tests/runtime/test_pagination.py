"""Pagination and conditional requests, end to end, the way real APIs do them.

Each test runs agent code in the sandbox against a real loopback server that pages the
way one API documents it: GitHub's `Link: <...>; rel="next"` header, Slack's
`response_metadata.next_cursor` and Stripe's `has_more`/`starting_after` body fields,
and an `ETag` answered with 304 to `If-None-Match`. The server checks every request
itself (what a real API would read), and the test checks what the code collected.
"""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from runtime import Profile, run_with_grant
from runtime import load_grants as load
from tests.runtime.loopback import FakeAPI, Seen

KEY = "pagination-key-8d2f61a7"
ITEMS = [{"id": f"it_{n}", "n": n} for n in range(1, 8)]  # 7 items, pages of 3


def _send(handler: BaseHTTPRequestHandler, status: int, body: Any, headers: dict[str, str]) -> None:
    data = b"" if body is None else json.dumps(body).encode()
    handler.send_response(status)
    for name, value in headers.items():
        handler.send_header(name, value)
    if body is not None:
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


def _query(seen: Seen) -> dict[str, str]:
    return {k: v[-1] for k, v in parse_qs(urlsplit(seen.path).query).items()}


def github(base: str) -> Any:
    """GET /repos/o/r/issues?per_page=3&page=N; `Link` names the next and last pages."""

    def respond(handler: BaseHTTPRequestHandler, seen: Seen) -> None:
        q = _query(seen)
        per, page = int(q.get("per_page", "30")), int(q.get("page", "1"))
        last = -(-len(ITEMS) // per)
        links = []
        if page < last:
            links.append(f'<{base}/repos/o/r/issues?per_page={per}&page={page + 1}>; rel="next"')
        links.append(f'<{base}/repos/o/r/issues?per_page={per}&page={last}>; rel="last"')
        body = ITEMS[(page - 1) * per : page * per]
        _send(handler, 200, body, {"Link": ", ".join(links), "X-RateLimit-Remaining": "4999"})

    return respond


def slack(handler: BaseHTTPRequestHandler, seen: Seen) -> None:
    """GET /api/conversations.list?limit=3&cursor=C; the next cursor is in the body."""
    q = _query(seen)
    start = int(q["cursor"].removeprefix("dXNlcjo")) if "cursor" in q else 0
    limit = int(q.get("limit", "100"))
    rest = ITEMS[start + limit :]
    cursor = f"dXNlcjo{start + limit}" if rest else ""
    body = {
        "ok": True,
        "channels": ITEMS[start : start + limit],
        "response_metadata": {"next_cursor": cursor},
    }
    _send(handler, 200, body, {})


def stripe(handler: BaseHTTPRequestHandler, seen: Seen) -> None:
    """GET /v1/customers?limit=3&starting_after=ID; `has_more` says whether to go on."""
    q = _query(seen)
    ids = [item["id"] for item in ITEMS]
    start = ids.index(q["starting_after"]) + 1 if "starting_after" in q else 0
    limit = int(q.get("limit", "10"))
    page = ITEMS[start : start + limit]
    body = {"object": "list", "data": page, "has_more": start + limit < len(ITEMS)}
    _send(handler, 200, body, {})


def etagged(handler: BaseHTTPRequestHandler, seen: Seen) -> None:
    """GET /repos/o/r: 304 with no body when If-None-Match names the current ETag."""
    tag = '"v1-5f3c"'
    if seen.headers.get("if-none-match") == tag:
        _send(handler, 304, None, {"ETag": tag})
        return
    _send(handler, 200, {"full_name": "o/r"}, {"ETag": tag})


def grant(tmp_path: Path, base_url: str, allow: list[Any], preamble: str) -> Profile:
    body = {
        "base_url": base_url,
        "allowed_callers": ["agent"],
        "token": {"type": "static", "env": "API_TOKEN"},
        "headers": {"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": "2022-11-28"},
        "response_headers": ["X-RateLimit-*"],
        "allow": allow,
        "preamble": preamble,
    }
    path = tmp_path / "grants.json"
    path.write_text(json.dumps({"profiles": {"p": body}}))
    return load(path, environ={"API_TOKEN": KEY}).select("p", "agent")


def run(code: str, profile: Profile) -> list[Any]:
    out = run_with_grant(code, profile, caller="agent")
    assert (out.result.exit_code, out.result.stderr) == (0, ""), out.result
    return [json.loads(line) for line in out.result.stdout.splitlines()]


def test_following_github_link_rel_next(tmp_path: Path, api: FakeAPI) -> None:
    api.responder = github(api.url)
    allow = [{"route": "GET /repos/*/*/issues", "query": ["per_page", "page"],
              "response_headers": ["Link"]}]  # fmt: skip
    preamble = (
        "host.issues = (o, r, options) => host.call("
        '{method: "GET", route: "/repos/*/*/issues", query: ["per_page", "page"]}, [o, r], '
        "undefined, options);\n"
    )
    code = r"""
      function next(link) {
        for (const part of (link || "").split(",")) {
          const m = part.match(/<([^>]*)>\s*;\s*rel="next"/);
          if (m) return Number(m[1].match(/[?&]page=(\d+)/)[1]);
        }
        return null;
      }
      const all = [];
      let page = 1, calls = 0, remaining;
      while (page !== null) {
        const r = await host.$response.issues("o", "r", {per_page: 3, page});
        calls++;
        all.push(...r.body.map((i) => i.n));
        remaining = r.headers["x-ratelimit-remaining"];
        page = next(r.headers.link);
      }
      console.log(JSON.stringify({all, calls, remaining}));
    """
    (out,) = run(code, grant(tmp_path, api.url, allow, preamble))
    assert out == {"all": [1, 2, 3, 4, 5, 6, 7], "calls": 3, "remaining": "4999"}
    assert [s.path for s in api.requests] == [
        f"/repos/o/r/issues?per_page=3&page={n}" for n in (1, 2, 3)
    ]
    for seen in api.requests:  # the profile's headers went on every page
        assert seen.headers["x-github-api-version"] == "2022-11-28"
        assert seen.headers["accept"] == "application/vnd.github+json"


def test_slack_cursor_in_the_body(tmp_path: Path, api: FakeAPI) -> None:
    api.responder = slack
    allow = ["GET /api/conversations.list?limit&cursor"]
    preamble = (
        "host.conversations_list = (options) => host.call("
        '{method: "GET", route: "/api/conversations.list", query: ["limit", "cursor"]}, [], '
        "undefined, options);\n"
    )
    code = """
      const names = [];
      let cursor;
      do {
        const page = await host.conversations_list({limit: 3, cursor});
        names.push(...page.channels.map((c) => c.id));
        cursor = page.response_metadata.next_cursor || undefined;
      } while (cursor);
      console.log(JSON.stringify(names));
    """
    (out,) = run(code, grant(tmp_path, api.url, allow, preamble))
    assert out == [item["id"] for item in ITEMS]
    assert [s.path for s in api.requests] == [
        "/api/conversations.list?limit=3",
        "/api/conversations.list?limit=3&cursor=dXNlcjo3",
        "/api/conversations.list?limit=3&cursor=dXNlcjo6",
    ]


def test_stripe_has_more_and_starting_after(tmp_path: Path, api: FakeAPI) -> None:
    api.responder = stripe
    allow = ["GET /v1/customers?limit&starting_after"]
    preamble = (
        "host.list_customers = (options) => host.call("
        '{method: "GET", route: "/v1/customers", query: ["limit", "starting_after"]}, [], '
        "undefined, options);\n"
    )
    code = """
      const ids = [];
      let after, more = true;
      while (more) {
        const page = await host.list_customers({limit: 3, starting_after: after});
        ids.push(...page.data.map((c) => c.id));
        more = page.has_more;
        after = page.data[page.data.length - 1].id;
      }
      console.log(JSON.stringify(ids));
    """
    (out,) = run(code, grant(tmp_path, api.url, allow, preamble))
    assert out == [item["id"] for item in ITEMS]
    assert [s.path for s in api.requests] == [
        "/v1/customers?limit=3",
        "/v1/customers?limit=3&starting_after=it_3",
        "/v1/customers?limit=3&starting_after=it_6",
    ]


def test_if_none_match_gets_304_in_the_response_form(tmp_path: Path, api: FakeAPI) -> None:
    api.responder = etagged
    allow = [{"route": "GET /repos/*/*", "headers": ["If-None-Match"],
              "response_headers": ["ETag"]}]  # fmt: skip
    preamble = (
        "host.repo = (o, r, options) => host.call("
        '{method: "GET", route: "/repos/*/*", headers: ["If-None-Match"]}, [o, r], '
        "undefined, options);\n"
    )
    code = """
      const first = await host.$response.repo("o", "r");
      const again = await host.$response.repo("o", "r", {"If-None-Match": first.headers.etag});
      console.log(JSON.stringify([first.status, first.headers.etag, first.body.full_name]));
      console.log(JSON.stringify([again.status, again.headers.etag, again.body]));
      try {
        await host.repo("o", "r", {"If-None-Match": first.headers.etag});
        console.log(JSON.stringify("resolved"));
      } catch (e) {
        console.log(JSON.stringify(e.message));
      }
    """
    first, again, body_form = run(code, grant(tmp_path, api.url, allow, preamble))
    assert first == [200, '"v1-5f3c"', "o/r"]
    assert again == [304, '"v1-5f3c"', ""]
    assert body_form == "host api 304: "  # the body form still rejects what is not 2xx
    assert [s.headers.get("if-none-match") for s in api.requests] == [
        None,
        '"v1-5f3c"',
        '"v1-5f3c"',
    ]
