"""What each isolation tier costs; printed, never asserted.

Run with `PLIMSOLL_BENCH=1 .venv/bin/python -m pytest -q -s tests/benchmarks/test_bench_tiers.py`.
Every call goes to the same loopback API (tests/runtime/loopback.py), so what differs
between the tiers is where the engine runs:

Every figure is a median over rounds that run each tier once in turn (interleaved), so
the tiers are measured side by side.

- a host call: (a run making N awaited calls - a run making none) / N, per tier, and
  what the pipe adds to one call over the process tier (target: at most 40 us), for
  calls the broker refuses itself (past the profile's max_calls: no upstream, so the
  pipe is most of what is measured) and for calls answered by the loopback API;
- a fresh run (`print`), warm engine and image, median, per tier and as a ratio of
  the process tier (targets: worker <= 1.5x, gvisor <= 3x);
- starting one engine process (paid once per pool worker, not per run);
- RunPool throughput on the worker tier, 2 workers against 1 (target: >= 1.8x).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from runtime import RunPool, load_grants, run_with_grant
from runtime.tiers.boundary import EngineProcess, run_isolated
from tests.benchmarks.test_bench_grant_size import _rounds, _timed
from tests.runtime.loopback import FakeAPI
from tests.runtime.test_run_cli import KEY, grants_file

pytestmark = pytest.mark.skipif(
    os.environ.get("PLIMSOLL_BENCH") != "1",
    reason="benchmarks run only with PLIMSOLL_BENCH=1 (make bench)",
)

CALLER = "support-agent"
CALLS = 200
FRESH = 200


def _timing(run: Callable[[], object]) -> Callable[[], float]:
    """`run` as `_rounds` takes it: a call that returns how long it took."""
    return lambda: _timed(run)


def test_bench_tiers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLOUDFLARE_API_TOKEN", KEY)
    path = grants_file(tmp_path)
    api = FakeAPI()
    profile = load_grants(path).select("agent-memory", CALLER).with_base_url(api.url)
    (tmp_path / "capped").mkdir()
    capped = load_grants(grants_file(tmp_path / "capped", max_calls=1)).select(
        "agent-memory", CALLER
    )
    capped = capped.with_base_url(api.url)
    calls = f"for (let i = 0; i < {CALLS}; i++) await memory.items(String(i)); print('done');"
    refused = (
        f"for (let i = 0; i < {CALLS}; i++) {{ try {{ await memory.items(String(i)); }}"
        " catch (e) {} } print('done');"
    )
    quiet = 'print("x")'

    starts: dict[str, float] = {}
    engines: dict[str, EngineProcess] = {}
    for tier in ("worker", "gvisor"):
        begun = time.perf_counter()
        engines[tier] = EngineProcess(tier, hidden=[path])
        starts[tier] = time.perf_counter() - begun

    def runner(tier: str, code: str, grant=profile):
        if tier == "process":
            return lambda: run_with_grant(code, grant, caller=CALLER)
        return lambda: run_isolated(engines[tier], code, grant, caller=CALLER)

    tiers = ("process", "worker", "gvisor")
    for tier in tiers:
        runner(tier, quiet)()  # the image, and the broker's first client
        for code, grant in ((calls, profile), (refused, capped)):
            outcome = runner(tier, code, grant)()
            assert outcome.result.stdout == "done\n", outcome.result.stderr
    fresh = _rounds({tier: _timing(runner(tier, quiet)) for tier in tiers}, rounds=FRESH)
    runs = _rounds(
        {
            f"{tier} {kind}": _timing(runner(tier, code, grant))
            for tier in tiers
            for kind, code, grant in (
                ("calls", calls, profile),
                ("refused", refused, capped),
                ("quiet", quiet, profile),
            )
        },
        rounds=7,
    )
    per_call = {t: (runs[f"{t} calls"] - runs[f"{t} quiet"]) / CALLS for t in tiers}
    per_refused = {t: (runs[f"{t} refused"] - runs[f"{t} quiet"]) / CALLS for t in tiers}

    print(
        f"\n{'tier':10}{'fresh run':>12}{'vs process':>12}{'refused call':>14}{'pipe adds':>11}"
        f"{'API call':>11}{'pipe adds':>11}{'engine start':>14}"
    )
    for tier in ("process", "worker", "gvisor"):
        start = f"{starts[tier]:.2f} s" if tier in starts else "-"
        print(
            f"{tier:10}{fresh[tier] * 1e3:>9.2f} ms{fresh[tier] / fresh['process']:>11.2f}x"
            f"{per_refused[tier] * 1e6:>11.1f} us"
            f"{(per_refused[tier] - per_refused['process']) * 1e6:>8.1f} us"
            f"{per_call[tier] * 1e6:>8.1f} us{(per_call[tier] - per_call['process']) * 1e6:>8.1f} us"
            f"{start:>14}"
        )
    for engine in engines.values():
        engine.close()
    api.close()

    work = "let s = 0; for (let i = 0; i < 300000; i++) s += i % 7; print(s);"
    rates = {}
    for workers in (1, 2):
        with RunPool(path, workers=workers, isolation="worker") as pool:
            for f in [pool.submit(work, "agent-memory", caller=CALLER) for _ in range(4)]:
                f.result()
            begun = time.perf_counter()
            futures = [pool.submit(work, "agent-memory", caller=CALLER) for _ in range(60)]
            for f in futures:
                assert f.result().result.exit_code == 0
            rates[workers] = 60 / (time.perf_counter() - begun)
    print(
        f"RunPool worker tier, CPU-bound runs: 1 worker {rates[1]:.1f}/s, 2 workers"
        f" {rates[2]:.1f}/s: {rates[2] / rates[1]:.2f}x ({len(os.sched_getaffinity(0))} cores)"
    )
