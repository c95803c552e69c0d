"""The client's `$response` form against a hostile guest: a refusal never resolves as an
answer, the form never outlives its own call, and each answer carries its own headers.

Every call runs in the sandbox through the real broker against a loopback API that
names the request in its body and in a listed header, so a reply handed to the wrong
call would show.
"""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from pathlib import Path

from runtime import load_grants as load
from runtime import run_with_grant
from tests.runtime.loopback import FakeAPI, Seen

KEY = "review-response-key-3b9e0f5a7c21d846"
PREAMBLE = 'host.getItem = (id) => host.call({method: "GET", route: "/v1/items/*"}, [id]);\n'
#: A call the client's own gate lets through and the broker refuses (X-B is not listed).
REFUSED = (
    'host.$response.call({method: "GET", route: "/v1/items/*", headers: ["X-B"]}, ["a"],'
    ' undefined, {"X-B": "1"})'
)


def _echo(handler: BaseHTTPRequestHandler, seen: Seen) -> None:
    body = json.dumps({"path": seen.path}).encode()
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("X-Path", seen.path)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


def _run(tmp_path: Path, api: FakeAPI, code: str) -> list[list[object]]:
    api.responder = _echo
    grant = {
        "base_url": api.url,
        "allowed_callers": ["agent"],
        "token": {"type": "static", "env": "API_TOKEN"},
        "allow": ["GET /v1/items/*"],
        "response_headers": ["X-Path"],
        "preamble": PREAMBLE,
    }
    path = tmp_path / "grants.json"
    path.write_text(json.dumps({"profiles": {"p": grant}}))
    profile = load(path, environ={"API_TOKEN": KEY}).select("p", "agent")
    prelude = (
        "const out = [];\n"
        "async function t(name, f) {\n"
        "  try { const r = await f(); out.push([name, 'resolved', r && r.status]); }\n"
        "  catch (e) { out.push([name, 'rejected', String(e).split(':')[0]]); }\n"
        "}\n"
    )
    result = run_with_grant(
        prelude + code + "\nconsole.log(JSON.stringify(out));", profile, caller="agent"
    ).result
    assert result.exit_code == 0, result
    return json.loads(result.stdout)


def test_a_headers_on_object_prototype_does_not_dress_a_refusal_as_an_answer(
    tmp_path: Path, api: FakeAPI
) -> None:
    """The client told an answer from a refusal by `typeof res.headers`, which a refusal
    (no own `headers`) read from Object.prototype: the broker's 403 resolved as
    `{status: 403, headers: {...forged}, body}`. Only the reply's own property counts."""
    rows = _run(
        tmp_path,
        api,
        f"""
        await t("refused", () => {REFUSED});
        Object.prototype.headers = '{{"x-forged": "1"}}';
        await t("refused, headers on Object.prototype", () => {REFUSED});
        Object.defineProperty(Object.prototype, "headers",
          {{get() {{ return "{{}}"; }}, configurable: true}});
        await t("refused, a getter on Object.prototype", () => {REFUSED});
        delete Object.prototype.headers;
        Object.prototype.headers = "{{}}";
        Object.prototype.value = "{{}}";
        await t("refused, a value on Object.prototype too", () => {REFUSED});
        await t("answered", () => host.$response.getItem("1"));
        """,
    )
    assert rows == [
        ["refused", "rejected", "Error"],
        ["refused, headers on Object.prototype", "rejected", "Error"],
        ["refused, a getter on Object.prototype", "rejected", "TypeError"],
        ["refused, a value on Object.prototype too", "rejected", "Error"],
        ["answered", "resolved", 200],
    ]
    assert [seen.path for seen in api.requests] == ["/v1/items/1"]


def test_the_response_form_stays_with_its_own_call(tmp_path: Path, api: FakeAPI) -> None:
    """No guest code runs while `$response` sets up its call: an argument's toString is
    never called (values are checked by type), and a Function.prototype.apply of the
    guest's is not the one the client calls (it was, and a call made inside it took the
    response form meant for the outer one). Later calls are plain; concurrent answers
    each carry their own headers."""
    code = """
        let inner;
        const evil = {toString() { inner = host.getItem("2"); return "1"; }};
        await t("an argument whose toString calls", () => host.$response.getItem(evil));
        out.push(["the call made inside", inner === undefined ? "never made" : "made"]);
        const apply = Function.prototype.apply;
        let made;
        Function.prototype.apply = function () {
          Function.prototype.apply = apply;
          made = host.getItem("3");
          throw new Error("hijacked");
        };
        await t("a hijacked apply", () => host.$response.getItem("4"));
        Function.prototype.apply = apply;
        out.push(["the hijack ran", made !== undefined]);
        await t("the next plain refusal", () => host.get("/v1/nope"));
        const plain = await host.getItem("5");
        out.push(["the next plain call", plain.path]);
        const both = await Promise.all(["6", "7", "8"].map((id) => host.$response.getItem(id)));
        out.push(["concurrent", both.map((r) => [r.headers["x-path"], r.body.path])]);
    """
    rows = _run(tmp_path, api, code)
    assert rows == [
        ["an argument whose toString calls", "rejected", "TypeError"],
        ["the call made inside", "never made"],
        ["a hijacked apply", "resolved", 200],
        ["the hijack ran", False],
        ["the next plain refusal", "rejected", "Error"],
        ["the next plain call", "/v1/items/5"],
        [
            "concurrent",
            [[f"/v1/items/{n}", f"/v1/items/{n}"] for n in (6, 7, 8)],
        ],
    ]
