"""The per-grant memory image (runtime/sandbox/snapshot.py): fast, and still a fresh sandbox.

Each claim of the module docstring is asserted by behaviour: a run that rewrites globals,
prototypes and the client leaves nothing for the next run; what the image froze (the
PRNG seed, the time origins) is reset from each run's clock; error positions are the
agent's own lines; `execArgv[2]` is the whole source; a prelude that cannot be imaged
falls back to the stock path with the same result.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest

from runtime import GuestGrant, HostReply, HostRequest, Limits
from runtime import run_sandbox as run
from runtime.sandbox import engine, guest, snapshot
from specgen.allow import parse_entry
from specgen.routes import Route

GRANT = GuestGrant(
    global_name="svc",
    allow=(Route("/v1/items/*", "GET"), Route("/v1/items", "POST")),
    preamble=';(function () { const h = globalThis["svc"]; h["item_get"] = (id) => h.get("/v1/items/" + id); })();',
)


def echo(request: HostRequest) -> HostReply:
    return HostReply(200, json.dumps({"path": request.path}).encode())


@contextlib.contextmanager
def stock_path():
    snapshot.ENABLED = False
    try:
        yield
    finally:
        snapshot.ENABLED = True


def prelude_of(grant: GuestGrant) -> str:
    return guest.compose_source(
        "", global_name=grant.global_name, allow=grant.allow, preamble=grant.preamble
    )


def test_a_grant_gets_an_image_of_a_few_hundred_kib():
    image = snapshot.image_for(engine.get_engine(), prelude_of(GRANT))
    assert image is not None
    assert 0 < image.dirty_bytes < 1 << 20
    assert snapshot.image_for(engine.get_engine(), prelude_of(GRANT)) is image  # cached


def test_a_fourteen_operation_grant_restores_without_growing_memory(monkeypatch):
    # Its image fits the module's own memory (the build's INITIAL_MEMORY_BYTES), so a
    # fresh run changes no page protections: under gVisor each change cost ~80 us.
    folder = Path(__file__).resolve().parents[2] / "golden" / "agent-memory-full"
    allow = tuple(parse_entry(e).route for e in json.loads((folder / "allow.json").read_text()))
    grant = GuestGrant("memory", allow, (folder / "preamble.js").read_text())
    assert len(allow) == 14
    grown: list[object] = []
    real = snapshot.ffi.wasmtime_memory_grow
    monkeypatch.setattr(
        snapshot.ffi, "wasmtime_memory_grow", lambda *a: grown.append(a) or real(*a)
    )
    assert run("print(typeof memory.agent_memory_recall)", grant=grant).stdout == "function\n"
    image = snapshot.image_for(engine.get_engine(), prelude_of(grant))
    assert image is not None and image.pages * snapshot.WASM_PAGE == engine.MIN_MEMORY_MB << 20
    assert grown == []


def test_the_key_covers_the_prelude():
    other = GuestGrant(global_name="svc", allow=GRANT.allow, preamble=GRANT.preamble + " ")
    assert snapshot.image_key(prelude_of(GRANT)) != snapshot.image_key(prelude_of(other))


def test_a_run_that_rewrites_everything_leaves_nothing_for_the_next():
    vandal = """
    globalThis.leftover = 1;
    Object.prototype.polluted = "yes";
    Array.prototype.map = () => "hijacked";
    JSON.stringify = () => "hijacked";
    Math.random = () => 4;
    svc.get = () => Promise.resolve("hijacked");
    svc.item_get = () => "hijacked";
    globalThis.__coderunner_host_call = () => ({status: 200, body: "hijacked"});
    execArgv.push("extra"); execArgv[2] = "rewritten";
    print("done");
    """
    assert run(vandal, grant=GRANT, handler=echo).stdout == "done\n"
    check = """
    print(typeof leftover, ({}).polluted, [1].map((x) => x + 1)[0], JSON.stringify({a: 1}),
          typeof Math.random(), execArgv.length, execArgv[2].startsWith("console.error = "));
    svc.item_get("7").then((v) => print(JSON.stringify(v)));
    """
    r = run(check, grant=GRANT, handler=echo)
    assert (r.exit_code, r.stderr) == (0, "")
    assert r.stdout == 'undefined undefined 2 {"a":1} number 3 true\n{"path":"/v1/items/7"}\n'


def test_math_random_is_reseeded_per_run_and_fixed_clock_runs_match_the_stock_path():
    code = "print(Math.random(), Math.random())"
    real = {run(code, grant=GRANT).stdout for _ in range(3)}
    assert len(real) == 3
    fixed = run(code, grant=GRANT, limits=Limits(clock="fixed")).stdout
    with stock_path():
        assert run(code, grant=GRANT, limits=Limits(clock="fixed")).stdout == fixed


def test_time_origins_come_from_the_run_not_the_image():
    code = "print(performance.timeOrigin, performance.now() >= 0, performance.now() < 1000)"
    fixed = run(code, grant=GRANT, limits=Limits(clock="fixed")).stdout
    with stock_path():
        assert run(code, grant=GRANT, limits=Limits(clock="fixed")).stdout == fixed
    origin, *rest = run(code, grant=GRANT).stdout.split()
    assert 0 <= float(origin) < 1000 and rest == ["true", "true"]  # ms since the run began


def test_errors_point_at_the_agents_own_lines():
    r = run("const a = 1;\n\nnull.x;", grant=GRANT)
    assert r.exit_code == 1 and "(<cmdline>:3:1)" in r.stderr
    r = run("\nnull.x;")
    assert r.exit_code == 1 and "(<cmdline>:2:1)" in r.stderr


def test_exec_argv_is_the_whole_source():
    prelude = prelude_of(GRANT)
    template = (
        "const p = " + json.dumps(prelude) + ";"
        " print(execArgv.length, execArgv[2].startsWith(p),"
        ' execArgv[2].length === p.length + Number("LENGTH"),'
        ' execArgv[2].slice(p.length, p.length + 9) === "const p =")'
    )
    code = template.replace("LENGTH", f"{len(template):06d}")
    assert len(code) == len(template)
    assert run(code, grant=GRANT).stdout == "3 true true true\n"


def test_preamble_declarations_stay_visible_to_the_agent():
    grant = GuestGrant(
        global_name="svc", allow=GRANT.allow, preamble="function helper() { return 5; }"
    )
    assert snapshot.image_for(engine.get_engine(), prelude_of(grant)) is not None
    assert run("print(helper())", grant=grant).stdout == "5\n"


@pytest.mark.parametrize(
    "preamble",
    [
        'print("hello from the preamble");',
        "Promise.reject(new Error('boom'));",
        "svc.get('/v1/items/1');",
        "syntax error here (",
        "setTimeout(() => print('later'), 1);",
    ],
)
def test_a_prelude_that_cannot_be_imaged_runs_the_stock_way(preamble: str):
    grant = GuestGrant(global_name="svc", allow=GRANT.allow, preamble=preamble)
    assert snapshot.image_for(engine.get_engine(), prelude_of(grant)) is None
    code = 'print("agent")'
    got = run(code, grant=grant, handler=echo, limits=Limits(clock="fixed"))
    with stock_path():
        want = run(code, grant=grant, handler=echo, limits=Limits(clock="fixed"))
    assert (got.exit_code, got.stdout, got.stderr) == (want.exit_code, want.stdout, want.stderr)


def test_a_memory_limit_below_the_image_fails_closed():
    r = run("print(1)", grant=GRANT, limits=Limits(memory_mb=1))
    assert r.exit_code == 134 and r.stdout == "" and r.stderr.startswith("guest aborted:")


def test_output_cut_mid_line_is_still_flushed():
    r = run('import * as std from "qjs:std"; std.out.puts("no newline")', grant=GRANT)
    assert (r.exit_code, r.stdout) == (0, "no newline")
