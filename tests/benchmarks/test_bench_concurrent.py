"""Concurrent host calls, printed beside the old synchronous path; never asserted.

Run with `make bench` (PLIMSOLL_BENCH=1). A real HTTP server on 127.0.0.1 answers each
request after 200 ms; every run goes through `run_with_grant` (sandbox + broker), so the
numbers are what an agent's code would see against an API with that latency.

- promise: the client's methods (`host.get`), which start calls through
  `__coderunner_host_start` and return promises that the host settles.
- synchronous: the same calls through the reference's blocking `__coderunner_host_call`,
  which is what every client method used to do.

Workloads: 10 calls through `Promise.all` (target < 0.3 s; about 2 s synchronously),
20 calls through `Promise.all` with 16 in flight (target < 0.5 s), and a sequential
`for ... await` loop of 5 calls (target: as fast as the synchronous path).
"""

from __future__ import annotations

import os
import statistics
import time
from http.server import BaseHTTPRequestHandler

import pytest

from runtime import Limits, run_with_grant
from tests.runtime.loopback import FakeAPI, Seen, profile

pytestmark = pytest.mark.skipif(
    os.environ.get("PLIMSOLL_BENCH") != "1",
    reason="benchmarks run only with PLIMSOLL_BENCH=1 (make bench)",
)

LATENCY_S = 0.2
REPEAT = 3

SYNC_GET = """
function get(p) {
  const r = __coderunner_host_call(JSON.stringify({method: "GET", path: p}));
  if (r.status < 200 || r.status > 299) throw new Error("host api " + r.status);
  return JSON.parse(r.body);
}
"""

WORKLOADS = {
    "10 calls, Promise.all": (
        'const r = await Promise.all(Array.from({length: 10}, (_, i) => host.get("/v1/items/" + i)));',
        'const r = await Promise.all(Array.from({length: 10}, (_, i) => Promise.resolve(get("/v1/items/" + i))));',
        "< 0.3 s",
    ),
    "20 calls, Promise.all": (
        'const r = await Promise.all(Array.from({length: 20}, (_, i) => host.get("/v1/items/" + i)));',
        'const r = await Promise.all(Array.from({length: 20}, (_, i) => Promise.resolve(get("/v1/items/" + i))));',
        "< 0.5 s",
    ),
    "5 calls, for ... await": (
        'for (let i = 0; i < 5; i++) await host.get("/v1/items/" + i);',
        'for (let i = 0; i < 5; i++) await get("/v1/items/" + i);',
        "as fast as synchronous",
    ),
}


def _slow(handler: BaseHTTPRequestHandler, seen: Seen) -> None:
    time.sleep(LATENCY_S)
    body = b'{"ok":true}'
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


def _time(api: FakeAPI, code: str) -> tuple[float, float]:
    """Median seconds of (the guest's run, the whole run_with_grant) over REPEAT runs."""
    grant = profile(api.url, "bench-key", ("GET /v1/items/*",))
    guest, whole = [], []
    for _ in range(REPEAT):
        began = time.perf_counter()
        out = run_with_grant(code, grant, limits=Limits(timeout_s=30))
        whole.append(time.perf_counter() - began)
        guest.append(out.result.duration_s)
        assert out.result.exit_code == 0, out.result.stderr
    return statistics.median(guest), statistics.median(whole)


def test_bench_concurrent_host_calls() -> None:
    api = FakeAPI(responder=_slow)
    try:
        _time(api, "1")  # the engine loads once per process; not part of any number
        _, empty = _time(api, "1")
        print(f"\nhost calls against a loopback API answering after {LATENCY_S * 1000:.0f} ms")
        print(f"median of {REPEAT} runs, seconds: the guest's run (whole run_with_grant)")
        print(f"{'workload':24}{'promise':>16}{'synchronous':>16}{'ratio':>8}   target")
        for name, (promise_code, sync_code, target) in WORKLOADS.items():
            concurrent = _time(api, promise_code)
            blocking = _time(api, SYNC_GET + sync_code)
            print(
                f"{name:24}{concurrent[0]:7.3f} ({concurrent[1]:.3f}){blocking[0]:7.3f} "
                f"({blocking[1]:.3f}){blocking[0] / concurrent[0]:7.1f}x   {target}"
            )
        print(f"(an empty run_with_grant takes {empty:.3f} s: a broker, a sandbox, an audit)")
    finally:
        api.close()
