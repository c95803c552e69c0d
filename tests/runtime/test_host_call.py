"""`__coderunner_host_call` and the injected client: statuses, texts, exact bytes."""

from __future__ import annotations

import json

import pytest

from runtime import GuestGrant, HostReply, HostRequest
from runtime import run_sandbox as run
from specgen.route_index import RouteIndex
from specgen.routes import Route, first_match

FORBIDDEN = b"forbidden by sandbox capability allowlist\n"


def raw_call(envelope_js: str) -> str:
    return f"const r = __coderunner_host_call({envelope_js}); print(JSON.stringify(r))"


class Recorder:
    """A stand-in broker: records what it was asked and answers from the allow list."""

    def __init__(
        self, allow: tuple[Route, ...] = (), reply: bytes = b'{"ok":true}', status: int = 200
    ) -> None:
        self.allow, self.reply, self.status, self.calls = allow, reply, status, []

    def __call__(self, request: HostRequest) -> HostReply:
        method, path, body = request.method, request.path, request.body
        self.calls.append((method, path, body))
        if first_match(self.allow, method, path) is None:
            return HostReply(403, FORBIDDEN)
        return HostReply(self.status, self.reply, "application/json")


@pytest.mark.parametrize(
    ("envelope_js", "status", "body"),
    [
        ('""', 413, "host api request envelope too large\n"),
        ('"x".repeat(1114113)', 413, "host api request envelope too large\n"),
        ('"{"', 400, "invalid host api request envelope\n"),
        (
            'JSON.stringify({method: "GET", path: "/a", extra: 1})',
            400,
            "invalid host api request envelope\n",
        ),
        (
            'JSON.stringify({method: "GET", path: "/a"}) + " x"',
            400,
            "invalid host api request envelope\n",
        ),
        ('JSON.stringify({method: 1, path: "/a"})', 400, "invalid host api request envelope\n"),
        ("{}", 400, "invalid host api request envelope\n"),  # ToString -> "[object Object]"
        ('JSON.stringify({method: "GET", path: "/a"})', 503, "host api broker unavailable\n"),
    ],
)
def test_raw_call_refusals_without_a_handler(envelope_js, status, body):
    r = run(raw_call(envelope_js))
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout) == {"status": status, "body": body}


def test_reply_properties_cannot_be_intercepted_by_prototype_setters():
    code = (
        "for (const k of ['status', 'body']) Object.defineProperty(Object.prototype, k,"
        " {set(v) { print('hijacked ' + k) }, configurable: true});"
        + raw_call('JSON.stringify({method: "GET", path: "/a"})')
    )
    r = run(code)
    assert (r.exit_code, r.stdout) == (
        0,
        '{"status":503,"body":"host api broker unavailable\\n"}\n',
    )


_SHAPE_JS = (
    "const d = Object.getOwnPropertyDescriptors(r);"
    " print(JSON.stringify([Object.getPrototypeOf(r) === Object.prototype, Object.keys(r),"
    " ['status', 'body'].map(k => [d[k].writable, d[k].enumerable, d[k].configurable,"
    " !!d[k].get, !!d[k].set])]));"
)


@pytest.mark.parametrize(
    "call",
    [
        'const r = __coderunner_host_call(JSON.stringify({method: "GET", path: "/a"}));',
        'const r = await __coderunner_host_start(JSON.stringify({method: "GET", path: "/a"}));',
    ],
)
def test_reply_is_a_plain_object_of_two_data_properties(call):
    # Both exits build the reply the same way; it must look exactly like `{status, body}`
    # written as a literal: own, writable, enumerable, configurable data properties.
    r = run(call + _SHAPE_JS, handler=Recorder(allow=(Route("/a", "GET"),)))
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout) == [
        True,
        ["status", "body"],
        [[True, True, True, False, False]] * 2,
    ]


def test_reply_bodies_of_every_size_arrive_exactly_in_any_order():
    # Short bodies reach the guest through a reused buffer: a long one, a short one after
    # it and bodies at the buffer's edge must each arrive whole, with nothing left over.
    sizes = [5000, 1, 4095, 4096, 4097, 0, 70_000, 2]
    bodies = [bytes([0x61 + i]) * n for i, n in enumerate(sizes)]

    def handler(request: HostRequest) -> HostReply:  # workers may answer in any order
        return HostReply(200, bodies[int(request.path.rsplit("/", 1)[1])])

    half = len(sizes) // 2
    code = (
        "const env = (i) => JSON.stringify({method: 'GET', path: '/a/' + i});"
        f" const out = []; for (let i = 0; i < {half}; i++)"
        " out.push(__coderunner_host_call(env(i)).body);"
        f" const rest = await Promise.all(Array.from({{length: {len(sizes) - half}}},"
        f" (_, i) => __coderunner_host_start(env({half} + i))));"
        " for (const x of rest) out.push(x.body);"
        " print(JSON.stringify(out.map(b => [b.length, b[0] || ''])));"
    )
    r = run(code, handler=handler)
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout) == [[len(b), b[:1].decode()] for b in bodies]


def test_a_host_call_nested_in_the_envelopes_tostring_keeps_both_replies():
    replies = iter([b"inner", b"outer"])

    def handler(request: HostRequest) -> HostReply:
        return HostReply(200, next(replies))

    env = 'JSON.stringify({method: "GET", path: "/a"})'
    code = (
        "let inner; const r = __coderunner_host_call({toString() {"
        f" inner = __coderunner_host_call({env}); return {env}; }}}});"
        " print(inner.status + ' ' + inner.body + ' ' + r.status + ' ' + r.body);"
    )
    r = run(code, handler=handler)
    assert (r.exit_code, r.stdout) == (0, "200 inner 200 outer\n"), r.stderr


def test_missing_argument_is_a_type_error():
    r = run('try { __coderunner_host_call() } catch (e) { print(e.name + ": " + e.message) }')
    assert r.stdout == "TypeError: host api request envelope is required\n"


def test_argument_tostring_exception_propagates():
    r = run(
        'try { __coderunner_host_call({toString() { throw new Error("nope") }}) } catch (e) { print(e.message) }'
    )
    assert r.stdout == "nope\n"


def test_handler_gets_method_path_and_exact_body_bytes():
    rec = Recorder(allow=(Route("/v1/lights/*/on", "POST"),))
    r = run(
        raw_call('\'{"method":"POST","path":"/v1/lights/kitchen/on","body": {"level" : 42.0}}\''),
        handler=rec,
    )
    assert rec.calls == [("POST", "/v1/lights/kitchen/on", b'{"level" : 42.0}')]
    assert json.loads(r.stdout) == {"status": 200, "body": '{"ok":true}'}


def test_non_ascii_reply_body_reaches_the_guest_as_text():
    rec = Recorder(allow=(Route("/a", "GET"),), reply="café ✓ 😀".encode())
    r = run(raw_call('JSON.stringify({method: "GET", path: "/a"})'), handler=rec)
    assert json.loads(r.stdout)["body"] == "café ✓ 😀"


def test_invalid_utf8_reply_is_replaced_not_fatal():
    rec = Recorder(allow=(Route("/a", "GET"),), reply=b"a\xff\xfeb\xc3")
    r = run(raw_call('JSON.stringify({method: "GET", path: "/a"})'), handler=rec)
    assert json.loads(r.stdout)["body"] == "a\ufffd\ufffdb\ufffd"


def test_huge_envelope_is_413_without_reaching_the_handler():
    rec = Recorder(allow=(Route("/a", "GET"),))
    r = run(raw_call('"x".repeat(20e6)'), handler=rec)
    assert json.loads(r.stdout)["status"] == 413 and rec.calls == []


def test_encoded_path_bypass_is_the_brokers_403():
    rec = Recorder(allow=(Route("/v1/lights/*", "GET"),))
    r = run(raw_call('JSON.stringify({method: "GET", path: "/v1/%6cights/kitchen"})'), handler=rec)
    assert json.loads(r.stdout) == {"status": 403, "body": FORBIDDEN.decode()}


def test_handler_exception_is_500_with_no_detail_and_no_crash():
    def broken(request):
        raise RuntimeError("secret detail from the handler")

    r = run(raw_call('JSON.stringify({method: "GET", path: "/a"})'), handler=broken)
    assert r.exit_code == 0 and json.loads(r.stdout) == {"status": 500, "body": ""}
    assert "secret detail" not in r.stdout + r.stderr
    assert run('print("next")').stdout == "next\n"


@pytest.mark.parametrize("status", [0, 99, 600, -1])
def test_status_outside_100_599_is_an_internal_error(status):
    r = run(
        'try { __coderunner_host_call(JSON.stringify({method: "GET", path: "/a"})) } catch (e) { print(e.name + ": " + e.message) }',
        handler=lambda request: HostReply(status, b""),
    )
    assert r.stdout == "InternalError: host api bridge returned an invalid response\n"


def test_reply_over_4_mib_is_500_empty():
    r = run(
        raw_call('JSON.stringify({method: "GET", path: "/a"})'),
        handler=lambda request: HostReply(200, b"x" * ((4 << 20) + 1)),
    )
    assert json.loads(r.stdout) == {"status": 500, "body": ""}


def test_many_calls_in_promises_and_async_functions():
    rec = Recorder(allow=(Route("/n/*", "GET"),), reply=b"1")
    code = """
async function go() { let s = 0; for (let i = 0; i < 200; i++) s += await host.get("/n/" + i); return s; }
go().then(s => print("sum " + s));
"""
    r = run(code, grant=GuestGrant(allow=(Route("/n/*", "GET"),)), handler=rec)
    assert r.stdout == "sum 200\n" and len(rec.calls) == 200


# -- the client ---------------------------------------------------------------------------
ALLOW = (
    Route("/v1/items/*", "GET"),
    Route("/v1/items", "POST"),
    Route("/v1/items/*", "PUT"),
    Route("/v1/items/*", "PATCH"),
    Route("/v1/items/*", "DELETE"),
)


def client_run(code: str, rec: Recorder | None = None, allow: tuple[Route, ...] = ALLOW):
    rec = rec or Recorder(allow=allow)
    return run(code, grant=GuestGrant(allow=allow), handler=rec), rec


def test_client_helpers_map_to_methods_and_bodies():
    code = """
await host.get("/v1/items/a"); await host.post("/v1/items", {x: 1}); await host.put("/v1/items/a", [1]);
await host.patch("/v1/items/a", null); await host.del("/v1/items/a"); await host.call("get", "/v1/items/b", {ignored: false});
await host.post("/v1/items", function () {});
"""
    r, rec = client_run(code)
    assert r.exit_code == 0, r.stderr
    assert rec.calls == [
        ("GET", "/v1/items/a", None),
        ("POST", "/v1/items", b'{"x":1}'),
        ("PUT", "/v1/items/a", b"[1]"),
        ("PATCH", "/v1/items/a", b"null"),
        ("DELETE", "/v1/items/a", None),
        ("GET", "/v1/items/b", b'{"ignored":false}'),
        ("POST", "/v1/items", None),
    ]


def test_client_resolves_parsed_json_or_raw_text():
    r, _ = client_run(
        'print(JSON.stringify(await host.get("/v1/items/a")))', Recorder(ALLOW, reply=b'{"a":[1]}')
    )
    assert r.stdout == '{"a":[1]}\n'
    r, _ = client_run(
        'print(JSON.stringify(await host.get("/v1/items/a")))', Recorder(ALLOW, reply=b"plain")
    )
    assert r.stdout == '"plain"\n'
    r, _ = client_run(
        'print(JSON.stringify(await host.get("/v1/items/a")))', Recorder(ALLOW, reply=b"")
    )
    assert r.stdout == '""\n'


@pytest.mark.parametrize("status", [301, 404, 500])
def test_client_rejects_non_2xx_with_status_and_body(status):
    """The body as it came, but for one newline at its end (the broker's own texts end in
    one), so a printed message is one line, as a refusal the client makes itself is."""
    for body, said in ((b"nope\n", "nope"), (b"two\n\n", "two\n"), (b"a\nb", "a\nb")):
        r, _ = client_run(
            'host.get("/v1/items/a").catch(e => print(JSON.stringify(e.message)))',
            Recorder(ALLOW, reply=body, status=status),
        )
        assert r.stdout == json.dumps(f"host api {status}: {said}") + "\n"


@pytest.mark.parametrize(
    "path",
    [
        "/v1/items/%78",
        "/v1/items/a?x=1",
        "/v1/items/a#f",
        "/v1/items/../x",
        "/v1/items/.",
        "v1/items/a",
        "/v1/items/a b",
        "/v1/items/a\\\\b",
        "/v1/items/\\u0001",
        "/v1/items/",
        "/v1/items/a/b",
        "/v1/other/a",
        "/v1/items/caf\\u00e9",
        "/v1/items/\\ud800",
    ],
)
def test_client_gate_refusal_is_the_brokers_to_make(path):
    """The gate's text (the reference's) is kept, but the call is still sent: the broker
    decides it and counts it, so no call the gate refused is missing from the record."""
    r, rec = client_run(f'host.get("{path}").catch(e => print(e.message))')
    assert len(rec.calls) == 1 and rec.calls[0][0] == "GET"
    assert r.stdout.startswith(
        "host api call not permitted by sandbox capability: GET /v1"
    ) or r.stdout.startswith("host api call not permitted by sandbox capability: GET v1")


def test_client_gate_is_looser_than_the_broker():
    r, rec = client_run(
        "host.get(\"/v1/items/a;b\").then(v => print('sent'), e => print(e.message))"
    )
    assert (
        rec.calls == [("GET", "/v1/items/a;b", None)]
        and r.stdout == "host api 403: forbidden by sandbox capability allowlist\n"
    )


def test_client_refusal_is_a_rejected_promise_never_a_sync_throw():
    code = """
let p; try { p = host.call("post", "/nope", {}) } catch (e) { print("sync throw") }
p.catch(e => print(e.message));
let q = host.post("/v1/items", {n: 10n}); q.catch(e => print(e.name));
"""
    r, rec = client_run(code)
    assert (
        r.stdout == "TypeError\nhost api call not permitted by sandbox capability: POST /nope\n"
        and rec.calls == [("POST", "/nope", b"{}")]
    )


def test_client_embeds_allow_list_in_grant_order_and_empty_reaches_nothing():
    r, rec = client_run('host.get("/v1/items/a").catch(e => print(e.message))', allow=())
    assert (
        r.stdout == "host api call not permitted by sandbox capability: GET /v1/items/a\n"
        and rec.calls == [("GET", "/v1/items/a", None)]
    )
    # What the guest holds is the allow list as the route index, positions in grant order.
    r = run("print(execArgv[2])", grant=GuestGrant(allow=ALLOW))
    literal = r.stdout.split("var indexText = ", 1)[1].split(";\n", 1)[0]
    embedded = json.loads(json.loads(literal))
    assert embedded == RouteIndex(ALLOW).to_json()
    assert embedded["GET 3"] == {
        "f": 0,
        "l": {"v1": {"f": 0, "l": {"items": {"f": 0, "w": [["*", {"f": 0, "e": 0}]]}}}},
    }
    assert embedded["POST 2"]["l"]["v1"]["l"]["items"] == {"f": 1, "e": 1}


def test_client_under_a_custom_global_with_exactly_six_functions():
    r = run(
        "print(typeof host, Object.keys(memory).join())", grant=GuestGrant(global_name="memory")
    )
    assert r.stdout == "undefined call,get,put,post,patch,del\n"


def test_global_name_and_allow_entries_are_embedded_as_inert_json():
    odd = 'we"ird\u2028</script>'
    grant = GuestGrant(global_name=odd, allow=(Route('/a"b', "GET"),))
    r = run(
        f"print(typeof globalThis[{json.dumps(odd)}].get, execArgv[2].indexOf({json.dumps(odd)}) < 0)",
        grant=grant,
    )
    assert (r.exit_code, r.stdout) == (0, "function true\n"), r.stderr
