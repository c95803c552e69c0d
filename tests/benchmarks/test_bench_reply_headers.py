"""What handing response headers to the guest costs per host call, printed, never asserted.

Run with `make bench` (PLIMSOLL_BENCH=1). The same JS loop of blocking host calls, its
handler answering in-process, three ways: a refusal-shaped reply (`{status, body}`, the
shape every call had before response headers), an upstream answer with only
`content-type` (the reply object gains one `headers` string property), and one with
four headers; then the client's body form and its `$response` form (which parses the
headers JSON and builds the result object) over the same four-header reply.
Target: the extra property costs a few microseconds a call, far below an HTTP exchange.
"""

from __future__ import annotations

import os
import time

import pytest

from runtime import GuestGrant, HostReply, HostRequest, Limits, run_sandbox
from specgen.routes import parse_route_line

pytestmark = pytest.mark.skipif(
    os.environ.get("PLIMSOLL_BENCH") != "1",
    reason="benchmarks run only with PLIMSOLL_BENCH=1 (make bench)",
)

CALLS = 3000
REPEATS = 15
GRANT = GuestGrant(allow=(parse_route_line("GET /v1/items/*"),))
BODY = b'{"id":1,"name":"x"}'
FOUR = (
    ("content-type", "application/json"),
    ("etag", '"5f3c"'),
    ("link", '<https://api.example/v1/items?page=2>; rel="next"'),
    ("x-ratelimit-remaining", "4999"),
)
RAW = (
    f"for (let i = 0; i < {CALLS}; i++) "
    '__coderunner_host_call(JSON.stringify({method: "GET", path: "/v1/items/1"}));'
)
BODY_FORM = f'for (let i = 0; i < {CALLS}; i++) await host.get("/v1/items/1");'
CLIENT = f'for (let i = 0; i < {CALLS}; i++) await host.$response.get("/v1/items/1");'


def _per_call_us(code: str, reply: HostReply) -> float:
    def handler(_request: HostRequest) -> HostReply:
        return reply

    limits = Limits(max_host_calls=CALLS + 10, timeout_s=120)
    best = float("inf")
    for _ in range(REPEATS):
        started = time.perf_counter()
        result = run_sandbox(code, grant=GRANT, handler=handler, limits=limits)
        best = min(best, time.perf_counter() - started)
        assert result.exit_code == 0, result
    return best / CALLS * 1e6


def test_bench_reply_headers() -> None:
    refusal = HostReply(200, BODY, "application/json")
    typed = HostReply(200, BODY, "application/json", headers=FOUR[:1], upstream=True)
    four = HostReply(200, BODY, "application/json", headers=FOUR, upstream=True)
    rows = [
        ("raw call, {status, body}", _per_call_us(RAW, refusal)),
        ("raw call, + headers (content-type)", _per_call_us(RAW, typed)),
        ("raw call, + headers (4)", _per_call_us(RAW, four)),
        ("host.get (body form), 4 headers", _per_call_us(BODY_FORM, four)),
        ("host.$response.get, 4 headers parsed", _per_call_us(CLIENT, four)),
    ]
    print()
    for name, us in rows:
        print(f"  {name:<38} {us:6.1f} us/call (best of {REPEATS}, {CALLS} calls)")
