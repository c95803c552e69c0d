"""Concurrent host calls: the client's promises fan out through the broker.

Every test runs real agent code in the sandbox against a real loopback API, through the
broker, so "in flight together", "never more than 16" and "cancelled at the end" are
observed where the requests land: the server counts its concurrent requests and records
when a client hangs up.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler

import pytest

from runtime import Limits, RunOutcome, run_with_grant, sandbox
from runtime.broker import MAX_IN_FLIGHT
from runtime.contract import HostReply, HostRequest
from runtime.sandbox.bridge import MAX_PENDING_CALLS
from tests.runtime.loopback import FakeAPI, Seen, hang, profile

KEY = "concurrent-key-8b2f"
ALLOW = ("GET /v1/items/*", "GET /v1/slow/*", "GET /v1/fail/*")


class Gauge:
    """A responder that answers after a delay set by the path and counts the requests
    it is serving at once (the most it ever served together is `peak`)."""

    def __init__(self, delay_s: float = 0.1, fill: int = 0) -> None:
        self.delay_s = delay_s
        #: Hold each request until this many are being served at once (or 5 s passed),
        #: so a test of the in-flight limit does not depend on how fast a loaded machine
        #: puts the calls on the wire.
        self.fill = fill
        self.lock = threading.Condition()
        self.now = 0
        self.peak = 0

    def __call__(self, handler: BaseHTTPRequestHandler, seen: Seen) -> None:
        with self.lock:
            self.now += 1
            self.peak = max(self.peak, self.now)
            self.lock.notify_all()
            self.lock.wait_for(lambda: self.peak >= self.fill, timeout=5.0)
        try:
            name = seen.path.rsplit("/", 1)[-1]
            delay = self.delay_s * (3 if "/slow/" in seen.path else 1)
            time.sleep(delay)
            status = 500 if "/fail/" in seen.path else 200
            body = json.dumps({"name": name}).encode()
            handler.send_response(status)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(body)))
            handler.end_headers()
            handler.wfile.write(body)
        finally:
            with self.lock:
                self.now -= 1


@pytest.fixture(autouse=True, scope="module")
def _warm_engine() -> None:
    """Load the engine first, so the short deadlines below time the calls, not the load."""
    sandbox.run("1")


def run(api: FakeAPI, code: str, *, max_calls: int = 256, timeout_s: float = 10.0) -> RunOutcome:
    return run_with_grant(
        code,
        profile(api.url, KEY, ALLOW, max_calls=max_calls),
        limits=Limits(timeout_s=timeout_s),
    )


def test_results_follow_the_calls_not_the_order_they_finish(api: FakeAPI) -> None:
    api.responder = Gauge(0.05)
    code = """
    const got = await Promise.all([
      host.get("/v1/slow/a"), host.get("/v1/items/b"), host.get("/v1/items/c"),
    ]);
    console.log(got.map(x => x.name).join(","));
    """
    out = run(api, code)
    assert (out.result.exit_code, out.result.stdout) == (0, "a,b,c\n"), out.result.stderr
    # The slow call finished last but keeps the number of when it was made.
    rows = out.trace.rows
    assert [(r.seq, r.route) for r in rows] == [
        (1, "/v1/slow/*"),
        (2, "/v1/items/*"),
        (3, "/v1/items/*"),
    ]
    assert rows[0].latency_ms > max(rows[1].latency_ms, rows[2].latency_ms)
    assert '"calls":[{"seq":1,"method":"GET","route":"/v1/slow/*"' in out.audit


def test_calls_made_before_an_await_are_in_flight_together(api: FakeAPI) -> None:
    gauge = Gauge(0.2, fill=10)
    api.responder = gauge
    code = """
    const ids = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10];
    const got = await Promise.all(ids.map(id => host.get("/v1/items/" + id)));
    console.log(got.length);
    """
    out = run(api, code)
    assert out.result.stdout == "10\n", out.result.stderr
    assert gauge.peak == 10
    assert len(api.requests) == 10


def test_an_error_rejects_only_its_own_promise(api: FakeAPI) -> None:
    api.responder = Gauge(0.02)
    code = """
    const got = await Promise.allSettled([
      host.get("/v1/items/a"), host.get("/v1/fail/b"), host.get("/v1/nope"), host.get("/v1/items/d"),
    ]);
    for (const r of got) console.log(r.status, r.status === "fulfilled" ? r.value.name : r.reason.message);
    """
    out = run(api, code)
    assert out.result.exit_code == 0, out.result.stderr
    assert out.result.stdout.splitlines() == [
        "fulfilled a",
        'rejected host api 500: {"name": "b"}',
        "rejected host api call not permitted by sandbox capability: GET /v1/nope",
        "fulfilled d",
    ]


def test_the_budget_counts_calls_in_flight(api: FakeAPI) -> None:
    api.responder = Gauge(0.1)
    code = """
    const got = await Promise.allSettled([1, 2, 3, 4, 5].map(i => host.get("/v1/items/" + i)));
    console.log(got.map(r => r.status === "fulfilled" ? r.value.name : r.reason.message).join("|"));
    """
    out = run(api, code, max_calls=3)
    assert out.result.stdout == (
        "1|2|3|host api 429: host api call budget for this run is exhausted"
        "|host api 429: host api call budget for this run is exhausted\n"
    ), out.result.stderr
    assert sorted(s.path for s in api.requests) == [f"/v1/items/{i}" for i in (1, 2, 3)]
    assert (len(out.trace.rows), out.trace.denied) == (3, 2)


def test_the_sandbox_host_call_cap_counts_started_calls() -> None:
    started: list[str] = []

    def handler(request: HostRequest) -> HostReply:
        started.append(request.path)
        return HostReply(200, b"{}")

    code = """
    const start = globalThis.__coderunner_host_start;
    const got = await Promise.all([1, 2, 3].map(i => start(JSON.stringify({method: "GET", path: "/x/" + i}))));
    console.log(got.map(r => r.status).join(","));
    """
    res = sandbox.run(code, handler=handler, limits=Limits(max_host_calls=2))
    assert res.stdout == "200,200,429\n", res.stderr
    assert sorted(started) == ["/x/1", "/x/2"]


def test_never_more_than_the_in_flight_limit_and_the_rest_queue(api: FakeAPI) -> None:
    gauge = Gauge(0.1, fill=MAX_IN_FLIGHT)
    api.responder = gauge
    code = """
    const ids = Array.from({length: 40}, (_, i) => i);
    const got = await Promise.all(ids.map(id => host.get("/v1/items/" + id)));
    console.log(got.map(x => x.name).join(",") === ids.join(","));
    """
    out = run(api, code, timeout_s=20.0)
    assert out.result.stdout == "true\n", out.result.stderr
    assert gauge.peak == MAX_IN_FLIGHT == 16
    assert len(api.requests) == 40
    assert [r.seq for r in out.trace.rows] == list(range(1, 41))
    assert all(r.status == 200 and r.delivered for r in out.trace.rows)
    assert out.trace.denied == 0


def test_the_deadline_cancels_calls_in_flight_and_the_audit_shows_them(api: FakeAPI) -> None:
    events: list[str] = []
    api.responder = hang(events, seconds=10.0)
    code = """
    await Promise.all(Array.from({length: 20}, (_, i) => host.get("/v1/items/" + i)));
    console.log("never");
    """
    began = time.monotonic()
    out = run(api, code, timeout_s=2.0)
    took = time.monotonic() - began
    # The broker's deadline is taken a moment before the sandbox starts its clock, so the
    # guest may see its calls fail (502) just before its own time runs out (124).
    assert out.result.exit_code in (1, 124)
    assert out.result.stdout == ""
    assert took < 3.5, took  # the deadline, not the 10 s the server would hold a call
    # 16 were on the wire, 4 waited for a slot: all 20 keep their row, in call order.
    assert [(r.seq, r.status, r.delivered) for r in out.trace.rows] == [
        (i, 0, False) for i in range(1, 21)
    ]
    assert out.audit.count('"status":0') == 20
    assert len(api.requests) <= MAX_IN_FLIGHT
    _wait_for(lambda: len(events) == len(api.requests))
    assert set(events) <= {"client left"}


def test_a_run_that_throws_cancels_its_calls_at_once(api: FakeAPI) -> None:
    events: list[str] = []
    api.responder = hang(events, seconds=10.0)
    code = """
    import * as os from "qjs:os";
    host.get("/v1/items/1");
    host.get("/v1/items/2");
    await new Promise(r => os.setTimeout(r, 300));  // the calls go out meanwhile
    throw new Error("done with it");
    """
    began = time.monotonic()
    out = run(api, code, timeout_s=8.0)
    took = time.monotonic() - began
    assert out.result.exit_code == 1
    assert "done with it" in out.result.stderr
    assert took < 2.0, took  # not the 8 s deadline nor the 10 s the server would wait
    assert [(r.seq, r.status, r.delivered) for r in out.trace.rows] == [
        (1, 0, False),
        (2, 0, False),
    ]
    # Both were on the wire and were hung up on, not left to run.
    _wait_for(lambda: events == ["client left", "client left"])


def test_calls_never_sent_get_their_row_when_the_run_exits(api: FakeAPI) -> None:
    """Calls beyond the first 16 are still queued when the guest exits: each keeps its
    row (status 0) in call order, and none reaches the API afterwards."""
    events: list[str] = []
    api.responder = hang(events, seconds=10.0)
    code = """
    import * as std from "qjs:std";
    import * as os from "qjs:os";
    for (let i = 0; i < 20; i++) host.get("/v1/items/" + i);
    await new Promise(r => os.setTimeout(r, 300));
    std.exit(3);
    """
    out = run(api, code, timeout_s=8.0)
    assert out.result.exit_code == 3
    assert [r.seq for r in out.trace.rows] == list(range(1, 21))
    assert {(r.status, r.delivered) for r in out.trace.rows} == {(0, False)}
    # How many of the first 16 reached the wire in the guest's 300 ms depends on the
    # machine's load; what must hold is that no more than 16 ever did, that each one the
    # API saw was hung up on, and that no queued call is sent after the run.
    _wait_for(lambda: len(events) == len(api.requests))
    sent = len(api.requests)
    assert 0 < sent <= MAX_IN_FLIGHT
    assert set(events) == {"client left"}
    time.sleep(0.2)
    assert len(api.requests) == sent


def test_sleep_between_calls_uses_the_guest_clock(api: FakeAPI) -> None:
    api.responder = Gauge(0.01)
    code = """
    import * as os from "qjs:os";
    const sleep = ms => new Promise(r => os.setTimeout(r, ms));
    const t0 = Date.now();
    const a = await host.get("/v1/items/a");
    await sleep(3000);
    const [b, c] = await Promise.all([host.get("/v1/items/b"), sleep(1000).then(() => host.get("/v1/items/c"))]);
    console.log(a.name + b.name + c.name, Date.now() - t0 >= 4000);
    """
    for clock in ("real", "fixed"):
        began = time.monotonic()
        out = run_with_grant(
            code,
            profile(api.url, KEY, ALLOW),
            limits=Limits(timeout_s=2.0, clock=clock),  # type: ignore[arg-type]
        )
        assert out.result.stdout == "abc true\n", (clock, out.result.stderr)
        assert time.monotonic() - began < 1.5  # 4 s of sleeps cost no wall time


def test_a_timer_the_clock_has_reached_fires_while_a_call_is_out(api: FakeAPI) -> None:
    """With a call in flight, a timer waits for the real clock, so a guest's own
    timeout around a slow call (Promise.race) fires when it should, not at once."""
    api.responder = Gauge(0.1)  # /v1/slow/ answers after 0.3 s
    code = """
    import * as os from "qjs:os";
    const within = (p, ms) => Promise.race([p, new Promise(r => os.setTimeout(() => r("late"), ms))]);
    console.log(JSON.stringify(await within(host.get("/v1/items/quick"), 2000)));
    console.log(JSON.stringify(await within(host.get("/v1/slow/s"), 50)));
    """
    out = run(api, code)
    assert out.result.stdout == '{"name":"quick"}\n"late"\n', out.result.stderr


def test_plain_handlers_run_started_calls_on_worker_threads() -> None:
    """A handler without `start` is called on the run's worker threads, concurrently."""
    barrier = threading.Barrier(4, timeout=5)

    def handler(request: HostRequest) -> HostReply:
        barrier.wait()  # only returns once four calls are in the handler together
        deadline = sandbox.host_call_deadline()
        return HostReply(200, json.dumps({"has_deadline": deadline is not None}).encode())

    code = """
    const go = p => globalThis.__coderunner_host_start(JSON.stringify({method: "GET", path: p}));
    const got = await Promise.all(["/a", "/b", "/c", "/d"].map(go));
    console.log(got.map(r => r.body).join(""));
    """
    res = sandbox.run(code, handler=handler, limits=Limits(timeout_s=5))
    assert res.stdout == '{"has_deadline": true}' * 4 + "\n", res.stderr


@pytest.mark.parametrize("bad", ["", "undefined", "{", "[]"])
def test_started_envelopes_are_refused_like_blocking_ones(bad: str) -> None:
    called: list[HostRequest] = []

    def handler(request: HostRequest) -> HostReply:
        called.append(request)
        return HostReply(200, b"")

    code = f"""
    const a = globalThis.__coderunner_host_call({json.dumps(bad)});
    const b = await globalThis.__coderunner_host_start({json.dumps(bad)});
    console.log(a.status === b.status && a.body === b.body, b.status);
    """
    res = sandbox.run(code, handler=handler)
    assert res.stdout.startswith("true 4"), res.stderr
    assert called == []


def test_a_started_envelope_whose_tostring_throws_throws_at_the_call() -> None:
    code = """
    const evil = {toString() { throw new Error("nope"); }};
    try { globalThis.__coderunner_host_start(evil); } catch (e) { console.log("caught", e.message); }
    try { globalThis.__coderunner_host_start(); } catch (e) { console.log(e.name); }
    """
    res = sandbox.run(code, handler=lambda r: HostReply(200, b""))
    assert res.stdout == "caught nope\nTypeError\n", res.stderr


def test_an_invalid_status_rejects_the_started_call() -> None:
    code = """
    try { await globalThis.__coderunner_host_start('{"method":"GET","path":"/x"}'); }
    catch (e) { console.log(e.name, e.message); }
    """
    res = sandbox.run(code, handler=lambda r: HostReply(700, b""))
    assert res.stdout == "InternalError host api bridge returned an invalid response\n"


def test_raw_host_call_stays_synchronous() -> None:
    """The reference's contract: the reply object comes back from the call itself."""
    code = """
    const r = globalThis.__coderunner_host_call('{"method":"GET","path":"/x"}');
    console.log(typeof r.then, r.status, r.body);
    """
    res = sandbox.run(code, handler=lambda r: HostReply(201, b"ok"))
    assert res.stdout == "undefined 201 ok\n", res.stderr


def _wait_for(condition, timeout_s: float = 3.0) -> None:  # type: ignore[no-untyped-def]
    stop = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < stop, "condition not reached"
        time.sleep(0.02)


def test_starting_calls_without_ever_awaiting_is_bounded() -> None:
    """Unsettled started calls hold host memory; past the cap the call throws."""
    calls: list[str] = []

    def handler(request: HostRequest) -> HostReply:
        calls.append(request.path)
        return HostReply(200, b"")

    code = """
    const start = globalThis.__coderunner_host_start;
    const first = start("not json");
    let n = 1;
    try { for (;;) { start("not json"); n++; } }
    catch (e) { console.log(e.name, e.message, n); }
    console.log((await first).status);  // the loop settles every reply waiting
    const r = await start('{"method":"GET","path":"/after"}');
    console.log(r.status);
    """
    res = sandbox.run(code, handler=handler, limits=Limits(timeout_s=10))
    assert res.stdout == (
        f"RangeError too many host api calls waiting for a reply {MAX_PENDING_CALLS}\n400\n200\n"
    ), res.stderr
    assert calls == ["/after"]


def test_a_lone_awaited_call_is_answered_on_the_guest_thread() -> None:
    """A `for ... await` loop costs what blocking calls cost: no worker hand-off per
    call. A batch started before the guest yields goes to the workers."""
    threads: list[str] = []

    def handler(request: HostRequest) -> HostReply:
        threads.append(threading.current_thread().name)
        return HostReply(200, b"{}")

    code = """
    const go = p => globalThis.__coderunner_host_start(JSON.stringify({method: "GET", path: p}));
    for (const p of ["/a", "/b", "/c"]) await go(p);
    await Promise.all([go("/d"), go("/e")]);
    """
    res = sandbox.run(code, handler=handler)
    assert res.exit_code == 0, res.stderr
    assert len(threads) == 5
    assert not any(t.startswith("plimsoll-host-call") for t in threads[:3]), threads
    assert all(t.startswith("plimsoll-host-call") for t in threads[3:]), threads
