"""What a large request body costs on its way out of the sandbox; printed, never asserted.

Run with `make bench` (PLIMSOLL_BENCH=1), or alone:
`PLIMSOLL_BENCH=1 .venv/bin/python -m pytest -q -s tests/benchmarks/test_bench_bodies.py`.

For each size, one run builds the body in the guest and makes no call, another builds
it and makes one call; the difference (best of REPEAT) is the call's cost: reading the
body out of guest memory, decoding the envelope and the handler's share. The handler
only checks the length, so no HTTP is timed. Rows:

- bytes: a Uint8Array beside the envelope (the generated client's path for octet-stream);
- text: a string beside the envelope (XML, CSV, YAML);
- json string in envelope: the same text as a JSON string inside the envelope (how
  text/plain travelled before), only up to the envelope's 1 MiB + 64 KiB.

Linear means the per-MiB column stays flat as the size grows (no quadratic copy).
"""

from __future__ import annotations

import os
import time

import pytest

from runtime import HostReply, HostRequest
from runtime import run_sandbox as run

pytestmark = pytest.mark.skipif(
    os.environ.get("PLIMSOLL_BENCH") != "1",
    reason="benchmarks run only with PLIMSOLL_BENCH=1 (make bench)",
)

REPEAT = 3
MIB = 1 << 20
SIZES = (MIB // 4, MIB, 4 * MIB, 10 * MIB)


def _handler(request: HostRequest) -> HostReply:
    size = len(request.payload or request.body or b"")
    return HostReply(200, str(size).encode(), "text/plain")


def _best(code: str) -> float:
    times = []
    for _ in range(REPEAT):
        started = time.perf_counter()
        result = run(code, handler=_handler)
        times.append(time.perf_counter() - started)
        assert result.exit_code == 0, result.stderr
    return min(times)


def _cost(build: str, call: str) -> float:
    return _best(build + call) - _best(build + "void body;")


CALL_BESIDE = (
    "const r = globalThis.__coderunner_host_call(JSON.stringify("
    "{method: 'PUT', route: '/b', type: 'application/octet-stream'}), body);"
)
CALL_INSIDE = (
    "const r = globalThis.__coderunner_host_call(JSON.stringify("
    "{method: 'PUT', route: '/b', type: 'text/plain', body: body}));"
)


def test_request_body_cost_by_size() -> None:
    print()
    print(f"{'body':28} {'size':>8} {'call ms':>9} {'ms/MiB':>8}")
    for size in SIZES:
        rows = [
            (
                "bytes beside the envelope",
                f"const body = new Uint8Array({size}).fill(7);",
                CALL_BESIDE,
            ),
            ("text beside the envelope", f"const body = 'x'.repeat({size});", CALL_BESIDE),
        ]
        if size <= MIB:
            rows.append(
                ("json string in envelope", f"const body = 'x'.repeat({size});", CALL_INSIDE)
            )
        for label, build, call in rows:
            cost = _cost(build, call)
            print(
                f"{label:28} {size / MIB:7.2f}M {cost * 1000:9.1f} {cost * 1000 / (size / MIB):8.1f}"
            )
