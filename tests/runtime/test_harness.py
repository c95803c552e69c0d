"""A randomised harness: generated hostile guests against the Python API and `specgen run`.

Every run must end with a well-formed audit record whatever the guest does, no exception
may escape the Python API, and host memory must stay bounded. A seeded
generator (so a failure names the seed that reproduces it) composes each program from
fragments: host calls granted and not, raw envelopes good and bad, sleeps and timers
(huge ones past 2^64 ns included), output floods with control characters, throws of
anything, unhandled rejections, deep recursion, large allocations, exits, syntax errors
and busy loops. A loopback API answers granted calls with 200s, 503s, slow replies,
replies over the size cap, replies echoing the key and dropped connections.

`make test` runs PLIMSOLL_HARNESS=200 API runs (the default) and a twentieth as many
(at least 20) through `specgen run --json` in a subprocess; set PLIMSOLL_HARNESS=5000
for thousands. Each test prints its counts (`pytest -s` shows them).
"""

from __future__ import annotations

import collections
import json
import os
import random
import subprocess
import sys
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

import runtime
from runtime import Limits, run_with_grant
from runtime.refusals import RULES as refusal_rules
from tests.runtime.loopback import FakeAPI, Seen, profile

KEY = "harness-key-7Qm2vX9pL4sT8wZ1nB6cR3yH5jK0dF"
RUNS = int(os.environ.get("PLIMSOLL_HARNESS", "200"))
CLI_RUNS = max(20, RUNS // 20)
SEED = int(os.environ.get("PLIMSOLL_HARNESS_SEED", "20261202"))
ALLOW = ("GET /h/*", "POST /h/*", "DELETE /h/item/*")
#: Host RSS may grow by at most this much over a whole harness (warm-up excluded).
RSS_GROWTH_LIMIT = 384 << 20
EXIT_CODES = {
    0,
    runtime.EXIT_ERROR,
    runtime.EXIT_TIMEOUT,
    runtime.EXIT_TRAP,
    *range(2, 8),  # the generator's own std.exit codes
}
AUDIT_KEYS = ["profile", "trace_id", "isolation", "calls", "denied", "dropped", "routes"]
RULES = set(refusal_rules)
FAILURES = {
    None,
    "unreachable",
    "timeout",
    "tls",
    "too_large",
    "bad_response",
    "key_reflected",
    "cancelled",
}


def _responder(handler: BaseHTTPRequestHandler, seen: Seen) -> None:
    """Granted calls get a reply chosen by the last path segment."""
    kind = seen.path.rsplit("/", 1)[-1]
    if kind == "drop":
        handler.close_connection = True
        return
    status, body = 200, b'{"ok":true}'
    if kind == "busy":
        status, body = 503, b'{"error":"busy"}'
    elif kind == "slow":
        time.sleep(0.05)
    elif kind == "big":
        body = b"x" * ((4 << 20) + 10)
    elif kind == "echo":
        body = json.dumps({"seen": seen.headers.get("authorization", "")}).encode()
    elif kind == "echo64":
        import base64

        body = base64.b64encode(seen.headers.get("authorization", "").encode())
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


KINDS = ["ok", "busy", "slow", "big", "echo", "echo64", "drop"]


def _str(rng: random.Random) -> str:
    pieces = ["plain", "\\x1b[2J", "\\u202e", "\\r", "audit: {}", "\\x9b", "\\t", "é", "\\n"]
    return "".join(rng.choice(pieces) for _ in range(rng.randint(1, 4)))


def _fragment(rng: random.Random) -> tuple[str, str]:
    """One piece of a guest program and the category it is counted under."""
    kind = rng.choice(KINDS)
    choice = rng.randrange(20)
    if choice == 0:
        return f'await host.get("/h/{kind}").catch(e => console.log(e.message));', "granted"
    if choice == 1:
        return (
            f'host.post("/h/{kind}", {{n: {rng.randint(0, 99)}}}).then(r => console.log(r));',
            "granted",
        )
    if choice == 2:
        return 'await host.del("/h/item/x").catch(e => 0);', "granted"
    if choice == 3:
        path = rng.choice(["/nope", "/h/../etc", "/h/%2e%2e", "//h/x", "/h/item"])
        return f'await host.del("{path}").catch(e => console.log(e.message));', "denied"
    if choice == 4:
        raw = rng.choice(
            [
                '"{bad"',
                '"x".repeat(1200000)',
                'JSON.stringify({method: "GET", path: "/h/ok", extra: 1})',
                'JSON.stringify({method: "GET", path: "/h/ok"})',
                "{toString() { throw new Error('t') }}",
                "12",
            ]
        )
        return f"try {{ __coderunner_host_call({raw}); }} catch (e) {{}}", "raw"
    if choice == 5:
        ms = rng.choice(["1", "1000", "1e9", "1.7e13", "1e300", "Infinity", "NaN", "-5"])
        return f"os.sleep({ms});", "sleep"
    if choice == 6:
        n, ms = rng.choice([1, 10, 500, 3000]), rng.choice(["0", "5", "1e13", "1e300"])
        return f"for (let i = 0; i < {n}; i++) os.setTimeout(() => {{}}, {ms});", "timers"
    if choice == 7:
        n = rng.choice([1, 100, 5000])
        return f'for (let i = 0; i < {n}; i++) console.log("{_str(rng)}" + i);', "flood"
    if choice == 8:
        return f'std.err.puts("{_str(rng)}".repeat({rng.choice([1, 1000, 100000])}));', "flood"
    if choice == 9:
        value = rng.choice(["new Error('boom')", "5", "null", "undefined", "{}", "Symbol()"])
        return f"if (Math.random() < 2) throw {value};", "throw"
    if choice == 10:
        return f"Promise.reject(new Error('r{rng.randint(0, 9)}'));", "rejection"
    if choice == 11:
        n = rng.choice([1, 2000])
        return f"for (let i = 0; i < {n}; i++) Promise.reject(i);", "rejection"
    if choice == 12:
        return "function f() { return f() + 1 } try { f() } catch (e) { console.log(e.name) }", (
            "recursion"
        )
    if choice == 13:
        return "function g() { g() } g();", "recursion"
    if choice == 14:
        mb = rng.choice([1, 16, 200])
        return f"let big = new Uint8Array({mb} * 1048576); big[7] = 1;", "memory"
    if choice == 15:
        return f"std.exit({rng.randint(2, 7)});", "exit"
    if choice == 16:
        return "let x = ;", "syntax"
    if choice == 17:
        return "for (let i = 0; i < 1e5; i++) {}", "cpu"
    if choice == 18 and rng.random() < 0.15:
        return "while (true) {}", "busy-loop"
    return f'console.log(JSON.stringify(Date.now() > 0), "{_str(rng)}");', "plain"


def generate(rng: random.Random) -> tuple[str, list[str]]:
    parts, kinds = [], []
    for _ in range(rng.randint(1, 6)):
        part, kind = _fragment(rng)
        parts.append(part)
        kinds.append(kind)
    header = 'import * as os from "qjs:os"; import * as std from "qjs:std";\n'
    return header + "\n".join(parts) + "\n", kinds


def check_audit(record: dict, where: str) -> None:
    """A well-formed audit record: fixed keys, rows from the allow list, every call counted."""
    # `refused` only when the broker refused a call; `shed` only when the breaker did
    assert [k for k in record if k not in ("refused", "shed")] == AUDIT_KEYS, where
    refused = record.get("refused", [])
    assert all(r["rule"] in RULES for r in refused), where
    assert ("refused" in record) == bool(refused), where
    broker_denied = sum(1 for r in refused if r["rule"] != "breaker_open")
    assert broker_denied <= record["denied"], where
    assert record["profile"] == "harness" and record["trace_id"] == "h-1", where
    allowed = {tuple(a.split(" ", 1)) for a in ALLOW}
    for row in record["calls"]:
        assert (row["method"], row["route"]) in allowed, where
        assert row["failure"] in FAILURES, where
        assert row["delivered"] == (row["failure"] is None), where
    assert record["denied"] >= 0 and record["dropped"] >= 0, where
    counted = sum(c["calls"] for c in record["routes"])
    assert counted == len(record["calls"]) + record["dropped"], where


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _grant(api: FakeAPI) -> runtime.Profile:
    grant = profile(api.url, KEY, ALLOW, max_calls=40, name="harness")
    return grant


@pytest.mark.slow
def test_generated_guests_against_the_python_api(api: FakeAPI) -> None:
    api.responder = _responder
    rng = random.Random(SEED)
    grant = _grant(api)
    limits = Limits(timeout_s=1.0, memory_mb=64, output_bytes=16 * 1024)
    kinds: collections.Counter[str] = collections.Counter()
    exits: collections.Counter[int] = collections.Counter()
    failures: collections.Counter[str] = collections.Counter()
    rss_base = 0
    rss_peak = 0
    for i in range(RUNS):
        code, used = generate(rng)
        where = f"seed {SEED} run {i}:\n{code}"
        try:
            outcome = run_with_grant(code, grant, limits=limits, trace_id="h-1")
        except BaseException as exc:  # the property: nothing escapes
            pytest.fail(f"{type(exc).__name__} escaped the Python API; {where}")
        result = outcome.result
        assert result.internal_error == "", where
        assert result.exit_code in EXIT_CODES, (result.exit_code, where)
        line = outcome.audit
        assert "\n" not in line and KEY not in line, where
        record = json.loads(line)
        check_audit(record, where)
        assert KEY not in result.stdout + result.stderr, where
        assert KEY[:19] not in result.stdout + result.stderr, where
        kinds.update(used)
        exits[result.exit_code] += 1
        failures.update(str(r["failure"]) for r in record["calls"])
        if i == min(20, RUNS - 1):
            rss_base = _rss()
        rss_peak = max(rss_peak, _rss())
    growth = rss_peak - rss_base
    print(
        f"\nharness (API): {RUNS} runs, seed {SEED}; fragments {dict(sorted(kinds.items()))};"
        f" exits {dict(sorted(exits.items()))}; row failures {dict(sorted(failures.items()))};"
        f" RSS growth after warm-up {growth >> 20} MiB"
    )
    assert growth < RSS_GROWTH_LIMIT, f"RSS grew by {growth >> 20} MiB"
    assert sum(exits.values()) == RUNS


@pytest.mark.slow
def test_generated_guests_against_specgen_run_json(tmp_path: Path, api: FakeAPI) -> None:
    api.responder = _responder
    grants = {
        "profiles": {
            "harness": {
                "base_url": "https://api.example.com",
                "base_url_overrides": ["http://127.0.0.1:*"],
                "global": "host",
                "allowed_callers": ["agent"],
                "token": {"type": "static", "env": "HARNESS_TOKEN"},
                "allow": list(ALLOW),
                "max_calls": 40,
            }
        }
    }
    (tmp_path / "grants.json").write_text(json.dumps(grants), "utf-8")
    rng = random.Random(SEED + 1)
    env = {**os.environ, "HARNESS_TOKEN": KEY}
    exits: collections.Counter[int] = collections.Counter()
    for i in range(CLI_RUNS):
        code, _ = generate(rng)
        (tmp_path / "code.js").write_text(code, "utf-8")
        where = f"seed {SEED + 1} CLI run {i}:\n{code}"
        child = subprocess.run(
            [
                sys.executable,
                "-c",
                "from specgen.cli import main; main()",
                "run",
                str(tmp_path / "code.js"),
                "--grants",
                str(tmp_path / "grants.json"),
                "--profile",
                "harness",
                "--caller",
                "agent",
                "--base-url",
                api.url,
                "--trace-id",
                "h-1",
                "--timeout",
                "1",
                "--memory-mb",
                "64",
                "--json",
            ],
            capture_output=True,
            env=env,
            timeout=60,
            check=False,
        )
        assert child.stderr == b"", (child.stderr[:500], where)
        assert KEY.encode() not in child.stdout, where
        (line,) = child.stdout.decode("utf-8").splitlines()
        record = json.loads(line)
        assert child.returncode == record["exit_code"] in EXIT_CODES, where
        assert record["internal_error"] is None, where
        check_audit(record["audit"], where)
        exits[child.returncode] += 1
    print(f"\nharness (CLI): {CLI_RUNS} runs, exits {dict(sorted(exits.items()))}")
    assert sum(exits.values()) == CLI_RUNS
