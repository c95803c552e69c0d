"""What one call costs at 14 routes and at GitHub's 1,222: printed ratios, never asserted.

Run with `make bench` (PLIMSOLL_BENCH=1); needs the corpus (make corpus) for GitHub's
document. Every figure is a ratio against a baseline measured in the same process, in
interleaved rounds (each round runs every variant once), reported as medians, so a
loaded box slows both sides alike; the load average is printed beside them.

- host call: a JS loop of raw `__coderunner_host_call`s (canned reply) minus the same
  loop calling a plain JS function, per call. The baseline of the next two figures.
- client call through the broker: a JS loop of awaited structured calls
  (`host.call({method, route}, values)`) answered by a `Broker` over a canned
  httpx.MockTransport, minus an empty run, per call; once with a 14-entry grant and once
  with GitHub's whole allow list (the called route last in both, where a linear scan
  pays most). Targets: <= 3x the raw host call, 1,222 routes <= 1.2x 14 routes.
- fresh run with a preamble: a run of `console.log(1)` under GitHub's generated client
  (its preamble and allow list, 1,000+ methods) beside the same under the 14-operation
  Agent Memory one (golden/agent-memory). Target <= 1.3x.
- second run's upstream call: a run's first call to a loopback server through a new
  `Broker` for the same profile (what each run of a pool or MCP server pays), beside a
  GET on a long-lived keep-alive httpx client (the loopback floor). Target <= 2x.
- grant view: `specgen.grant_view.allowed` on GitHub's document and full grant (what
  `specgen mcp` runs at start), beside building that document.
- `specgen mcp` start: `runtime.mcp.server.prepare` (the document built and validated,
  the grant's view, its description and catalog) on GitHub's document with its whole
  allow list as the grant, beside the pipeline alone. Target <= 0.7 s.
- `specgen mcp` ready: wall time from starting `specgen mcp` on GitHub's document and full
  grant (stdio) to its answer to `initialize`, beside the same for a bare SDK server with
  one tool (the floor the official SDK's own import and start set): a first start, and
  a start again with what the first derived kept (runtime/mcp/start_cache.py).
- `specgen --help`: CPU seconds of the process (user + system), beside `python -c pass`.
  Target <= 0.1 s.
"""

from __future__ import annotations

import dataclasses
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from runtime import Broker, GuestGrant, HostReply, HostRequest, Limits, Profile, Secret, sandbox
from runtime.mcp.start_cache import entry_path
from specgen.allow import parse_entry
from specgen.routes import Route
from tests.runtime.loopback import FakeAPI

pytestmark = pytest.mark.skipif(
    os.environ.get("PLIMSOLL_BENCH") != "1",
    reason="benchmarks run only with PLIMSOLL_BENCH=1 (make bench)",
)

REPO = Path(__file__).resolve().parents[2]
GITHUB = REPO / ".cache" / "corpus" / "octokit" / "generated" / "api.github.com.json"
TARGET = Route("/repos/*/*/issues/*", "GET")
ROUNDS = 9
CALLS = 300


def _github():  # type: ignore[no-untyped-def]
    if not GITHUB.exists():
        pytest.fail(f"{GITHUB} is missing: run `.venv/bin/python tests/corpus_fetch.py`")
    from specgen import build

    return build.run(str(GITHUB), build.Options(validate=False))


def _grants() -> tuple[tuple[Route, ...], tuple[Route, ...]]:
    entries = [parse_entry(item) for item in json.loads(_github().files["allow.json"])]
    routes = [e.route for e in entries if e.route != TARGET]
    return (*routes[:13], TARGET), (*routes, TARGET)


def _load() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def _rounds(variants: dict[str, Callable[[], float]], rounds: int = ROUNDS) -> dict[str, float]:
    """Median seconds of each variant over interleaved rounds."""
    seen: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(rounds):
        for name, once in variants.items():
            seen[name].append(once())
    return {name: statistics.median(xs) for name, xs in seen.items()}


def _timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


REPLY = HostReply(200, b'{"ok":true}', "application/json")


def _canned(_: HostRequest) -> HostReply:
    return REPLY


def _host_loop(n: int, use_host: bool) -> float:
    code = f"""
const env = JSON.stringify({{method: "GET", path: "/repos/o/r/issues/1"}});
function plain(x) {{ return {{status: 200, body: x}}; }}
const f = {"__coderunner_host_call" if use_host else "plain"};
for (let i = 0; i < {n}; i++) f(env);
"""
    return _timed(lambda: sandbox.run(code, handler=_canned, limits=Limits(max_host_calls=n + 1)))


def _profile(allow: tuple[Route, ...], base_url: str = "https://api.github.com") -> Profile:
    return Profile(
        name="bench",
        base_url=base_url,
        global_name="gh",
        allowed_callers=("*",),
        allow=allow,
        max_calls=100_000,
        token=Secret("bench-token"),
    )


class _Body(httpx.SyncByteStream):
    """A reply body that streams, as a real transport's does (the broker reads it raw)."""

    def __iter__(self):  # type: ignore[no-untyped-def]
        yield b'{"ok":true}'


def _client_loop(allow: tuple[Route, ...], n: int) -> float:
    profile = _profile(allow)
    code = f"""
async function main() {{
  for (let i = 0; i < {n}; i++) await gh.call({{method: "GET", route: "/repos/*/*/issues/*"}}, ["o", "r", i]);
}}
main().catch(e => console.log("failed: " + e.message));
"""
    transport = httpx.MockTransport(
        lambda request: httpx.Response(
            200, headers={"Content-Type": "application/json"}, stream=_Body()
        )
    )

    def once() -> None:
        broker = Broker(profile, transport=transport)
        result = sandbox.run(
            code,
            grant=GuestGrant(global_name="gh", allow=allow),
            handler=broker,
            limits=Limits(max_host_calls=n + 1),
        )
        broker.close()
        assert result.stdout == "" and result.exit_code == 0, result.stdout + result.stderr

    return _timed(once)


def test_bench_client_call_at_14_and_1222_routes() -> None:
    small, github = _grants()
    for _ in range(3):  # warm the engine, the images and the caches
        _host_loop(10, True), _client_loop(small, 1), _client_loop(github, 1)
    t = _rounds(
        {
            "host": lambda: _host_loop(CALLS, True),
            "plain": lambda: _host_loop(CALLS, False),
            "small": lambda: _client_loop(small, CALLS),
            "small0": lambda: _client_loop(small, 0),
            "github": lambda: _client_loop(github, CALLS),
            "github0": lambda: _client_loop(github, 0),
        }
    )
    host = (t["host"] - t["plain"]) / CALLS
    small_call = (t["small"] - t["small0"]) / CALLS
    github_call = (t["github"] - t["github0"]) / CALLS
    print(
        f"\nper call, {CALLS} calls a run, medians of {ROUNDS} interleaved rounds (load {_load()})"
    )
    print(f"  raw host call round trip            {host * 1e6:8.1f} us")
    print(
        f"  client call via broker, {len(small):5} routes {small_call * 1e6:8.1f} us"
        f"   {small_call / host:5.2f}x the host call (target <= 3x)"
    )
    print(
        f"  client call via broker, {len(github):5} routes {github_call * 1e6:8.1f} us"
        f"   {github_call / host:5.2f}x the host call; {github_call / small_call:5.2f}x"
        f" {len(small)} routes (target <= 1.2x)"
    )


def test_bench_second_runs_upstream_call() -> None:
    api = FakeAPI()
    try:
        profile = _profile((TARGET,), base_url=api.url)
        direct = httpx.Client(trust_env=False)
        url = api.url + "/repos/o/r/issues/1"
        headers = {"Accept": "application/json", "Authorization": "Bearer bench-token"}
        call = HostRequest("GET", "/repos/o/r/issues/1", None)

        def run_once() -> float:
            broker = Broker(profile)  # a new run of the same profile
            t0 = time.perf_counter()
            reply = broker(call)
            elapsed = time.perf_counter() - t0
            broker.close()
            assert reply.status == 200
            return elapsed

        def floor() -> float:
            t0 = time.perf_counter()
            direct.get(url, headers=headers).read()
            return time.perf_counter() - t0

        for _ in range(20):
            run_once(), floor()
        t = _rounds({"run": run_once, "floor": floor}, rounds=301)
        direct.close()
    finally:
        api.close()
    print(f"\nupstream call of a new run, loopback, medians of 301 rounds (load {_load()})")
    print(f"  keep-alive GET (floor)  {t['floor'] * 1e3:7.3f} ms")
    print(
        f"  a run's first call      {t['run'] * 1e3:7.3f} ms   {t['run'] / t['floor']:5.2f}x the floor"
        " (target <= 2x)"
    )


def test_bench_grant_view_on_githubs_full_grant() -> None:
    from specgen import build
    from specgen.grant_view import allowed

    result = _github()
    allow = tuple(parse_entry(item) for item in json.loads(result.files["allow.json"]))
    t = _rounds(
        {
            "allowed": lambda: _timed(lambda: allowed(result, allow)),
            "build": lambda: _timed(lambda: build.run(str(GITHUB), build.Options(validate=False))),
        },
        rounds=5,
    )
    print(f"\ngrant view, GitHub's document and its {len(allow)}-entry grant (load {_load()})")
    print(
        f"  allowed()  {t['allowed'] * 1e3:8.1f} ms   {t['allowed'] / t['build']:5.2f}x building"
        f" the document ({t['build'] * 1e3:.0f} ms)"
    )


def _cpu(cmd: list[str]) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, cwd=REPO, check=True, capture_output=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def test_bench_specgen_help_cpu() -> None:
    specgen = str(Path(sys.executable).with_name("specgen"))
    t = _rounds(
        {
            "help": lambda: _cpu([specgen, "--help"]),
            "pass": lambda: _cpu([sys.executable, "-c", "pass"]),
        },
        rounds=7,
    )
    print(f"\nCPU seconds of a process, medians of 7 interleaved rounds (load {_load()})")
    print(f"  python -c pass   {t['pass']:6.3f} s")
    print(
        f"  specgen --help   {t['help']:6.3f} s   {t['help'] / t['pass']:5.2f}x python -c pass"
        " (target <= 0.1 s)"
    )


def _golden_grant(folder: Path, global_name: str) -> GuestGrant:
    allow = tuple(
        parse_entry(item).route for item in json.loads((folder / "allow.json").read_text())
    )
    return GuestGrant(global_name, allow, (folder / "preamble.js").read_text())


def test_bench_fresh_run_by_preamble_size(tmp_path: Path) -> None:
    result = _github()
    github = GuestGrant(
        result.gen.global_name,
        tuple(parse_entry(item).route for item in json.loads(result.files["allow.json"])),
        result.files["preamble.js"],
    )
    small = _golden_grant(REPO / "golden" / "agent-memory", "memory")

    def run(grant: GuestGrant) -> float:
        def once() -> None:
            r = sandbox.run("console.log(1)", grant=grant, handler=_canned)
            assert r.stdout == "1\n", r.stderr

        return _timed(once)

    for _ in range(5):
        run(small), run(github)
    t = _rounds({"small": lambda: run(small), "github": lambda: run(github)}, rounds=101)
    print(f"\nfresh run of console.log(1), medians of 101 interleaved rounds (load {_load()})")
    print(f"  {len(small.allow):5}-route preamble  {t['small'] * 1e3:7.3f} ms")
    print(
        f"  {len(github.allow):5}-route preamble  {t['github'] * 1e3:7.3f} ms"
        f"   {t['github'] / t['small']:5.2f}x (target <= 1.3x)"
    )


def test_bench_mcp_start_on_githubs_full_grant() -> None:
    from runtime.mcp.runner import Grant
    from runtime.mcp.server import prepare
    from specgen import build

    result = _github()
    entries = tuple(parse_entry(item) for item in json.loads(result.files["allow.json"]))
    profile = dataclasses.replace(
        _profile(tuple(e.route for e in entries)), global_name="host", entries=entries
    )
    grant = Grant(profile, "bench", timeout_s=5.0, memory_mb=64)
    prepare(str(GITHUB), grant)  # imports, caches
    t = _rounds(
        {
            "prepare": lambda: _timed(lambda: prepare(str(GITHUB), grant)),
            "pipeline": lambda: _timed(lambda: build.run(str(GITHUB), build.Options())),
        },
        rounds=5,
    )
    print(
        f"\nspecgen mcp start, GitHub's document and a {len(entries)}-entry grant (load {_load()})"
    )
    print(
        f"  prepare()  {t['prepare']:6.3f} s   the pipeline alone {t['pipeline']:6.3f} s"
        f"   {t['prepare'] / t['pipeline']:5.2f}x (target <= 0.7 s)"
    )


_INITIALIZE = (
    json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "bench", "version": "1"},
            },
        }
    )
    + "\n"
).encode()

#: A stdio MCP server with one tool, on the official SDK alone: the floor ours is put beside.
_BARE_SERVER = """
from mcp.server.mcpserver import MCPServer
server = MCPServer("bare")
@server.tool()
def one() -> str:
    return "1"
server.run()
"""


def _ready(argv: list[str], env: dict[str, str]) -> float:
    """Seconds from starting a stdio MCP server to its answer to `initialize`."""
    begun = time.perf_counter()
    proc = subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(_INITIALIZE)
    proc.stdin.flush()
    line = proc.stdout.readline()
    took = time.perf_counter() - begun
    proc.kill()
    proc.wait()
    assert b'"result"' in line, line
    return took


def test_bench_mcp_ready_on_githubs_full_grant(tmp_path: Path) -> None:
    allow = json.loads(_github().files["allow.json"])
    grants = tmp_path / "grants.json"
    profile = {
        "base_url": "https://api.github.com",
        "global": "github",
        "allowed_callers": ["bench"],
        "token": {"type": "static", "env": "BENCH_TOKEN"},
        "allow": allow,
    }
    grants.write_text(json.dumps({"profiles": {"github": profile}}))
    env = {**os.environ, "BENCH_TOKEN": "bench-token"}
    bin_dir = Path(sys.executable).parent
    ours = [str(bin_dir / "specgen"), "mcp", "--grants", str(grants), "--profile", "github"]
    ours += ["--caller", "bench", "--spec", str(GITHUB)]
    bare = [sys.executable, "-c", _BARE_SERVER]
    _ready(ours, env), _ready(bare, env)  # the page cache and bytecode, for both

    def first() -> float:
        """A start with no entry kept for it; the user cache's compiled engine and
        templates stay, as they would for a server started on a new document."""
        entry_path(str(GITHUB), "github", "github").unlink(missing_ok=True)
        return _ready(ours, env)

    t = _rounds(
        {"first": first, "again": lambda: _ready(ours, env), "bare": lambda: _ready(bare, env)},
        rounds=7,
    )
    print(
        f"\nspecgen mcp ready, GitHub's document and its {len(allow)}-entry grant (load {_load()})"
    )
    print(f"  bare SDK server         {t['bare']:6.3f} s")
    for name, what in (("first", "first start"), ("again", "started again")):
        print(
            f"  specgen mcp, {what:13} {t[name]:6.3f} s   {t[name] / t['bare']:5.2f}x the bare"
            " server (target <= 0.7 s)"
        )
