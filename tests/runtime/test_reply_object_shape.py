"""A host call's reply object leaves every other object of the guest as it was.

QuickJS-NG 0.15's JS_NewObjectFromStr added the reply's `status` and `body` to the shape
all empty objects share, so objects the guest made before a call gained phantom fields
holding stale heap values, and a POST of such an object sent them upstream. Each program
below prints what node prints for it; the differential suite holds many more to node.
"""

from __future__ import annotations

import struct

import pytest

from runtime import GuestGrant, HostReply, HostRequest
from runtime import run_sandbox as run
from runtime.sandbox import bridge
from runtime.sandbox import vm as qjs_vm
from specgen.routes import parse_route_line

CALL = '__coderunner_host_call(JSON.stringify({method: "GET", path: "/v1/items/1"}))'
START = 'await __coderunner_host_start(JSON.stringify({method: "GET", path: "/v1/items/1"}))'


def _reply(_request: HostRequest) -> HostReply:
    return HostReply(200, b'{"id":1,"tags":{}}', "application/json")


PROGRAMS = [
    ("const body = {}; {call}; body.a = 1; console.log(JSON.stringify(body))", '{"a":1}'),
    ('const b = {}; {call}; console.log(JSON.stringify({tag: "x", ...b}))', '{"tag":"x"}'),
    (
        "const counts = {}; {call}; for (const k of ['a','b','a']) counts[k] = (counts[k] || 0) + 1;"
        " console.log(JSON.stringify(counts))",
        '{"a":2,"b":1}',
    ),
    ("{call}; console.log(JSON.stringify(JSON.parse('{}')))", "{}"),
    ("{call}; console.log(JSON.stringify(Object.fromEntries([])))", "{}"),
    ("class C { data = {} }; {call}; console.log(JSON.stringify(new C()))", '{"data":{}}'),
    (
        "function f(opts = {}) { return Object.keys(opts).length }; {call}; console.log(f())",
        "0",
    ),
    ("{call}; const o = {}; console.log(Object.keys(o).length, 'status' in o)", "0 false"),
    ("const o = Object.assign({}, {}); {call}; console.log(JSON.stringify(o))", "{}"),
]


@pytest.mark.parametrize("how", [CALL, START], ids=["blocking", "started"])
@pytest.mark.parametrize(("program", "expected"), PROGRAMS)
def test_objects_made_around_a_host_call_keep_their_own_fields(how, program, expected):
    grant = GuestGrant(allow=(parse_route_line("GET /v1/items/*"),))
    code = program.replace("{call}", how)
    r = run(code, grant=grant, handler=_reply)
    assert (r.exit_code, r.stderr) == (0, "")
    assert r.stdout.strip() == expected


def test_the_reply_itself_has_exactly_status_and_body_and_a_hidden_type():
    code = (
        f"const r = {CALL}; console.log(JSON.stringify(Object.getOwnPropertyNames(r)), "
        "JSON.stringify(Object.keys(r)))"
    )
    r = run(code, handler=_reply)
    assert r.stdout.strip() == '["status","body","type"] ["status","body"]'


def test_a_prototype_setter_neither_sees_nor_hides_the_reply_fields():
    code = (
        "let seen = 0; Object.defineProperty(Object.prototype, 'status', "
        "{set(v) { seen++ }, get() { return 'fake' }, configurable: true});"
        f"const r = {CALL}; console.log(seen, r.status, typeof r.body)"
    )
    r = run(code, handler=_reply)
    assert r.stdout.strip() == "0 200 string"


def _reply_from_str(vm: qjs_vm.Vm, ctx: int, reply: HostReply) -> int:
    """The reply built in one JS_NewObjectFromStr call, the way that corrupted 0.15."""
    status, text = reply.status, vm.new_string(ctx, reply.body)
    names = vm.constant(b"status\0body")
    props = vm.alloc(struct.pack("<II", names, names + 7), nul=False)
    values = vm.alloc(struct.pack("<qq", qjs_vm.js_int(status), text), nul=False)
    try:
        return vm.call("JS_NewObjectFromStr", ctx, 2, props, values)
    finally:
        vm.free(values)
        vm.free(props)


@pytest.mark.parametrize(("program", "expected"), PROGRAMS)
def test_the_engine_itself_keeps_shapes_apart_even_with_js_new_object_from_str(
    monkeypatch, program, expected
):
    # The engine is QuickJS-NG 0.17, which has the upstream fix: even the one-call
    # constructor that corrupted 0.15 leaves the guest's other objects as they were.
    monkeypatch.setattr(bridge, "_reply_object", _reply_from_str)
    grant = GuestGrant(allow=(parse_route_line("GET /v1/items/*"),))
    r = run(program.replace("{call}", CALL), grant=grant, handler=_reply)
    assert (r.exit_code, r.stderr) == (0, "")
    assert r.stdout.strip() == expected
