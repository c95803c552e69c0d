"""Sandbox timings, printed side by side with their baselines, never asserted.

Run with `make bench` (PLIMSOLL_BENCH=1). Targets on the 2-core reference machine:
a fresh run p50 <= 6 ms, a host call < 100 us, >= 10x faster than spawning
`node -e` with the same code.

- fresh run: the injected client + a 14-method preamble + ~1 KB of user code + one host
  call answered in-process, a new Store/instance each time; baseline `node -e` with the
  same source (a stub stands in for the host function), spawned as a new process, which
  is what isolating each run with node would cost.
- cold process: `python -c` that imports the sandbox and does one run with a warm module
  cache; baseline `python -c pass`.
- host call: a JS loop of host calls minus the same loop calling a plain JS function.
- runs/s: the fresh-run workload on 1 and on 2 threads.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from runtime import GuestGrant, HostReply, HostRequest, Limits, sandbox
from runtime.sandbox import engine, guest
from specgen.routes import Route

pytestmark = pytest.mark.skipif(
    os.environ.get("PLIMSOLL_BENCH") != "1",
    reason="benchmarks run only with PLIMSOLL_BENCH=1 (make bench)",
)

REPO = Path(__file__).resolve().parents[2]
ALLOW = (*(Route(f"/v1/things/*/op{i}", "POST") for i in range(14)), Route("/v1/things/*", "GET"))
PREAMBLE = "\n".join(
    [";(function () {", '  const h = globalThis["svc"];']
    + [
        f'  h["thing_op{i}"] = (id, body) => h.post("/v1/things/" + id + "/op{i}", body);'
        for i in range(14)
    ]
    + ['  h["thing_get"] = (id) => h.get("/v1/things/" + id);', "})();"]
)
USER_CODE = """
// ~1 KB of ordinary agent code: data shaping, a class, a regexp, JSON, one host call.
class Tally { constructor() { this.n = 0; this.seen = new Map(); }
  add(k, v) { this.n += v; this.seen.set(k, (this.seen.get(k) || 0) + 1); return this; } }
const rows = Array.from({length: 40}, (_, i) => ({id: "t" + i, score: (i * 37) % 11, tag: i % 3 ? "a" : "b"}));
const t = new Tally();
for (const r of rows) t.add(r.tag, r.score);
const words = "the quick brown fox jumps over the lazy dog".split(/\\s+/).map(w => w.toUpperCase());
const summary = {total: t.n, tags: Object.fromEntries(t.seen), words: words.length, top: rows.sort((a, b) => b.score - a.score)[0].id};
async function main() {
  const thing = await svc.thing_get("abc");
  const out = JSON.stringify({summary, thing});
  console.log(out.length > 10 ? "ok " + thing.name : "bad");
}
main().catch(e => console.log("failed: " + e.message));
"""
REPLY = HostReply(200, b'{"name":"widget","id":"abc"}', "application/json")
GRANT = GuestGrant(global_name="svc", allow=ALLOW, preamble=PREAMBLE)


def handler(request: HostRequest) -> HostReply:
    return REPLY


def fresh_run() -> sandbox.RunResult:
    return sandbox.run(USER_CODE, grant=GRANT, handler=handler, limits=Limits(clock="fixed"))


def _pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))]


def _ms(x: float) -> str:
    return f"{x * 1e3:8.2f} ms"


def test_bench_fresh_run_vs_node():
    assert fresh_run().stdout == "ok widget\n"
    for _ in range(20):
        fresh_run()
    times = []
    for _ in range(300):
        t0 = time.perf_counter()
        fresh_run()
        times.append(time.perf_counter() - t0)
    p50 = statistics.median(times)
    print(
        f"\nfresh sandbox run (client + 14-method preamble + {len(USER_CODE)} B code + 1 host call), n=300"
    )
    print(
        f"  p50 {_ms(p50)}   p90 {_ms(_pct(times, 0.9))}   min {_ms(min(times))}   target p50 <= 6 ms"
    )

    node = shutil.which("node")
    if node is None:
        print("  node: not installed, no baseline")
        return
    stub = (
        "globalThis.__coderunner_host_call = () => ({status: 200, body: "
        + repr(REPLY.body.decode())
        + "});\n"
        + "globalThis.__coderunner_host_start = (e) =>"
        + " Promise.resolve(globalThis.__coderunner_host_call(e));\n"
    )
    source = stub + guest.compose_source(
        USER_CODE, global_name="svc", allow=ALLOW, preamble=PREAMBLE
    )
    node_times = []
    for _ in range(15):
        t0 = time.perf_counter()
        proc = subprocess.run([node, "-e", source], capture_output=True, text=True, check=False)
        node_times.append(time.perf_counter() - t0)
    assert proc.stdout == "ok widget\n", proc.stderr
    node_p50 = statistics.median(node_times)
    print(f"  node -e, same source, new process each, n=15: p50 {_ms(node_p50)}")
    print(f"  ratio node / sandbox: {node_p50 / p50:.1f}x   target >= 10x")


def test_bench_cold_process_with_warm_cache():
    engine.get_engine()  # make sure the cache is warm
    code = (
        "from runtime import run_sandbox; r = run_sandbox('print(6*7)'); assert r.stdout == '42\\n'"
    )

    def wall(cmd: list[str]) -> float:
        times = []
        for _ in range(7):
            t0 = time.perf_counter()
            subprocess.run(cmd, cwd=REPO, check=True, capture_output=True)
            times.append(time.perf_counter() - t0)
        return statistics.median(times)

    base = wall([sys.executable, "-c", "pass"])
    cold = wall([sys.executable, "-c", code])
    print(
        f"\ncold process, warm module cache, one run: p50 {_ms(cold)}   (python -c pass: {_ms(base)}; no ~1.2 s compile)"
    )


def test_bench_host_call_round_trip():
    n = 2000
    loop = f"""
const env = JSON.stringify({{method: "GET", path: "/v1/things/abc"}});
function plain(x) {{ return {{status: 200, body: x}}; }}
const f = globalThis.USE_HOST ? __coderunner_host_call : plain;
for (let i = 0; i < {n}; i++) f(env);
"""

    def timed(prefix: str, clock) -> float:
        best = float("inf")
        for _ in range(5):
            t0 = clock()
            r = sandbox.run(prefix + loop, handler=handler, limits=Limits(max_host_calls=n))
            best = min(best, clock() - t0)
            assert r.exit_code == 0, r.stderr
        return best

    def native(use_host: bool, clock) -> float:
        """The same loop in native QuickJS (PyPI `quickjs`), the host a Python callable
        answering the same reply: what a call out of the engine costs without wasm."""
        import quickjs

        best = float("inf")
        for _ in range(5):
            ctx = quickjs.Context()
            ctx.add_callable("__coderunner_host_call", lambda env: '{"status":200,"body":"{}"}')
            t0 = clock()
            ctx.eval(("globalThis.USE_HOST = true;" if use_host else "") + loop)
            best = min(best, clock() - t0)
        return best

    # Wall time, and this thread's CPU time, which other processes on a loaded box
    # disturb far less (the whole loop runs on this thread).
    print(f"\nhost call round trip (loop of {n}, best of 5, plain-JS loop subtracted)")
    for label, clock in (("wall", time.perf_counter), ("thread CPU", time.thread_time)):
        host, plain = timed("globalThis.USE_HOST = true;", clock), timed("", clock)
        per_call = (host - plain) / n
        base = (native(True, clock) - native(False, clock)) / n
        print(
            f"  {label:10}: {per_call * 1e6:5.1f} us   target <= 30 us (issue 10; issue 3: < 100 us)"
            f"   native QuickJS {base * 1e6:5.1f} us, ratio {per_call / base:.1f}x"
        )


def test_bench_runs_per_second_on_threads():
    def rate(threads: int, per_thread: int = 150) -> float:
        def work() -> None:
            for _ in range(per_thread):
                fresh_run()

        ts = [threading.Thread(target=work) for _ in range(threads)]
        t0 = time.perf_counter()
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        return threads * per_thread / (time.perf_counter() - t0)

    one, two = rate(1), rate(2)
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(
        f"\nload average before: {load} (other processes on the box skew the thread numbers)",
        end="",
    )
    print(
        f"\nruns/s, fresh-run workload: 1 thread {one:7.0f}/s   2 threads {two:7.0f}/s   speed-up {two / one:.2f}x"
    )
