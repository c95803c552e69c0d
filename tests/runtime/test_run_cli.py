"""`specgen run` end to end: a real sandbox, the broker, and a real API on loopback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from runtime import Limits, run_with_grant
from runtime import load_grants as load
from runtime.cli import run
from tests.runtime.loopback import FakeAPI, free_port, reply
from tests.runtime.targets import ADVERSARIAL, REFERENCE

KEY = "fake-agent-memory-token-held-by-the-broker"
ACCOUNT = "/client/v4/accounts/00000000000000000000000000000042/agent-memory/namespaces"
MINE = f"{ACCOUNT}/support-agent/profiles/customer-42"
PREAMBLE = """;(function () {
  const h = globalThis["memory"];
  if (!h) return;
  h["agent_memory_recall"] = (a, n, p, body) => h.post("/client/v4/accounts/" + a + "/agent-memory/namespaces/" + n + "/profiles/" + p + "/recall", body);
  h["agent_memory_namespace_delete"] = (a, n) => h.del("/client/v4/accounts/" + a + "/agent-memory/namespaces/" + n);
  h["items"] = (id) => h.get("/v1/items/" + id);
})();
"""


def grants_file(tmp_path: Path, preamble: str = PREAMBLE, **extra: object) -> Path:
    profile = {
        "base_url": "https://api.cloudflare.com",
        "base_url_overrides": ["http://127.0.0.1:*"],
        "global": "memory",
        "allowed_callers": ["support-agent"],
        "token": {"type": "static", "env": "CLOUDFLARE_API_TOKEN"},
        "allow": [
            f"POST {MINE}/remember",
            f"POST {MINE}/recall",
            f"GET {MINE}/memories/*",
            "GET /v1/items/*",
        ],
        "preamble_file": "preamble.js",
        **extra,
    }
    (tmp_path / "preamble.js").write_text(preamble, "utf-8")
    path = tmp_path / "grants.json"
    path.write_text(json.dumps({"profiles": {"agent-memory": profile}}), "utf-8")
    return path


def invoke(
    tmp_path: Path, code: str, *args: str, env: dict[str, str | None] | None = None
) -> Result:
    (tmp_path / "code.js").write_text(code, "utf-8")
    return CliRunner().invoke(
        run,
        [
            str(tmp_path / "code.js"),
            "--grants",
            str(tmp_path / "grants.json"),
            "--profile",
            "agent-memory",
            "--caller",
            "support-agent",
            *args,
        ],
        env={"CLOUDFLARE_API_TOKEN": KEY} if env is None else env,
        catch_exceptions=False,
    )


def audit_of(result: Result) -> dict[str, object]:
    (line,) = [ln for ln in result.stderr.splitlines() if ln.startswith("specgen: audit: ")]
    return json.loads(line[len("specgen: audit: ") :])


def test_allowed_call_through_the_generated_client(tmp_path: Path, api: FakeAPI) -> None:
    grants_file(tmp_path)
    code = (
        'var A = "00000000000000000000000000000042";\n'
        'memory.agent_memory_recall(A, "support-agent", "customer-42", {query: "lang?"})'
        '.then(r => console.log("ok " + JSON.stringify(r)), e => console.log("failed: " + e.message));\n'
    )
    result = invoke(tmp_path, code, "--base-url", api.url, "--trace-id", "req-7")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == 'out| ok {"ok":true}\n'
    (seen,) = api.requests
    assert (seen.method, seen.path, seen.body) == ("POST", f"{MINE}/recall", b'{"query":"lang?"}')
    assert seen.headers["authorization"] == f"Bearer {KEY}"
    audit = audit_of(result)
    assert audit["profile"] == "agent-memory" and audit["trace_id"] == "req-7"
    assert audit["calls"][0]["route"] == f"{MINE}/recall"  # type: ignore[index]
    assert audit["denied"] == 0
    assert "trace:" in result.stderr and f"{MINE}/recall" in result.stderr
    assert KEY not in result.stdout + result.stderr


@pytest.mark.parametrize(
    ("call", "method", "path"),
    [
        (
            'memory.agent_memory_recall(A, NS, "customer-43", Q)',
            "POST",
            f"{ACCOUNT}/support-agent/profiles/customer-43/recall",
        ),
        ("memory.agent_memory_namespace_delete(A, NS)", "DELETE", f"{ACCOUNT}/support-agent"),
    ],
    ids=["run3-other-customer", "run4-route-not-granted"],
)
def test_mission_runs_3_and_4_are_refused_twice(
    tmp_path: Path, api: FakeAPI, call: str, method: str, path: str
) -> None:
    grants_file(tmp_path)
    code = f"""var A = "00000000000000000000000000000042", NS = "support-agent";
var Q = {{query: "Which language does the customer want?"}};
{call}.then(
  function (r) {{ console.log("client answered: " + JSON.stringify(r)); }},
  function (e) {{
    console.log("client refused: " + e.message);
    var raw = __coderunner_host_call(JSON.stringify({{method: "{method}", path: "{path}", body: Q}}));
    console.log("broker answered: " + raw.status + " " + raw.body);
  }});
"""
    result = invoke(tmp_path, code, "--base-url", api.url)
    assert result.exit_code == 0, result.stderr
    assert result.stdout == (
        f"out| client refused: host api call not permitted by sandbox capability: {method} {path}\n"
        "out| broker answered: 403 forbidden by sandbox capability allowlist\n"
        "out| \n"
    )
    assert api.requests == []
    audit = audit_of(result)
    # both attempts are on the record: the one the client's gate refused (the broker
    # decided it too) and the raw one
    assert (audit["calls"], audit["denied"]) == ([], 2)
    assert audit["refused"] == [{"rule": "route_not_granted"}] * 2


#: One granted call and two the injected client would refuse: an option the grant does
#: not list (`sort`) and a route it does not grant. Used by the MCP audit test too.
ONE_GRANTED_TWO_REFUSED = f"""var P = "{MINE}";
await memory.call({{method: "POST", route: P + "/remember"}}, [], {{content: "Spanish", sessionId: "c-7"}});
try {{
  await memory.call({{method: "GET", route: P + "/memories/*", query: ["sort"]}}, ["m-1"], undefined, {{sort: "newest"}});
}} catch (e) {{ console.log(e.message.trim()); }}
try {{ await memory.agent_memory_namespace_delete("00000000000000000000000000000042", "support-agent"); }}
catch (e) {{ console.log(e.message.trim()); }}
"""


def test_calls_the_client_refuses_are_on_the_record(tmp_path: Path, api: FakeAPI) -> None:
    """Every call is the broker's to decide: the ones the client's checks would refuse
    are sent, refused by the broker with the rule's text, and counted in `denied`."""
    grants_file(tmp_path)
    result = invoke(tmp_path, ONE_GRANTED_TWO_REFUSED, "--base-url", api.url)
    assert result.exit_code == 0, result.stderr
    assert result.stdout == (
        "out| host api 403: parameter not granted: sort\n"
        "out| host api call not permitted by sandbox capability: DELETE "
        f"{ACCOUNT}/support-agent\n"
    )
    assert [(r.method, r.path) for r in api.requests] == [("POST", f"{MINE}/remember")]
    audit = audit_of(result)
    assert [c["route"] for c in audit["calls"]] == [f"{MINE}/remember"]  # type: ignore[index, union-attr]
    assert audit["denied"] == 2
    assert audit["refused"] == [
        {"rule": "parameter_not_granted", "method": "GET", "route": f"{MINE}/memories/*"},
        {"rule": "route_not_granted"},
    ]
    assert "specgen:   refused by rule: parameter_not_granted 1, route_not_granted 1\n" in (
        result.stderr
    )
    line = next(ln for ln in result.stderr.splitlines() if ln.startswith("specgen: audit: "))
    assert "newest" not in line and "sort" not in line  # the audit keeps no guest text


def test_denial_lists_through_the_raw_bridge(tmp_path: Path, api: FakeAPI) -> None:
    grants_file(tmp_path, max_calls=100_000)
    targets = REFERENCE + ADVERSARIAL
    code = f"""var targets = {json.dumps(targets)};
var statuses = targets.map(function (p) {{
  return __coderunner_host_call(JSON.stringify({{method: "GET", path: p}})).status; }});
console.log(JSON.stringify(statuses));
"""
    result = invoke(tmp_path, code, "--base-url", api.url, "--json")
    assert result.exit_code == 0, result.stdout
    record = json.loads(result.stdout)
    statuses = json.loads(record["stdout"])
    assert statuses == [403] * len(targets)
    assert api.requests == []
    assert record["audit"]["denied"] == len(targets)
    assert record["audit"]["calls"] == []


def test_json_output_shape(tmp_path: Path, api: FakeAPI) -> None:
    grants_file(tmp_path)
    result = invoke(
        tmp_path, 'memory.items("x").then(r => console.log(r.ok));', "--base-url", api.url, "--json"
    )
    record = json.loads(result.stdout)
    assert list(record) == [
        "stdout",
        "stderr",
        "stdout_truncated",
        "stderr_truncated",
        "exit_code",
        "timed_out",
        "interrupted",
        "duration_s",
        "internal_error",
        "isolation",
        "audit",
    ]
    assert record["stdout"] == "true\n" and record["exit_code"] == 0
    assert record["isolation"] == "process"  # one file runs in this process by default
    assert list(record["audit"]) == ["profile", "isolation", "calls", "denied", "dropped", "routes"]
    assert result.stderr == ""


def test_guest_exit_codes_pass_through(tmp_path: Path) -> None:
    grants_file(tmp_path)
    assert invoke(tmp_path, 'throw new Error("boom")').exit_code != 0
    timed = invoke(tmp_path, "while (true) {}", "--timeout", "0.5")
    assert timed.exit_code == 124
    assert "timed out" in timed.stderr


def test_faults_reach_the_guest_as_502_and_the_run_goes_on(tmp_path: Path) -> None:
    grants_file(tmp_path)
    code = """var r1 = __coderunner_host_call(JSON.stringify({method: "GET", path: "/v1/items/a"}));
var r2 = __coderunner_host_call(JSON.stringify({method: "GET", path: "/v1/items/b"}));
console.log(r1.status, JSON.stringify(r1.body), r2.status);
"""
    result = invoke(tmp_path, code, "--base-url", f"http://127.0.0.1:{free_port()}")
    assert result.exit_code == 0
    assert result.stdout == 'out| 502 "host api unreachable\\n" 502\n'
    calls = audit_of(result)["calls"]
    assert [(c["status"], c["delivered"], c["failure"]) for c in calls] == [  # type: ignore[index]
        (0, False, "unreachable"),
        (0, False, "unreachable"),
    ]


def test_redirect_to_another_origin_does_not_carry_the_key(tmp_path: Path, api: FakeAPI) -> None:
    other = FakeAPI()
    try:
        api.responder = reply(307, b"moved", {"Location": other.url + "/v1/items/x"})
        grants_file(tmp_path)
        code = 'memory.items("x").then(r => console.log("ok"), e => console.log(e.message));'
        result = invoke(tmp_path, code, "--base-url", api.url)
        assert result.stdout == "out| host api 307: moved\n"
        assert other.requests == [] and len(api.requests) == 1
    finally:
        other.close()


# ---- key confinement ------------------------------------------------------------------

SEARCH = """var needle = ["fake", "agent", "memory", "token", "held", "by", "the", "broker"].join("-");
function holds(v) { try { return String(v).indexOf(needle) >= 0 || JSON.stringify(v).indexOf(needle) >= 0; } catch (e) { return false; } }
var inGlobals = Object.getOwnPropertyNames(globalThis).filter(function (n) { return holds(globalThis[n]); });
var inClient = Object.keys(memory).filter(function (k) { return holds(memory[k]); });
var r = __coderunner_host_call(JSON.stringify({method: "GET", path: "/v1/items/x"}));
var d = __coderunner_host_call(JSON.stringify({method: "GET", path: "/v1/items/%78"}));
var e = __coderunner_host_call("not json");
var inReplies = [r, d, e].filter(holds).length;
console.log("globals holding the key: " + (inGlobals.length ? inGlobals.join(",") : "none"));
console.log("client functions holding the key: " + (inClient.length ? inClient.join(",") : "none"));
console.log("replies holding the key: " + inReplies);
"""


# Makes the same calls without ever spelling the key, so its memory can be scanned for it.
CALLS_ONLY = (
    "\n".join(SEARCH.splitlines()[4:7])
    + "\nconsole.log([r, d, e].map(function (x) { return x.status; }).join());\n"
)


def _confinement_run(
    tmp_path: Path, api: FakeAPI, preamble: str, code: str = SEARCH
) -> tuple[str, str, bytes]:
    grants_file(tmp_path, preamble=preamble)
    profile = load(tmp_path / "grants.json", environ={"CLOUDFLARE_API_TOKEN": KEY}).select(
        "agent-memory", "support-agent"
    )
    profile = profile.with_base_url(api.url)
    memory: list[bytes] = []
    outcome = run_with_grant(
        code, profile, limits=Limits(timeout_s=5), trace_id="t", memory_probe=memory.append
    )
    assert outcome.result.exit_code == 0, outcome.result.stderr
    assert api.requests[-1].headers["authorization"] == f"Bearer {KEY}"  # the API did get it
    return (
        outcome.result.stdout + outcome.result.stderr,
        outcome.audit + repr(outcome.trace),
        memory[0],
    )


def test_the_key_is_nowhere_the_guest_or_the_audit_can_see(tmp_path: Path, api: FakeAPI) -> None:
    output, audit, guest_memory = _confinement_run(tmp_path, api, PREAMBLE)
    assert output == (
        "globals holding the key: none\nclient functions holding the key: none\nreplies holding the key: 0\n"
    )
    assert KEY not in audit
    output, audit, guest_memory = _confinement_run(tmp_path, api, PREAMBLE, CALLS_ONLY)
    assert output == "200,403,400\n"
    assert KEY not in audit
    assert KEY.encode() not in guest_memory
    assert KEY.encode("utf-16-le") not in guest_memory


def test_a_planted_key_is_found_by_the_same_checks(tmp_path: Path, api: FakeAPI) -> None:
    planted = PREAMBLE + f'globalThis.memory.note = "{KEY}";\n'
    output, _, guest_memory = _confinement_run(tmp_path, api, planted)
    assert "globals holding the key: none" not in output
    assert "execArgv" in output
    assert "client functions holding the key: note" in output
    _, _, guest_memory = _confinement_run(tmp_path, api, planted, CALLS_ONLY)
    assert KEY.encode() in guest_memory


# ---- refusals before anything runs ----------------------------------------------------

CALLS_HOME = 'var r = __coderunner_host_call(JSON.stringify({method: "GET", path: "/v1/items/x"})); console.log("ran");'


@pytest.mark.parametrize(
    ("setup", "args", "env", "message"),
    [
        (
            "ok",
            [],
            {},
            'specgen: grants: profile "agent-memory": token env "CLOUDFLARE_API_TOKEN" is empty or unset',
        ),
        (
            "ok",
            [],
            {"CLOUDFLARE_API_TOKEN": ""},
            'token env "CLOUDFLARE_API_TOKEN" is empty or unset',
        ),
        ("bad-json", [], None, "specgen: grants: parse "),
        (
            "unknown-field",
            [],
            None,
            'specgen: grants: profile "agent-memory": unknown field "alow"',
        ),
        (
            "ok",
            ["--profile", "nope"],
            None,
            'grants.json: no profile "nope" (profiles: "agent-memory")',
        ),
        (
            "ok",
            ["--caller", "intruder"],
            None,
            'specgen: grants: profile "agent-memory": caller "intruder" is not in its'
            " allowed_callers",
        ),
        (
            "ok",
            ["--caller", "*"],
            None,
            'specgen: --caller "*": name one principal',
        ),
        (
            "ok",
            ["--base-url", "http://example.com"],
            None,
            "specgen: --base-url: host-api grant: non-loopback BaseURL must use https",
        ),
        ("ok", ["--trace-id", "has space"], None, "specgen: trace_id must be 1 to 128 characters"),
        (
            "ok",
            ["--timeout", "0"],
            None,
            "specgen: --timeout 0 must be more than 0 and at most 30 seconds",
        ),
        ("ok", ["--timeout", "31"], None, "at most 30 seconds"),
        (
            "ok",
            ["--memory-mb", "0"],
            None,
            "specgen: --memory-mb 0 must be between 2 (the engine's minimum) and 4096",
        ),
        ("ok", ["--memory-mb", "1"], None, "must be between 2 (the engine's minimum)"),
    ],
)
def test_refusals_happen_before_the_sandbox_starts(
    tmp_path: Path,
    api: FakeAPI,
    setup: str,
    args: list[str],
    env: dict[str, str] | None,
    message: str,
) -> None:
    path = grants_file(tmp_path)
    if setup == "bad-json":
        path.write_text(path.read_text() + " trailing")
    elif setup == "unknown-field":
        doc = json.loads(path.read_text())
        doc["profiles"]["agent-memory"]["alow"] = []
        path.write_text(json.dumps(doc))
    base = [] if any(a == "--base-url" for a in args) else ["--base-url", api.url]
    result = invoke(
        tmp_path,
        CALLS_HOME,
        *base,
        *args,
        env={**({"CLOUDFLARE_API_TOKEN": KEY} if env is None else env)},
    )
    assert result.exit_code == 1
    assert result.stdout == ""
    assert len(result.stderr.splitlines()) == 1, result.stderr
    assert message in result.stderr
    assert api.requests == []


def test_missing_code_file(tmp_path: Path) -> None:
    grants_file(tmp_path)
    result = CliRunner().invoke(
        run,
        [
            str(tmp_path / "missing.js"),
            "--grants",
            str(tmp_path / "grants.json"),
            "--profile",
            "agent-memory",
            "--caller",
            "support-agent",
        ],
        env={"CLOUDFLARE_API_TOKEN": KEY},
    )
    assert result.exit_code == 1
    assert result.stderr.startswith("specgen: read ") and len(result.stderr.splitlines()) == 1


def test_run_profile_rechecks_the_caller_and_counts_memory_hits(
    tmp_path: Path, api: FakeAPI
) -> None:
    from runtime import GrantsError, run_profile

    grants_file(tmp_path)
    profile = load(tmp_path / "grants.json", environ={"CLOUDFLARE_API_TOKEN": KEY}).select(
        "agent-memory", "support-agent"
    )
    profile = profile.with_base_url(api.url)
    with pytest.raises(
        GrantsError, match='grant_profile "agent-memory" is not available to this caller'
    ):
        run_profile(CALLS_ONLY, profile, caller="intruder")
    clean = run_profile(
        CALLS_ONLY, profile, caller="support-agent", clock="fixed", scan_memory_for=KEY
    )
    assert clean.result.stdout == "200,403,400\n"
    assert clean.memory_hits == 0
    # The 403 is the broker's, the 400 (not an envelope) the sandbox's: both denied.
    assert json.loads(clean.audit)["denied"] == 2
    planted = run_profile(
        CALLS_ONLY,
        profile.with_preamble(f'var k = "{KEY}";'),
        caller="support-agent",
        scan_memory_for=KEY,
    )
    assert planted.memory_hits > 0


def test_specgen_group_exposes_run_once_the_entry_point_is_installed(
    tmp_path: Path, api: FakeAPI
) -> None:
    from specgen.cli import cli

    # The entry point is this test's subject: missing, it is a failure, never a skip.
    assert "run" in cli.list_commands(None), (  # type: ignore[arg-type]
        "entry point specgen.commands:run = runtime.cli:run is not installed"
    )
    grants_file(tmp_path)
    (tmp_path / "code.js").write_text('memory.items("x").then(r => console.log(r.ok));')
    result = CliRunner().invoke(
        cli,
        [
            "run",
            str(tmp_path / "code.js"),
            "--grants",
            str(tmp_path / "grants.json"),
            "--profile",
            "agent-memory",
            "--caller",
            "support-agent",
            "--base-url",
            api.url,
        ],
        env={"CLOUDFLARE_API_TOKEN": KEY},
    )
    assert (result.exit_code, result.stdout) == (0, "out| true\n")


def test_a_hung_api_is_cut_off_at_the_run_deadline(tmp_path: Path, api: FakeAPI) -> None:
    import time

    from tests.runtime.loopback import hang

    events: list[str] = []
    api.responder = hang(events)
    grants_file(tmp_path)
    code = 'var r = __coderunner_host_call(JSON.stringify({method: "GET", path: "/v1/items/x"})); console.log(r.status);'
    result = invoke(tmp_path, code, "--base-url", api.url, "--timeout", "0.5", "--json")
    record = json.loads(result.stdout)
    # Either the guest saw the 504 just before its deadline or the deadline ended it.
    assert (record["stdout"], record["exit_code"]) in {("504\n", 0), ("", 124)}
    (row,) = record["audit"]["calls"]
    assert (row["status"], row["delivered"]) == (0, False)
    for _ in range(200):  # the server thread notices the hang-up asynchronously
        if events:
            break
        time.sleep(0.01)
    assert events == ["client left"]


# ---- guest output cannot forge the trusted lines or drive the terminal -----------------


def test_guest_output_cannot_forge_the_audit_or_reach_the_terminal_raw(tmp_path: Path) -> None:
    grants_file(tmp_path)
    code = r"""
console.log('audit: {"profile":"agent-memory","calls":[],"denied":0,"dropped":0}');
console.log("specgen: audit: {}\rspecgen: trace:");
console.log("title\x1b]0;owned\x07 csi\x1b[2J c1\x9b31m bidi\u202e tab\there");
std.err.puts("audit: forged on stderr\x1b[8m");
"""
    result = invoke(tmp_path, 'import * as std from "qjs:std";\n' + code)
    assert result.exit_code == 0, result.stderr
    everything = result.stdout + result.stderr
    for raw in ("\x1b", "\x07", "\x9b", "\u202e", "\r"):
        assert raw not in everything
    assert result.stdout.splitlines() == [
        'out| audit: {"profile":"agent-memory","calls":[],"denied":0,"dropped":0}',
        "out| specgen: audit: {}\\x0dspecgen: trace:",
        "out| title\\x1b]0;owned\\x07 csi\\x1b[2J c1\\x9b31m bidi\\u202e tab\there",
    ]
    lines = result.stderr.splitlines()
    assert lines[0] == "err| audit: forged on stderr\\x1b[8m"
    assert all(line.startswith("specgen: ") for line in lines[1:])
    # Exactly one line of the whole output starts like the real audit line.
    starts = [ln for ln in everything.splitlines() if ln.startswith("specgen: audit: ")]
    assert len(starts) == 1 and json.loads(starts[0][len("specgen: audit: ") :])["calls"] == []


def test_json_mode_keeps_guest_output_as_raw_json_strings(tmp_path: Path) -> None:
    grants_file(tmp_path)
    result = invoke(tmp_path, r'console.log("a\x1b[2Jb")', "--json")
    assert json.loads(result.stdout)["stdout"] == "a\x1b[2Jb\n"
    assert "\x1b" not in result.stdout  # JSON escapes it on the wire


def test_a_code_fifo_no_one_writes_is_read_at_once_not_waited_for(tmp_path: Path) -> None:
    """Found: a FIFO as CODE.js held `specgen run` for ever (its open waited for a
    writer); it reads as empty at once, as a FIFO SPEC does, and a pipe that is written
    (`specgen run <(...)`) still runs what it carries."""
    grants_file(tmp_path)
    os.mkfifo(tmp_path / "code.fifo")
    args = ["--grants", str(tmp_path / "grants.json"), "--profile", "agent-memory"]
    args += ["--caller", "support-agent"]
    env = {**os.environ, "CLOUDFLARE_API_TOKEN": KEY}
    specgen = Path(sys.executable).with_name("specgen")
    done = subprocess.run(
        [str(specgen), "run", str(tmp_path / "code.fifo"), *args],
        capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "out|" not in done.stdout
    piped = subprocess.run(
        ["bash", "-c", f'{specgen} run <(echo "print(7)") "$@"', "-", *args],
        capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip
    assert piped.returncode == 0 and piped.stdout == "out| 7\n", piped.stderr
