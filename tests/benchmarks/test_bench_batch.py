"""N runs through one batch `specgen run` vs N separate `specgen run` processes; printed, never asserted.

Run with `make bench` (PLIMSOLL_BENCH=1). Every number is the wall time of whole
processes, as an operator sees it: N agent scripts, each making one call through the
grant to a loopback API, run

- separately: N `specgen run FILE` processes one after another (a shell loop; the
  baseline),
- as a batch in one process (`--workers 0`: one engine, the runs one after another),
- as a batch on a RunPool (`--workers` omitted: one warm worker process per core).

The variants are interleaved round by round, so a loaded machine slows every column
alike; medians over the rounds. Three workloads: an API that answers at once (the cost
is start-up and the runs themselves) and one that answers after 100 ms or 500 ms (runs
that wait on the network, where workers overlap the waits but first pay their own
start: an interpreter, the imports, the engine and a warm-up run each).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from tests.runtime.loopback import FakeAPI, Seen, json_ok
from tests.runtime.test_run_cli import KEY, grants_file

pytestmark = pytest.mark.skipif(
    os.environ.get("PLIMSOLL_BENCH") != "1",
    reason="benchmarks run only with PLIMSOLL_BENCH=1 (make bench)",
)

RUNS = int(os.environ.get("PLIMSOLL_BENCH_BATCH_RUNS", "16"))
ROUNDS = 3
SPECGEN = str(Path(sys.executable).with_name("specgen"))
#: Bytecode cached as a user's would be (the harness sets PYTHONDONTWRITEBYTECODE=1).
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
ENV["CLOUDFLARE_API_TOKEN"] = KEY


def _after(delay_s: float) -> Callable[[BaseHTTPRequestHandler, Seen], None]:
    def respond(handler: BaseHTTPRequestHandler, seen: Seen) -> None:
        time.sleep(delay_s)
        json_ok(handler, seen)

    return respond


def _wall(commands: list[list[str]]) -> float:
    start = time.perf_counter()
    for command in commands:
        proc = subprocess.run(command, capture_output=True, env=ENV, check=False)
        if proc.returncode != 0:
            pytest.fail(f"{command[:3]} exited {proc.returncode}: {proc.stderr.decode()[-400:]}")
    return time.perf_counter() - start


def test_bench_batch_vs_separate_processes(tmp_path: Path) -> None:
    grants_file(tmp_path)
    files = []
    for i in range(RUNS):
        path = tmp_path / f"run{i:03}.js"
        path.write_text(f'const r = await memory.items("{i}"); print(r.ok);', "utf-8")
        files.append(str(path))
    workers = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"\n{RUNS} runs, one call each, whole processes; median of {ROUNDS} rounds, seconds")
    print(
        f"  {'API answers':22}{'separate':>10}{'batch -w0':>11}{'batch -w' + str(workers):>11}",
        end="",
    )
    print(f"{'w0 vs sep':>11}{'pool vs sep':>13}")
    for label, delay in (("at once", 0.0), ("after 100 ms", 0.1), ("after 500 ms", 0.5)):
        api = FakeAPI(responder=_after(delay))
        try:
            common = ["--grants", str(tmp_path / "grants.json"), "--profile", "agent-memory"]
            common += ["--caller", "support-agent", "--base-url", api.url, "--json"]
            variants = {
                "separate": [[SPECGEN, "run", f, *common] for f in files],
                "w0": [[SPECGEN, "run", *files, *common, "--workers", "0"]],
                "pool": [[SPECGEN, "run", *files, *common]],
            }
            times: dict[str, list[float]] = {name: [] for name in variants}
            for _ in range(ROUNDS):
                for name, commands in variants.items():
                    times[name].append(_wall(commands))
            assert len(api.requests) == 3 * RUNS * ROUNDS  # every run made its call
        finally:
            api.close()
        sep, w0, pool = (statistics.median(times[n]) for n in ("separate", "w0", "pool"))
        print(f"  {label:22}{sep:10.2f}{w0:11.2f}{pool:11.2f}{sep / w0:10.1f}x{sep / pool:12.1f}x")
