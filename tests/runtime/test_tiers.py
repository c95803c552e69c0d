"""The isolation tiers as operators use them: RunPool, `specgen run` and their refusals.

The wall itself (what an escaped engine process can reach) is test_isolation_wall.py;
here: runs on the worker tier give the process tier's answers with the tier named, the
key stays in the broker's process (the engine's memory comes back for a scan, the key
never goes out), engine processes are replaced when they die, and a tier that cannot
start is refused in one line, never replaced by a weaker one.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from runtime import GrantsError, RunPool, load_grants
from runtime.cli import run
from runtime.tiers import launch
from runtime.tiers.launch import IsolationError
from tests.runtime.loopback import FakeAPI
from tests.runtime.test_run_cli import KEY, MINE, grants_file

CALLER = "support-agent"
RECALL = f'const r = await memory.post("{MINE}/recall", {{query: "q"}}); print(JSON.stringify(r));'


@pytest.fixture
def api() -> Iterator[FakeAPI]:
    fake = FakeAPI()
    yield fake
    fake.close()


@pytest.fixture(scope="module")
def worker_pool(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RunPool, Path]]:
    path = grants_file(tmp_path_factory.mktemp("tiers"))
    mp = pytest.MonkeyPatch()
    mp.setenv("CLOUDFLARE_API_TOKEN", KEY)
    with RunPool(path, workers=2, isolation="worker") as pool:
        yield pool, path
    mp.undo()


def test_a_run_on_the_worker_tier_answers_as_in_process_and_names_its_tier(
    worker_pool: tuple[RunPool, Path], api: FakeAPI
) -> None:
    pool, path = worker_pool
    profile = load_grants(path).select("agent-memory", CALLER).with_base_url(api.url)
    outcome = pool.run(RECALL, profile, caller=CALLER, trace_id="t-1")
    assert outcome.result.exit_code == 0, outcome.result.stderr
    assert outcome.result.stdout == '{"ok":true}\n'
    record = json.loads(outcome.audit)
    assert list(record)[:3] == ["profile", "trace_id", "isolation"]
    assert record["isolation"] == "worker"
    assert [(c["status"], c["delivered"]) for c in record["calls"]] == [(200, True)]
    # The broker in this process attached the key the pool loaded.
    assert [s.headers["authorization"] for s in api.requests] == [f"Bearer {KEY}"]
    assert pool.run('print("by name")', "agent-memory", caller=CALLER).result.stdout == "by name\n"


def test_a_caller_the_profile_does_not_list_is_refused(worker_pool: tuple[RunPool, Path]) -> None:
    pool, _ = worker_pool
    with pytest.raises(GrantsError):
        pool.run('print("x")', "agent-memory", caller="someone-else")
    with pytest.raises(GrantsError):
        pool.run('print("x")', "no-such-profile", caller=CALLER)


def test_scan_memory_searches_the_engines_memory_here_the_key_never_goes_there(
    worker_pool: tuple[RunPool, Path],
) -> None:
    pool, _ = worker_pool
    planted = pool.run(
        f'const k = "{KEY}"; print(k.length);', "agent-memory", caller=CALLER, scan_memory=True
    )
    assert planted.memory_hits > 0  # the scan does read the guest's memory
    clean = pool.run('print("x")', "agent-memory", caller=CALLER, scan_memory=True)
    assert clean.memory_hits == 0


def test_a_killed_engine_process_ends_its_run_with_the_audit_and_is_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, api: FakeAPI
) -> None:
    monkeypatch.setenv("CLOUDFLARE_API_TOKEN", KEY)
    path = grants_file(tmp_path)
    profile = load_grants(path).select("agent-memory", CALLER).with_base_url(api.url)
    with RunPool(path, workers=1, isolation="worker") as pool:
        future = pool.submit(
            f'await memory.post("{MINE}/recall", {{query: "q"}}); while (true) {{}}',
            profile,
            caller=CALLER,
            timeout_s=20,
        )
        while not api.requests:
            pass
        for pid in _engine_groups():
            os.killpg(pid, signal.SIGKILL)
        outcome = future.result(timeout=30)
        assert outcome.result.internal_error == "EngineDied"
        record = json.loads(outcome.audit)
        assert record["isolation"] == "worker"
        assert [(c["status"], c["delivered"]) for c in record["calls"]] == [(200, True)]
        assert pool.run('print("after")', profile, caller=CALLER).result.stdout == "after\n"


def _engine_groups() -> list[int]:
    """Process groups led by a bwrap this process started (the pool's engines)."""
    me = os.getpid()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            cmd = (entry / "cmdline").read_bytes().split(b"\0")[0]
        except OSError:
            continue
        if int(stat[1]) == me and cmd.endswith(b"bwrap"):
            found.append(int(entry.name))
    return found


def test_a_tier_whose_program_is_missing_is_refused_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLOUDFLARE_API_TOKEN", KEY)
    monkeypatch.setenv("PATH", str(tmp_path))  # neither bwrap nor runsc on it
    path = grants_file(tmp_path)
    with pytest.raises(IsolationError, match=r"^--isolation worker: bwrap is not installed"):
        RunPool(path, workers=1, isolation="worker")
    with pytest.raises(IsolationError, match=r"^--isolation gvisor: bwrap is not installed"):
        RunPool(path, workers=1, isolation="gvisor")
    code = tmp_path / "a.js"
    code.write_text('print("x")', "utf-8")
    for tier in ("worker", "gvisor"):
        result = CliRunner().invoke(
            run,
            [
                str(code),
                "--grants",
                str(path),
                "--profile",
                "agent-memory",
                "--caller",
                CALLER,
                "--isolation",
                tier,
            ],
            env={"CLOUDFLARE_API_TOKEN": KEY, "PATH": str(tmp_path)},
        )
        assert result.exit_code == 1
        assert result.stderr.count("\n") == 1 and "is not installed" in result.stderr
        assert "x" not in result.stdout  # nothing ran on a weaker tier instead


def test_runsc_missing_refuses_gvisor_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = launch.shutil.which
    monkeypatch.setattr(launch.shutil, "which", lambda p: None if p == "runsc" else real(p))
    with pytest.raises(IsolationError, match=r"^--isolation gvisor: runsc is not installed"):
        launch.command("gvisor")
    assert launch.command("worker")[0].endswith("bwrap")


def test_an_engine_that_cannot_start_is_refused_not_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """bwrap present but unable to build the sandbox (here: a fake that fails as bwrap
    does without user namespaces): the pool refuses in one line naming the failure."""
    fake = tmp_path / "bwrap"
    fake.write_text(
        "#!/bin/sh\necho 'bwrap: No permissions to creating new namespace' >&2\nexit 1\n"
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    monkeypatch.setenv("CLOUDFLARE_API_TOKEN", KEY)
    with pytest.raises(IsolationError, match=r"did not start: .*No permissions to creating new"):
        RunPool(grants_file(tmp_path), workers=1, isolation="worker")


def test_a_grants_file_inside_a_visible_folder_is_covered() -> None:
    import runtime

    inside = Path(runtime.__file__).parent / "__init__.py"  # exists, and is in the view
    argv = launch.command("worker", [inside])
    at = [i for i, a in enumerate(argv) if a == str(inside.resolve())]
    assert at and argv[at[-1] - 1] == "/dev/null" and argv[at[-1] - 2] == "--ro-bind"


def test_the_cli_batch_and_json_name_the_tier(tmp_path: Path, api: FakeAPI) -> None:
    path = grants_file(tmp_path)
    files = []
    for name in ("a.js", "b.js"):
        (tmp_path / name).write_text(f'await memory.items("{name}"); print("{name}")', "utf-8")
        files.append(str(tmp_path / name))
    base = ["--grants", str(path), "--profile", "agent-memory", "--caller", CALLER, "--json"]
    base += ["--base-url", api.url]
    env = {"CLOUDFLARE_API_TOKEN": KEY}
    batch = CliRunner().invoke(run, [*files, *base, "--workers", "2"], env=env)
    assert batch.exit_code == 0, batch.stderr
    records = [json.loads(line) for line in batch.stdout.splitlines()]
    assert [(r["isolation"], r["audit"]["isolation"]) for r in records] == [
        ("worker", "worker")
    ] * 2
    one = CliRunner().invoke(run, [files[0], *base, "--isolation", "worker"], env=env)
    assert json.loads(one.stdout)["isolation"] == "worker"
    refused = CliRunner().invoke(
        run, [*files, *base, "--isolation", "worker", "--workers", "0"], env=env
    )
    assert refused.exit_code == 1 and "--workers 0" in refused.stderr


PROGRAMS = [
    RECALL,
    'const r = await Promise.all(["a", "b", "c"].map(i => memory.items(i)));'
    " print(r.map(x => x.ok).join());",
    'memory.items("started, never awaited"); print("left");',
    'try { await memory.get("/not/allowed"); } catch (e) { print(String(e)); }',
    'throw new Error("boom")',
    "while (true) {}",
    'print("x".repeat(100000))',
    "for (let i = 0; i < 3; i++) { try { await memory.items(String(i)); }"
    " catch (e) { print(String(e)); } }",
]


def _same(outcome) -> tuple:
    record = json.loads(outcome.audit)
    assert record.pop("isolation") in ("process", "worker")
    for call in record["calls"]:
        call.pop("latency_ms")
    result = outcome.result
    return (result.stdout, result.stderr, result.exit_code, result.timed_out, record)


@pytest.mark.parametrize("code", PROGRAMS)
def test_the_worker_tier_answers_exactly_as_the_process_tier(
    worker_pool: tuple[RunPool, Path], api: FakeAPI, code: str
) -> None:
    from runtime import run_profile

    pool, path = worker_pool
    grant = load_grants(path).select("agent-memory", CALLER).with_base_url(api.url)
    if "i < 3" in code:  # past the budget: the broker refuses the third call itself
        capped = path.parent / "capped"
        capped.mkdir(exist_ok=True)
        grant = load_grants(grants_file(capped, max_calls=2)).select("agent-memory", CALLER)
        grant = grant.with_base_url(api.url)
    here = run_profile(code, grant, caller=CALLER, timeout_s=1)
    there = pool.run(code, grant, caller=CALLER, timeout_s=1)
    assert _same(there) == _same(here)


#: A stand-in engine process that speaks the protocol until the run starts, then asks
#: for calls without ever reading a reply: the pipe to it fills up.
DEAF_ENGINE = """
import os, sys
sys.path[:0] = [ROOT]
from runtime.tiers import wire
reader = wire.FrameReader(0)
wire.write_frame(1, {"t": "hello", "pid": os.getpid()})
while True:
    frame, _ = reader.read()
    if frame["t"] == "warm":
        wire.write_frame(1, {"t": "ready"})
    elif frame["t"] == "run":
        break
call = {"method": "GET", "path": "/v1/items/x", "has_body": False, "has_payload": False,
        "route": None, "values": [], "query": [], "headers": [], "media_type": None}
for i in range(100_000):
    wire.write_frame(1, {"t": "call", "id": i, **call})
"""


def test_an_engine_that_stops_reading_cannot_stall_the_broker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys
    import threading
    import time

    from runtime import Limits
    from runtime.tiers import boundary

    monkeypatch.setenv("CLOUDFLARE_API_TOKEN", KEY)
    root = str(Path(__file__).resolve().parents[2])
    script = f"ROOT = {root!r}\n" + DEAF_ENGINE
    monkeypatch.setattr(launch, "command", lambda *a, **k: [sys.executable, "-c", script])
    monkeypatch.setattr(boundary, "SEND_TIMEOUT_S", 1.0)
    # Every call is refused at once (budget 1, then 429), so replies pile up fast.
    profile = load_grants(grants_file(tmp_path, max_calls=1)).select("agent-memory", CALLER)
    engine = boundary.EngineProcess("worker")
    outcomes: list = []
    runner = threading.Thread(
        target=lambda: outcomes.append(
            boundary.run_isolated(
                engine, 'print("x")', profile, caller=CALLER, limits=Limits(timeout_s=20)
            )
        ),
        daemon=True,
    )
    begun = time.monotonic()
    runner.start()
    runner.join(timeout=15)
    assert outcomes, "the broker was stuck writing to an engine that does not read"
    assert time.monotonic() - begun < 15
    outcome = outcomes[0]
    assert outcome.result.internal_error == boundary.ENGINE_DIED
    assert json.loads(outcome.audit)["denied"] > 100  # it did answer, until the pipe was full
    assert not engine.alive


def test_the_mcp_servers_runs_default_to_the_worker_tier(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from runtime.mcp.runner import GrantError, open_grant

    monkeypatch.setenv("CLOUDFLARE_API_TOKEN", KEY)
    path = grants_file(tmp_path)
    grant = open_grant(path, "agent-memory", CALLER, workers=1)
    try:
        assert grant._pool is not None and grant._pool.isolation == "worker"
        assert grant.run('print("served")').stdout == "served\n"
    finally:
        grant._pool.close()
    assert open_grant(path, "agent-memory", CALLER, workers=0)._pool is None  # process tier
    with pytest.raises(GrantError, match="--workers 0"):
        open_grant(path, "agent-memory", CALLER, workers=0, isolation="worker")
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(GrantError, match=r"^--isolation gvisor: bwrap is not installed"):
        open_grant(path, "agent-memory", CALLER, workers=1, isolation="gvisor")


def test_a_fault_reading_an_engine_frame_still_ends_the_run_with_its_audit(
    worker_pool: tuple[RunPool, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever a decoder misses (here: one that raises a TypeError), a run on an isolated
    tier ends as the engine's protocol breach, with its audit line, never as an exception
    out of the broker."""
    from runtime.tiers import boundary, wire

    def broken(*_args: object, **_kwargs: object) -> object:
        raise TypeError("a frame shape no decoder expected")

    monkeypatch.setattr(wire, "result_from", broken)
    pool, _ = worker_pool
    outcome = pool.run('print("x")', "agent-memory", caller=CALLER)
    assert outcome.result.internal_error == boundary.ENGINE_PROTOCOL
    assert json.loads(outcome.audit)["isolation"] == "worker"


def test_the_worker_tier_starts_on_a_machine_whose_cache_folder_does_not_exist_yet(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new user's first run: no cache folder, no compiled engine. The engine process
    sees the cache read-only, so the starting process compiles and caches the engine
    first; before, bubblewrap refused to bind the missing folder and no run started."""
    from runtime import Limits
    from runtime.sandbox.engine import cache_path
    from runtime.tiers import boundary
    from specgen.cache_dir import CACHE_ENV

    fresh = tmp_path / "home" / ".cache" / "plimsoll-specgen"
    monkeypatch.setenv(CACHE_ENV, str(fresh))
    monkeypatch.setenv("CLOUDFLARE_API_TOKEN", KEY)
    profile = load_grants(grants_file(tmp_path)).select("agent-memory", CALLER)
    engine = boundary.EngineProcess("worker")
    try:
        outcome = boundary.run_isolated(
            engine, 'print("first")', profile, caller=CALLER, limits=Limits(timeout_s=20)
        )
    finally:
        engine.close()
    assert outcome.result.exit_code == 0, outcome.result.internal_error or outcome.result.stderr
    assert outcome.result.stdout == "first\n"
    assert cache_path().is_file()  # compiled once, where every later engine process loads it


def test_an_engine_process_gets_each_grant_once_and_runs_name_it_by_number(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run's frame carries the grant's number, not its allow list and preamble again;
    past MAX_GRANTS the oldest is forgotten on both sides and sent again when needed."""
    from runtime.tiers import boundary

    monkeypatch.setenv("CLOUDFLARE_API_TOKEN", KEY)
    monkeypatch.setattr(boundary, "MAX_GRANTS", 2)
    base = load_grants(grants_file(tmp_path)).select("agent-memory", CALLER)
    profiles = [
        base.with_preamble(f';(function () {{ globalThis["memory"].which = () => {n}; }})();')
        for n in range(3)
    ]
    engine = boundary.EngineProcess("worker")
    sent: list[dict] = []
    real_send = engine.send
    monkeypatch.setattr(
        engine, "send", lambda header, blob=b"": (sent.append(header), real_send(header, blob))[1]
    )
    try:

        def which(profile) -> str:
            outcome = boundary.run_isolated(engine, "print(memory.which())", profile, caller=CALLER)
            assert outcome.result.exit_code == 0, outcome.result.stderr
            return outcome.result.stdout

        assert [which(p) for p in (profiles[0], profiles[0], profiles[1])] == ["0\n", "0\n", "1\n"]
        warms = [f for f in sent if f["t"] == "warm"]
        runs = [f for f in sent if f["t"] == "run"]
        assert [(w["ref"], w["forget"]) for w in warms] == [(1, []), (2, [])]
        assert [r["grant"] for r in runs] == [1, 1, 2]
        assert all(set(r) == {"t", "code", "grant", "limits", "probe", "spin_us"} for r in runs)
        # A third grant makes the engine forget the least recently used (0's); 0, then
        # 1, come back under new numbers, each pushing out the oldest in its turn.
        assert [which(p) for p in (profiles[2], profiles[0], profiles[1])] == ["2\n", "0\n", "1\n"]
        warms = [f for f in sent if f["t"] == "warm"]
        assert [(w["ref"], w["forget"]) for w in warms[2:]] == [(3, [1]), (4, [2]), (5, [3])]
        # A forgotten grant's parts are let go here too (the identity cache held them).
        assert len(engine._keys) == boundary.MAX_GRANTS
    finally:
        engine.close()


_SEEN_FROM_INSIDE = """
import hashlib, os
entry = {entry!r}
try:
    open(os.path.join(os.path.dirname(entry), "planted"), "w")
    writable = True
except OSError:
    writable = False
digest = hashlib.sha256(open(entry, "rb").read()).hexdigest()
result = [digest, writable, open("/tmp/scratch", "w").write("x")]
"""


@pytest.mark.parametrize("tier", ["worker", "gvisor"])
def test_an_engine_process_sees_its_folders_when_they_lie_under_tmp(
    tier: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cache folder or checkout under /tmp (PLIMSOLL_CACHE_DIR there, a CI clone) is
    bound over the engine's scratch tmpfs, not hidden under it. Hidden, each engine
    process found an empty folder there, compiled the engine itself (half a second of
    every start) into its own scratch space; a virtual environment there would not
    have been seen at all."""
    from runtime.sandbox.engine_file import cache_path, ensure_cached
    from runtime.tiers.boundary import EngineProcess
    from specgen.cache_dir import CACHE_ENV

    folder = Path(tempfile.mkdtemp(dir="/tmp"))  # tmp_path may be elsewhere (TMPDIR)
    try:
        monkeypatch.setenv(CACHE_ENV, str(folder / "cache"))
        ensure_cached()
        entry = cache_path()
        engine = EngineProcess(tier, escape_hook=True)
        try:
            engine.send({"t": "escape", "source": _SEEN_FROM_INSIDE.format(entry=str(entry))})
            frame, _ = engine.read(time.monotonic() + 60)
        finally:
            engine.close()
        mine = hashlib.sha256(entry.read_bytes()).hexdigest()
    finally:
        shutil.rmtree(folder)
    # The operator's folder, read-only, beside a writable scratch space; the entry is
    # this one (one compiled there is sealed under another secret).
    assert frame == {"t": "escaped", "result": [mine, False, 1]}, frame


def test_a_folder_that_holds_tmp_is_not_bound_over_the_scratch_space(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """PLIMSOLL_CACHE_DIR=/tmp: its bind would cover the engine's scratch tmpfs with the
    host's /tmp (read-only, and every other user's files in it)."""
    from runtime.sandbox import engine_file
    from specgen.cache_dir import CACHE_ENV

    monkeypatch.setattr(engine_file, "ensure_cached", lambda: None)  # nothing written to /tmp
    monkeypatch.setenv(CACHE_ENV, "/tmp")
    assert Path("/tmp") not in launch.visible_folders()
    for tier in ("worker", "gvisor"):
        argv = launch.command(tier)
        binds = [argv[i + 1] for i, a in enumerate(argv) if a in ("--ro-bind", "--bind")]
        assert not any(Path("/tmp").is_relative_to(b) for b in binds if b != "/dev/null")
        assert argv.index("--tmpfs") < argv.index("--ro-bind")  # scratch first, then binds


_BROKER_SIDE_PROBE = """
import json, sys
import runtime.mcp.cli, runtime.mcp.server
from runtime import RunPool, load_grants
grants, url, caller, code, tier = sys.argv[1:]
with RunPool(grants, workers=1, isolation=tier) as pool:
    profile = load_grants(grants).select("agent-memory", caller).with_base_url(url)
    outcome = pool.run(code, profile, caller=caller)
engine_side = ("wasmtime", "runtime.sandbox.runner", "runtime.sandbox.vm", "runtime.sandbox.engine")
print(json.dumps([outcome.result.stdout, sorted(m for m in sys.modules if m in engine_side)]))
"""


@pytest.mark.parametrize("tier", ["worker", "gvisor"])
def test_the_process_holding_the_key_never_loads_the_engine_on_an_isolated_tier(
    tier: str, tmp_path: Path, api: FakeAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The key's process starts engine processes and answers their calls; the engine,
    wasmtime and the code that drives QuickJS are theirs alone (a start of `specgen mcp`
    loaded them for nothing, ~30 ms). The compiled engine is cached first, in a cache
    folder of the test's own, as a start finds it on a machine that has run anything:
    only a miss loads wasmtime there, to compile it."""
    from runtime.sandbox.engine_file import ensure_cached
    from specgen.cache_dir import CACHE_ENV

    cache = tmp_path / "cache"
    env = {**os.environ, "CLOUDFLARE_API_TOKEN": KEY, CACHE_ENV: str(cache)}
    monkeypatch.setenv(CACHE_ENV, str(cache))
    ensure_cached()
    path = grants_file(tmp_path)
    probe = subprocess.run(
        [sys.executable, "-c", _BROKER_SIDE_PROBE, str(path), api.url, CALLER, RECALL, tier],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert probe.returncode == 0, probe.stderr[-2000:]
    assert json.loads(probe.stdout) == ['{"ok":true}\n', []]
    assert [s.headers["authorization"] for s in api.requests] == [f"Bearer {KEY}"]
