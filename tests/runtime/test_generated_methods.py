"""The methods specgen generates, run in the sandbox under the real client, against a
guest that has rewritten the prototypes first (agent code is hostile by assumption).

A generated method takes exactly its path arguments, its body and its options, and
nothing the guest put on Array.prototype or Object.prototype runs between the method
and the client: `$response` marks the very next call the client sees, so code running
in between could take that mark for a call of its own.
"""

from __future__ import annotations

import json

from runtime import GuestGrant, HostReply, HostRequest
from runtime import run_sandbox as run
from specgen.allow import parse_entry
from specgen.operations import generate
from specgen.render import artifacts

DOC = {
    "openapi": "3.0.3",
    "info": {"title": "t", "version": "1"},
    "paths": {
        "/repos/{owner}/{repo}/items/{id}": {
            "get": {
                "operationId": "getItem",
                "parameters": [
                    {"name": n, "in": "path", "required": True, "schema": {"type": "string"}}
                    for n in ("owner", "repo", "id")
                ]
                + [{"name": "page", "in": "query", "schema": {"type": "integer"}}],
                "responses": {"200": {"description": "OK"}},
            },
            "put": {
                "operationId": "putItem",
                "parameters": [
                    {"name": n, "in": "path", "required": True, "schema": {"type": "string"}}
                    for n in ("owner", "repo", "id")
                ],
                "requestBody": {"content": {"application/json": {"schema": {"type": "object"}}}},
                "responses": {"200": {"description": "OK"}},
            },
        },
        "/deep/{a}/{b}/{c}/{d}/{e}": {
            "get": {
                "operationId": "getDeep",
                "parameters": [
                    {"name": n, "in": "path", "required": True, "schema": {"type": "string"}}
                    for n in "abcde"
                ],
                "responses": {"200": {"description": "OK"}},
            }
        },
    },
}

#: Planted before any call: every Array.prototype way of making or reading an array,
#: getters at the indices a short call would read (their setters define the element,
#: so arrays still fill), and a `get` on Object.prototype (which a property descriptor
#: would inherit). Each makes a call of its own and counts.
HOSTILE = """
globalThis.planted = 0;
const sneak = () => { planted++; host.get("/sneak").catch(() => {}); };
for (const name of ["slice", "push", "concat", "map", "fill"]) {
  const real = Array.prototype[name];
  Array.prototype[name] = function (...a) { sneak(); return real.apply(this, a); };
}
for (const i of [0, 1, 2, 3, 4]) {
  Object.defineProperty(Array.prototype, i, {
    get() { sneak(); return "planted"; },
    set(v) { Object.defineProperty(this, i, { __proto__: null, value: v, writable: true, enumerable: true, configurable: true }); },
    configurable: true,
  });
}
Object.defineProperty(Object.prototype, "get", { get() { sneak(); return undefined; }, configurable: true });
"""


def _grant() -> GuestGrant:
    files = artifacts(generate(DOC, name="doc.json", global_name="host"))
    allow = tuple(parse_entry(e).route for e in json.loads(files["allow.json"]))
    return GuestGrant("host", allow, files["preamble.js"])


class _Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[object, ...]] = []

    def __call__(self, request: HostRequest) -> HostReply:
        target = request.route or request.path
        self.calls.append((request.method, target, request.values, request.query, request.body))
        return HostReply(
            200, b'{"ok":1}', "application/json", headers=(("etag", '"e"'),), upstream=True
        )


def test_a_generated_methods_response_form_is_its_own_under_a_rewritten_prototype() -> None:
    handler = _Recorder()
    code = (
        HOSTILE
        + """
const r = await host.$response.getItem("o", "r", "1", {page: 2});
print(JSON.stringify([r.status, r.headers, r.body]));
"""
    )
    out = run(code, grant=_grant(), handler=handler)
    assert out.stderr == ""
    assert out.stdout == '[200,{"etag":"\\"e\\""},{"ok":1}]\n'
    # The client itself may run planted code once it has taken the call (its own
    # arrays); what it sent for the method is the method's call.
    assert [c for c in handler.calls if c[1] != "/sneak"] == [
        ("GET", "/repos/*/*/items/*", ("o", "r", "1"), (("page", "2"),), None)
    ]


def test_a_left_out_path_argument_is_undefined_whatever_the_prototype_holds() -> None:
    handler = _Recorder()
    code = (
        HOSTILE
        + """
try { await host.getItem("o", "r"); print("sent"); } catch (e) { print(e.name + ": " + e.message); }
await host.getItem("o", "r", "2");  // no options: not what Array.prototype[3] holds
try { await host.getDeep("1", "2", "3", "4"); print("sent"); } catch (e) { print(e.message); }
await host.getDeep("1", "2", "3", "4", "5");
await host.putItem("o", "r", "1", {n: 1});
"""
    )
    out = run(code, grant=_grant(), handler=handler)
    assert out.stdout == (
        "TypeError: path parameter 3 of GET /repos/*/*/items/* must be a string or a number\n"
        "path parameter 5 of GET /deep/*/*/*/*/* must be a string or a number\n"
    ), out.stderr
    assert [c for c in handler.calls if c[1] != "/sneak"] == [
        ("GET", "/repos/*/*/items/*", ("o", "r", "2"), (), None),
        ("GET", "/deep/*/*/*/*/*", ("1", "2", "3", "4", "5"), (), None),
        ("PUT", "/repos/*/*/items/*", ("o", "r", "1"), (), b'{"n":1}'),
    ]


def test_generated_methods_declare_their_arguments_and_their_names() -> None:
    code = "print(host.getItem.name, host.getItem.length, host.putItem.name, host.putItem.length, host.getDeep.length)"
    assert run(code, grant=_grant()).stdout == "getItem 4 putItem 4 5\n"
