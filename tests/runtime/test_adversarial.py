"""Adversarial review of the runtime: hostile guest code and a hostile or buggy upstream.

Each test states an attack and what must hold. Tests of weaknesses that were found and
fixed fail on the code before the fix (named in the docstring); the others pin down
attacks that were tried and held, so a later change cannot quietly reopen them. Where a
test claims something is absent, it also shows the same check finding it when present.

Scope decision (upstream bodies): the guest legitimately receives upstream bodies, so
the broker cannot promise that no upstream ever hands the key back in some encoding.
It does promise that a reply carrying the key verbatim (or in JSON string escaping) is
never delivered: an echo endpoint or a debug error page that reflects the Authorization
header would otherwise hand the guest the key. Deliberate encodings (base64, pieces)
by an upstream that wants to leak the key are out of scope: that API already has it.
"""

from __future__ import annotations

import socket
import threading
import time
from http.server import BaseHTTPRequestHandler

import httpx
import orjson
import pytest

from runtime import Broker, HostReply, HostRequest, Limits, Profile, Secret, run_with_grant
from runtime.sandbox import run, wasi
from tests.runtime.loopback import FakeAPI, Seen, json_ok, profile

KEY = "sk-adv-" + "4b1d" * 8
ALLOW = ("GET /v1/items/*", "POST /v1/items/x/run")


def grant(
    base_url: str,
    *,
    key: str = KEY,
    allow: tuple[str, ...] = ALLOW,
    name: str = "p",
    preamble: str = "",
) -> Profile:
    return profile(base_url, key, allow, name=name, preamble=preamble)


def ok(request: HostRequest) -> HostReply:
    return HostReply(200, b'{"ok":1}', "application/json")


def hits(secret: str, blob: bytes) -> int:
    return sum(blob.count(secret.encode(enc)) for enc in ("utf-8", "utf-16-le"))


# ---- hostile guest: re-entering the host while it reads the envelope -----------------

REENTER = """
var depth = 0;
var o = { toString() { depth++; return __coderunner_host_call(o).body; } };
try { __coderunner_host_call(o); print("returned"); } catch (e) { print(e.name + ": " + e.message); }
print(depth > 1 ? "re-entered" : "not re-entered");
"""


def test_reentrant_host_call_from_the_envelopes_tostring_is_a_guest_error_not_a_crash():
    """Found: a toString that calls __coderunner_host_call on its own object recursed
    through Python until ctypes raised ArgumentError(RecursionError) out of run(): a
    guest-triggered traceback in `specgen run`. Now nesting is bounded and the guest gets
    a catchable RangeError."""
    r = run(REENTER, handler=ok)
    assert r.exit_code == 0, r.stderr
    assert r.stdout == "RangeError: host api calls nested too deeply\nre-entered\n"
    assert run("print(6 * 7)").stdout == "42\n"


def test_shallow_reentrant_host_calls_still_work():
    code = """
    var left = 3;
    var o = { toString() {
      var inner = left-- > 0 ? __coderunner_host_call(o).status : 0;
      return JSON.stringify({ method: "GET", path: "/v1/items/" + inner });
    } };
    print(JSON.stringify(__coderunner_host_call(o)));
    """
    seen: list[str] = []

    def handler(request: HostRequest) -> HostReply:
        seen.append(request.path)
        return HostReply(200, b"1")

    r = run(code, handler=handler)
    assert (r.exit_code, r.stdout) == (0, '{"status":200,"body":"1"}\n'), r.stderr
    assert seen == ["/v1/items/0", "/v1/items/200", "/v1/items/200", "/v1/items/200"]


def test_reentry_through_the_real_broker_is_bounded_and_counted(api: FakeAPI):
    outcome = run_with_grant(REENTER, grant(api.url))
    assert outcome.result.exit_code == 0, outcome.result.stderr
    assert outcome.result.stdout.startswith("RangeError: host api calls nested too deeply")
    assert api.requests == []  # every envelope was "[object Object]"-free junk: 400 or none


# ---- hostile guest: loops where the host runs guest code -------------------------------


@pytest.mark.parametrize(
    "code",
    [
        "Promise.resolve().then(() => { for (;;) {} });",
        "try { throw 1 } finally { for (;;) {} }",
        "__coderunner_host_call({ toString() { for (;;) {} } });",
        "Promise.reject({ get stack() { for (;;) {} }, toString() { for (;;) {} } });",
        "throw { get stack() { for (;;) {} }, toString() { for (;;) {} } };",
        "var o = { toString() { __coderunner_host_call('{}'); for (;;) {} } }; __coderunner_host_call(o);",
    ],
    ids=["promise-job", "finally", "envelope-tostring", "rejection-dump", "error-dump", "nested"],
)
def test_loops_the_host_triggers_still_end_at_the_time_limit(code):
    r = run(code, handler=ok, limits=Limits(timeout_s=0.3))
    assert (r.exit_code, r.timed_out) == (124, True), r.stderr
    assert run("print(1)").stdout == "1\n"


def test_deep_nesting_in_parsers_ends_cleanly_and_the_process_survives():
    """JSON.parse / eval / JSON.stringify nesting the stack check cannot see ends in a
    wasm trap (134), never in a host crash; a regexp is a SyntaxError."""
    cases = {
        'JSON.parse("[".repeat(1e6))': 134,
        'eval("(".repeat(1e5) + "1" + ")".repeat(1e5))': 134,
        'new RegExp("(".repeat(1e5) + ")".repeat(1e5))': 0,
    }
    for expr, code in cases.items():
        r = run(f"try {{ {expr} }} catch (e) {{ print(e.name) }}")
        assert r.exit_code == code, (expr, r.stderr)
    assert run("print(2)").stdout == "2\n"


# ---- hostile guest: output writes copied into the host --------------------------------


def test_a_huge_write_copies_only_the_kept_bytes_into_the_host(monkeypatch):
    """Found: fd_write copied the whole guest buffer into Python (up to the guest's memory
    limit, e.g. 4 GiB) and only then truncated it to the 64 KiB cap."""
    largest: list[int] = []
    real_read = wasi.WasiState.read

    def spy(self, context, addr, n):
        largest.append(n)
        return real_read(self, context, addr, n)

    monkeypatch.setattr(wasi.WasiState, "read", spy)
    code = (
        'import * as os from "qjs:os";'
        " var b = new Uint8Array(32 << 20).fill(65); os.write(1, b.buffer, 0, b.length);"
        ' print("after")'
    )
    r = run(code, limits=Limits(output_bytes=1000))
    assert r.exit_code == 0, r.stderr
    assert r.stdout == "A" * 1000 and r.stdout_truncated
    assert max(largest) < 1 << 20


# ---- envelope tricks against the real broker -------------------------------------------


@pytest.mark.parametrize(
    ("envelope", "sent"),
    [
        ('{"method":"GET","path":"/v1/items/a","path":"/admin"}', None),
        ('{"method":"GET","path":"/admin","PATH":"/v1/items/a"}', "/v1/items/a"),
        ('{"method":"DELETE","METHOD":"GET","path":"/v1/items/a"}', "/v1/items/a"),
        ('{"method":"GET","path":"/v1/items/a","__proto__":{"path":"/admin"}}', None),
        ('{"method":"GET","path":"/v1/items/\\u0061"}', "/v1/items/a"),
        ('{"method":"GET","path":"/v1/items/a\\u0000"}', None),
        ('{"method":"GET","path":"/v1/items/\\ud800"}', None),
        ('{"method":"GET","path":"/v1/items/\\uff41"}', None),
        ('{"method":"GE\\u0054","path":"/v1/items/a"}', "/v1/items/a"),
        ('{"method":"get","path":"/v1/items/a"}', "/v1/items/a"),
        ('{"method":"GET ","path":"/v1/items/a"}', None),
        ('{"method":"G\\u0000ET","path":"/v1/items/a"}', None),
        ('{"method":["GET"],"path":"/v1/items/a"}', None),
        ('{"method":"GET","path":1e999}', None),
        # found: a body on GET was forwarded; no GET carries one now
        ('{"method":"GET","path":"/v1/items/a","body":1}', None),
    ],
)
def test_envelope_tricks_send_only_what_was_approved(api: FakeAPI, envelope: str, sent):
    code = f"print(__coderunner_host_call({envelope!r}).status)"
    outcome = run_with_grant(code, grant(api.url))
    assert outcome.result.exit_code == 0, outcome.result.stderr
    if sent is None:
        assert api.requests == []
        assert outcome.result.stdout in ("400\n", "403\n")
    else:
        assert [(s.method, s.path) for s in api.requests] == [("GET", sent)]
        assert outcome.result.stdout == "200\n"


# ---- hostile upstream ------------------------------------------------------------------


def drip(events: list[str], bytes_to_drip: int = 40, every_s: float = 0.25):
    """Answer with a status line, then one header byte every `every_s`: never a timeout
    for a per-read timer, and unbounded in total. Records whether the client hung up."""

    def respond(handler: BaseHTTPRequestHandler, seen: Seen) -> None:
        conn = handler.connection
        try:
            conn.sendall(b"HTTP/1.1 200 OK\r\nX-Slow: ")
            for _ in range(bytes_to_drip):
                time.sleep(every_s)
                conn.sendall(b"x")
        except OSError:
            events.append("client left")
        else:
            events.append("server finished dripping")
        handler.close_connection = True

    return respond


def _wait_for(events: list[str], seconds: float = 20.0) -> None:
    stop = time.monotonic() + seconds
    while not events and time.monotonic() < stop:
        time.sleep(0.02)


def test_a_drip_fed_reply_cannot_hold_a_call_past_its_deadline(api: FakeAPI):
    """Found: httpx timeouts bound each read, so an API dripping header bytes kept one call
    (and the blocked guest) running far past the run's deadline. The server here drips
    for 10 s; the broker's deadline is 0.5 s, and the server must see the client leave."""
    events: list[str] = []
    api.responder = drip(events)
    b = Broker(grant(api.url), deadline=time.monotonic() + 0.5)
    reply = b(HostRequest("GET", "/v1/items/a", None))
    assert (reply.status, reply.body) == (504, b"host api timed out\n")
    _wait_for(events)
    assert events == ["client left"]
    (row,) = b.close().rows
    assert (row.delivered, row.status) == (False, 0)


def test_a_drip_fed_reply_cannot_stretch_a_sandbox_run(api: FakeAPI):
    events: list[str] = []
    api.responder = drip(events)
    code = 'try { await host.get("/v1/items/a") } catch (e) { print(e.message) } for (;;) {}'
    outcome = run_with_grant(code, grant(api.url), limits=Limits(timeout_s=0.5))
    assert (outcome.result.exit_code, outcome.result.timed_out) == (124, True)
    _wait_for(events)
    assert events == ["client left"]


def set_cookie(handler: BaseHTTPRequestHandler, seen: Seen) -> None:
    body = b'{"ok":true}'
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Set-Cookie", "sid=upstream-state; Path=/")
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


def test_upstream_cookies_are_never_sent_back(api: FakeAPI):
    """Found: the broker's httpx client kept a cookie jar, so a Set-Cookie from one reply
    went back upstream as a Cookie header on every later call of the run: a header the
    broker never chose (the reference builds headers fresh)."""
    api.responder = set_cookie
    with Broker(grant(api.url)) as b:
        for _ in range(3):
            assert b(HostRequest("GET", "/v1/items/a", None)).status == 200
    assert [sorted(s.headers) for s in api.requests] == [
        ["accept", "accept-encoding", "authorization", "host", "user-agent"]
    ] * 3


def echo_authorization(escape: bool):
    def respond(handler: BaseHTTPRequestHandler, seen: Seen) -> None:
        auth = seen.headers.get("authorization", "")
        if escape:
            auth = auth.replace("/", "\\/")
        body = ('{"you sent": "' + auth + '"}').encode()
        handler.send_response(401)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    return respond


ECHO_CODE = """
try { await host.get("/v1/items/a") } catch (e) { globalThis.kept = e.message; print(e.message) }
"""


@pytest.mark.parametrize("key", [KEY, "sk/adv/" + "4b1d" * 8])
def test_a_reply_reflecting_the_key_is_never_delivered(api: FakeAPI, key: str):
    """Found: an upstream that echoes the Authorization header (an echo endpoint, a debug
    error page) handed the guest the key in the reply body. Now such a reply is a 502."""
    api.responder = echo_authorization(escape="/" in key)
    memory: list[bytes] = []
    outcome = run_with_grant(ECHO_CODE, grant(api.url, key=key), memory_probe=memory.append)
    result = outcome.result
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "host api 502: host api unavailable\n"
    assert len(api.requests) == 1 and api.requests[0].headers["authorization"] == f"Bearer {key}"
    assert hits(key, memory[0]) == 0 and hits(key.replace("/", "\\/"), memory[0]) == 0
    (row,) = outcome.trace.rows
    assert (row.status, row.delivered, row.bytes_back) == (401, False, 0)
    assert key not in outcome.audit


def test_the_reflection_check_is_what_stops_the_echo(api: FakeAPI, monkeypatch):
    """Control for the test above: with the broker's check switched off, the same echo
    reaches the guest and the same searches find the key."""
    monkeypatch.setattr(Broker, "_reflects_key", lambda self, body: False)
    api.responder = echo_authorization(escape=False)
    memory: list[bytes] = []
    outcome = run_with_grant(ECHO_CODE, grant(api.url), memory_probe=memory.append)
    assert KEY in outcome.result.stdout
    assert hits(KEY, memory[0]) > 0


def test_an_unrelated_reply_is_delivered_unchanged(api: FakeAPI):
    api.responder = json_ok
    with Broker(grant(api.url)) as b:
        reply = b(HostRequest("GET", "/v1/items/a", None))
    assert (reply.status, reply.body) == (200, b'{"ok":true}')


def test_proxy_variables_cannot_take_the_key_elsewhere(api: FakeAPI, monkeypatch):
    """Held: the broker reads no proxy variable. The control shows this httpx would have
    sent the request (and so the key) to the proxy had it trusted the environment."""
    trap = FakeAPI()
    try:
        for var in (
            "HTTP_PROXY",
            "http_proxy",
            "HTTPS_PROXY",
            "https_proxy",
            "ALL_PROXY",
            "all_proxy",
        ):
            monkeypatch.setenv(var, trap.url)
        for var in ("NO_PROXY", "no_proxy"):
            monkeypatch.delenv(var, raising=False)
        with Broker(grant(api.url)) as b:
            assert b(HostRequest("GET", "/v1/items/a", None)).status == 200
        assert trap.requests == [] and len(api.requests) == 1
        with httpx.Client(trust_env=True) as control:
            control.get(api.url + "/v1/items/a", headers={"Authorization": "Bearer control"})
        assert len(trap.requests) == 1 and len(api.requests) == 1
    finally:
        trap.close()


def test_a_refused_connection_and_a_reset_say_nothing_about_the_request():
    """Held: transport errors reach the guest as a fixed text naming the reason, never
    httpx's message (which names the URL)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code = 'try { await host.get("/v1/items/secret-segment") } catch (e) { print(e.message) }'
    outcome = run_with_grant(code, grant(f"http://127.0.0.1:{port}"))
    assert outcome.result.stdout == "host api 502: host api unreachable\n"
    assert orjson.loads(outcome.audit)["calls"][0]["failure"] == "unreachable"
    assert "secret-segment" not in outcome.audit + outcome.result.stderr


# ---- two grants in parallel threads ---------------------------------------------------


def test_parallel_runs_with_different_grants_never_see_each_other(api: FakeAPI):
    """Held: runs in threads with different keys, allow lists and preambles keep their
    own client, output, trace and key; the API saw each key only on its own routes."""
    keys = {"a": "sk-thread-a-" + "a1" * 10, "b": "sk-thread-b-" + "b2" * 10}
    profiles = {
        k: grant(
            api.url,
            key=keys[k],
            allow=(f"GET /v1/{k}/*",),
            name=f"prof-{k}",
            preamble=f'globalThis.mine = "{k}";',
        )
        for k in keys
    }
    code = """
var other = mine === "a" ? "b" : "a";
var got = await host.get("/v1/" + mine + "/1");
var refused = await host.get("/v1/" + other + "/1").then(() => "sent", (e) => e.message);
print(mine, JSON.stringify(got), refused, execArgv[2].indexOf("/v1/" + other + "/") >= 0);
"""
    outcomes: dict[str, list] = {k: [] for k in keys}

    def work(k: str) -> None:
        for _ in range(6):
            outcomes[k].append(run_with_grant(code, profiles[k]))

    threads = [threading.Thread(target=work, args=(k,)) for k in keys]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k, other in (("a", "b"), ("b", "a")):
        for o in outcomes[k]:
            assert o.result.stdout == (
                f'{k} {{"ok":true}} host api call not permitted by sandbox capability: '
                f"GET /v1/{other}/1 false\n"
            ), o.result.stderr
            assert [(r.route, r.status) for r in o.trace.rows] == [(f"/v1/{k}/*", 200)]
            assert o.audit.startswith(f'{{"profile":"prof-{k}"')
            assert keys[other] not in o.audit + o.result.stdout
    by_path = {(s.path, s.headers["authorization"]) for s in api.requests}
    assert by_path == {("/v1/a/1", f"Bearer {keys['a']}"), ("/v1/b/1", f"Bearer {keys['b']}")}
    assert len(api.requests) == 12


# ---- operator input the HTTP stack reads differently ----------------------------------


@pytest.mark.parametrize("url", ["https://xn--zz.com", "http://[::1]]"])
def test_a_base_url_httpx_cannot_parse_is_refused_at_load_not_at_run(tmp_path, url):
    """Found: the base_url rules were checked with urlsplit only, so a URL httpx refuses
    (a bad IDNA label, a stray bracket) loaded, and the run then died in Broker() with a
    traceback. Now it is a one-line refusal, in the file and as --base-url."""
    from runtime import GrantsError
    from runtime import load_grants as load

    with pytest.raises(GrantsError, match=r"^--base-url: .* is not a valid URL with a host$"):
        grant("http://127.0.0.1:1").with_base_url(url)
    path = tmp_path / "grants.json"
    path.write_text(
        '{"profiles": {"p": {"base_url": "' + url + '", "allowed_callers": ["*"],'
        ' "allow": ["GET /v1/items/*"]}}}'
    )
    with pytest.raises(GrantsError, match=r'^grants: profile "p": host-api grant: BaseURL '):
        load(path, environ={})


def test_loopback_and_idna_origins_still_load():
    from runtime.broker.grants import base_url_error

    for url in (
        "http://127.0.0.1:8080",
        "http://[::1]:8080",
        "http://localhost",
        "https://xn--bcher-kva.example",
        "https://API.example.com:443",
    ):
        assert base_url_error(url) is None, url


# ---- hostile guest: host memory outside the guest's limit ------------------------------


def _bridges(monkeypatch) -> list:
    from runtime.sandbox import runner as sandbox

    made: list = []

    class Spy(sandbox.Bridge):
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            made.append(self)

    monkeypatch.setattr(sandbox, "Bridge", Spy)
    return made


REJECT = "var ps = []; for (var i = 0; i < 5000; i++) ps.push(Promise.reject(i));\n"


def test_unhandled_rejections_cost_the_host_a_bounded_amount(monkeypatch):
    """Found: every unhandled rejection was kept in a host-side dict; 3 million of them
    grew the host process by ~350 MiB, outside the guest's memory limit. Now at most
    1000 are kept with their reason, the rest are counted."""
    bridges = _bridges(monkeypatch)
    r = run(REJECT)
    assert (r.exit_code, r.stderr) == (1, "Possibly unhandled promise rejection: 0\n")
    assert len(bridges[0].rejections) <= 1000


@pytest.mark.parametrize(
    ("handle", "exit_code", "stderr"),
    [
        ("ps", 0, ""),
        ("ps.slice(0, 1000)", 1, "(one of more than 1000 pending rejections"),
        ("ps.slice(1000)", 1, "Possibly unhandled promise rejection: 0\n"),
        ("ps.slice(1)", 1, "Possibly unhandled promise rejection: 0\n"),
    ],
)
def test_rejections_handled_later_are_still_forgiven_past_the_cap(handle, exit_code, stderr):
    r = run(REJECT + f"{handle}.forEach(function (p) {{ p.catch(function () {{}}); }});")
    assert r.exit_code == exit_code
    assert stderr in r.stderr if stderr else r.stderr == ""


def test_a_run_that_cannot_start_leaves_nothing_registered():
    """Found: a Store whose instantiation failed (memory limit below the module's minimum)
    stayed in the WASI registry with its run's state, one entry per such run."""
    before = len(wasi._RUNS)
    r = run("print(1)", limits=Limits(memory_mb=1))
    assert r.exit_code == 134 and "exceeds memory limits" in r.stderr
    assert len(wasi._RUNS) == before
    assert run("print(1)").stdout == "1\n"


# ---- hostile guest: recursion on a host thread with a small stack ----------------------

SMALL_STACK_PROBE = """
import sys, threading
from runtime import run_sandbox as run
code = "function f() { f() } try { f() } catch (e) { print(e.name) }"
threading.stack_size(1 << 20)
out = []
worker = threading.Thread(target=lambda: out.append(run(code).stdout))
worker.start()
worker.join()
out.append(run(code).stdout)
print(repr(out))
"""


def test_deep_recursion_on_a_small_host_stack_does_not_kill_the_process():
    """Found: wasm runs on the calling thread's stack and may use 2 MiB of it; in a
    thread started with a 1 MiB stack (or under `ulimit -s 1024`), `function f(){f()}`
    ran off the real stack and the host process died with SIGSEGV. Now such a run moves
    to a helper thread with a big stack. Run in a child process so a regression kills
    the child, not the test session."""
    import resource
    import subprocess
    import sys

    def small_main_stack() -> None:
        resource.setrlimit(resource.RLIMIT_STACK, (1 << 20, 1 << 20))

    child = subprocess.run(
        [sys.executable, "-c", SMALL_STACK_PROBE],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=small_main_stack,
    )
    assert (child.returncode, child.stdout) == (0, "['RangeError\\n', 'RangeError\\n']\n"), (
        child.stderr[-500:]
    )


def test_specgen_run_reads_a_bounded_amount_of_code(tmp_path):
    """Found: `specgen run /dev/zero` read forever; a device is now refused before it is
    opened, and a regular file past the bound in one line."""
    from click.testing import CliRunner

    from runtime.cli import run as run_command

    large = tmp_path / "large.js"
    large.write_bytes(b"/" * ((1 << 20) + 1))
    rest = ["--grants", str(tmp_path / "g.json"), "--profile", "p", "--caller", "c"]
    for code, said in (
        ("/dev/zero", "not a regular file"),
        (str(large), "larger than 1048576 bytes"),
    ):
        result = CliRunner().invoke(run_command, [code, *rest])
        assert result.exit_code == 1
        assert result.stderr == f'specgen: read "{code}": {said}\n'


def test_a_body_with_a_long_integer_is_forwarded_byte_for_byte():
    """Found: the envelope scanner converted body numbers to Python ints, whose 4300-digit
    limit turned a valid JSON body into a 400; the body is only spanned, never used."""
    from runtime import HostRequest as Envelope
    from runtime.sandbox.envelope import decode

    number = b"1" * 5000
    raw = b'{"method":"GET","path":"/a","body":[' + number + b",2.5e999]}"
    assert decode(raw) == Envelope("GET", "/a", b"[" + number + b",2.5e999]")
    assert decode(b'{"method":' + number + b',"path":"/a"}').status == 400  # type: ignore[union-attr]


# ---- operator files: held ---------------------------------------------------------------


def test_a_preamble_through_a_symlinked_directory_or_a_nested_duplicate_is_refused(tmp_path):
    """Held: the preamble check resolves every component, not just the file; duplicate
    keys are refused at any depth, so a second "env" cannot silently pick another key."""
    import json
    import os

    from runtime import GrantsError
    from runtime import load_grants as load

    outside = tmp_path / "outside"
    inside = tmp_path / "grants"
    outside.mkdir()
    inside.mkdir()
    (outside / "p.js").write_text("globalThis.x = 1;")
    os.symlink(outside, inside / "dir")
    body = {"base_url": "https://api.example", "allowed_callers": ["*"], "allow": ["GET /a"]}
    path = inside / "grants.json"
    path.write_text(json.dumps({"profiles": {"p": {**body, "preamble_file": "dir/p.js"}}}))
    with pytest.raises(GrantsError, match="resolves outside the grants directory"):
        load(path, environ={})
    path.write_text(
        '{"profiles": {"p": {"base_url": "https://api.example", "allowed_callers": ["*"],'
        ' "allow": ["GET /a"], "token": {"type": "static", "env": "A", "env": "B"}}}}'
    )
    with pytest.raises(GrantsError, match='duplicate key "env"'):
        load(path, environ={"A": "a-key", "B": "b-key"})


# ---- environment variables that would move or expose the key ----------------------------


def _tls_server(tmp_path):
    """A TLS server on loopback with a throwaway self-signed certificate (via openssl)."""
    import shutil
    import ssl
    import subprocess
    from http.server import ThreadingHTTPServer

    from tests import conftest as prerequisites

    if shutil.which("openssl") is None:
        prerequisites.missing("openssl (to make a test certificate)", "apt-get install openssl")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key),
         "-out", str(cert), "-days", "1", "-subj", "/CN=localhost"],
        check=True, capture_output=True,
    )  # fmt: skip

    class Quiet(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.keylog_filename = None  # type: ignore[assignment]  # only the client's log matters
    tls.load_cert_chain(cert, key)
    server.socket = tls.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def test_sslkeylogfile_does_not_make_the_broker_write_tls_secrets(tmp_path, monkeypatch):
    """Found: Python's ssl honours SSLKEYLOGFILE by itself, so with it set in the host's
    environment every TLS handshake of the broker wrote its secrets to that file, from
    which a captured call (Authorization header included) could be decrypted. The TLS
    handshake here fails (untrusted certificate) after its secrets exist."""
    log = tmp_path / "keys.log"
    monkeypatch.setenv("SSLKEYLOGFILE", str(log))
    server = _tls_server(tmp_path)
    try:
        profile = grant(f"https://localhost:{server.server_address[1]}")
        with Broker(profile, deadline=time.monotonic() + 10) as b:
            assert b(HostRequest("GET", "/v1/items/a", None)).status == 502
    finally:
        server.shutdown()
    written = log.read_text() if log.exists() else ""
    assert "SECRET" not in written


# ---- hostile guest: structured envelopes written by hand -------------------------------

STRUCTURED_ALLOW = (
    "GET /v1/items/*?state=open&page",
    {"route": "GET /v1/search", "query": ["ids"], "headers": ["X-Trace"], "style": {"ids": "form"}},
)


def structured_grant(base_url: str) -> Profile:
    from specgen.allow import parse_entry

    entries = tuple(parse_entry(e) for e in STRUCTURED_ALLOW)
    return Profile(
        name="p",
        base_url=base_url,
        global_name="host",
        allowed_callers=("*",),
        allow=tuple(e.route for e in entries),
        entries=entries,
        token=Secret(KEY),
    )


@pytest.mark.parametrize(
    "envelope",
    [
        # the JSON text can say what a JS object cannot: duplicate and case-folded names
        '{"method":"GET","route":"/v1/items/*","values":["a"],"query":{"page":"1","page":"2"}}',
        '{"method":"GET","route":"/v1/search","headers":{"X-Trace":"a","x-trace":"b"}}',
        '{"method":"GET","route":"/v1/items/*","values":["a"],"query":{"state":"closed"}}',
        '{"method":"GET","route":"/v1/items/*","values":["a"],"query":{"Page":"1"}}',
        '{"method":"GET","route":"/v1/items/*","values":["a"],"query":{"page":["1","2"]}}',
        '{"method":"GET","route":"/v1/items/*","values":["a"],"query":{"page":{"a":"1"}}}',
        '{"method":"GET","route":"/v1/items/*","values":["a"],"query":{"page":[["1"]]}}',
        '{"method":"GET","route":"/v1/items/*","values":[".."]}',
        '{"method":"GET","route":"/v1/items/*","values":["a/b"]}',
        '{"method":"GET","route":"/v1/items/*","values":["a\\\\b"]}',
        '{"method":"GET","route":"/v1/items/*","values":[""]}',
        '{"method":"GET","route":"/v1/items/*","values":[null]}',
        '{"method":"GET","route":"/v1/items/*","values":[{"a":1}]}',
        '{"method":"GET","route":"/v1/items/*","values":["a","b"]}',
        '{"method":"GET","route":"/v1/items/a","path":"/v1/items/a"}',
        '{"method":"GET","path":"/v1/items/a","query":{"page":"1"}}',
        '{"method":"GET","route":"/v1/search","headers":{"Authorization":"Bearer x"}}',
        '{"method":"GET","route":"/v1/search","headers":{"X-Trace":"a\\r\\nHost: evil"}}',
        '{"method":"GET","route":"/v1/search","headers":{"X-Trace\\r\\nHost":"evil"}}',
        '{"method":"GET","route":"/v1/search","headers":{"X-Trace":"a\\u0000"}}',
        '{"method":"GET","route":"/v1/search","body":{"_method":"DELETE"}}',
        '{"method":"GET","route":"/v1/search","type":"text/plain","body":"x"}',
        '{"method":"GET","route":"/v1/items/*","values":["a"],"query":{"page":"'
        + "9" * 9000
        + '"}}',
    ],
)
def test_hand_written_structured_envelopes_reach_nothing(api: FakeAPI, envelope: str) -> None:
    code = f"print(__coderunner_host_call({envelope!r}).status)"
    outcome = run_with_grant(code, structured_grant(api.url))
    assert outcome.result.exit_code == 0, outcome.result.stderr
    assert api.requests == []
    assert outcome.result.stdout in ("400\n", "403\n")


def test_hand_written_structured_envelope_sends_exactly_the_approved_request(api: FakeAPI) -> None:
    envelope = (
        '{"method":"GET","route":"/v1/items/*","values":["a b&c"],'
        '"query":{"page":3,"state":"open"}}'
    )
    code = f"print(__coderunner_host_call({envelope!r}).status)"
    outcome = run_with_grant(code, structured_grant(api.url))
    assert outcome.result.stdout == "200\n", outcome.result.stderr
    assert [(s.method, s.path) for s in api.requests] == [
        ("GET", "/v1/items/a%20b%26c?state=open&page=3")
    ]
