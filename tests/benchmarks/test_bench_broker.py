"""Broker overhead per allowed call, printed beside a direct httpx call; never asserted.

Run with `make bench` (PLIMSOLL_BENCH=1). Both columns hit the same real HTTP server on
127.0.0.1 with the same request in the same process, interleaved call by call so a
noisy machine slows both alike:

- direct: one long-lived httpx.Client sending the GET with the same headers.
- broker: `Broker.__call__` (capacity, budget, route rules and allow match, URL
  re-check, fresh headers, streamed capped read, trace row) on its own client.

Target: the broker adds under 1 ms at p50.
"""

from __future__ import annotations

import os
import statistics
import time

import httpx
import pytest

from runtime import Broker, HostRequest, Profile, Secret
from specgen.routes import parse_route_line
from tests.runtime.loopback import FakeAPI

pytestmark = pytest.mark.skipif(
    os.environ.get("PLIMSOLL_BENCH") != "1",
    reason="benchmarks run only with PLIMSOLL_BENCH=1 (make bench)",
)

CALLS = 2000
WARMUP = 100
PATH = "/client/v4/accounts/00000000000000000000000000000042/agent-memory/namespaces/support-agent/profiles/customer-42/memories/01JFAKEMEM0000000000000001"


def _pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p * len(ordered)))]


def test_broker_overhead_per_allowed_call() -> None:
    api = FakeAPI()
    try:
        allow = tuple(
            parse_route_line(line)
            for line in (
                "POST /client/v4/accounts/00000000000000000000000000000042/agent-memory/namespaces/support-agent/profiles/customer-42/remember",
                "POST /client/v4/accounts/00000000000000000000000000000042/agent-memory/namespaces/support-agent/profiles/customer-42/recall",
                "GET /client/v4/accounts/00000000000000000000000000000042/agent-memory/namespaces/support-agent/profiles/customer-42/memories/*",
            )
        )
        grant = Profile(
            name="bench",
            base_url=api.url,
            global_name="memory",
            allowed_callers=("*",),
            allow=allow,
            max_calls=100_000,
            token=Secret("bench-token"),
        )
        broker = Broker(grant)
        direct = httpx.Client(trust_env=False)
        headers = {
            "Accept": "application/json",
            "Accept-Encoding": "identity",
            "Authorization": "Bearer bench-token",
        }
        url = api.url + PATH
        d_times: list[float] = []
        b_times: list[float] = []
        for i in range(WARMUP + CALLS):
            t0 = time.perf_counter()
            r = direct.get(url, headers=headers)
            _ = r.content
            t1 = time.perf_counter()
            reply = broker(HostRequest("GET", PATH, None))
            t2 = time.perf_counter()
            assert r.status_code == 200 and reply.status == 200
            if i >= WARMUP:
                d_times.append((t1 - t0) * 1000)
                b_times.append((t2 - t1) * 1000)
        broker.close()
        direct.close()
    finally:
        api.close()

    d50, b50 = statistics.median(d_times), statistics.median(b_times)
    print()
    print(f"broker overhead, {CALLS} GET calls each against a loopback server (ms)")
    print(f"{'':10}{'p50':>8}{'p90':>8}{'p99':>8}")
    for name, xs in (("direct", d_times), ("broker", b_times)):
        print(f"{name:10}{statistics.median(xs):8.3f}{_pct(xs, 0.9):8.3f}{_pct(xs, 0.99):8.3f}")
    print(f"added at p50: {b50 - d50:.3f} ms (target < 1 ms); ratio broker/direct {b50 / d50:.2f}")
