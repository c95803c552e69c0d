"""One run given several profiles: each global's calls go through its own profile's broker.

Two real APIs on loopback witness every request: each must carry its own profile's key
and never the other's, a guest forging the global its call names reaches only another
profile it was given (decided by that profile's grant), and the record names the
profile of each call.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from runtime import (
    GrantsError,
    Profile,
    RunInputError,
    RunPool,
    load_grants,
    run_profile,
    run_with_grant,
)
from runtime.broker import audit_line
from runtime.broker.trace import CallTrace, format_table
from runtime.cli import run
from specgen.routes import Route
from tests.runtime.loopback import FakeAPI
from tests.runtime.loopback import profile as make_profile

GITHUB_KEY = "github-key-7f3a1c"
STRIPE_KEY = "stripe-key-9b2e44"


@pytest.fixture
def second_api() -> Iterator[FakeAPI]:
    server = FakeAPI()
    yield server
    server.close()


def _pair(github_url: str, stripe_url: str) -> tuple[Profile, Profile]:
    github = dataclasses.replace(
        make_profile(github_url, GITHUB_KEY, ("GET /repos/*",), name="github"),
        global_name="github",
    )
    stripe = dataclasses.replace(
        make_profile(stripe_url, STRIPE_KEY, ("GET /v1/customers/*",), name="stripe"),
        global_name="stripe",
    )
    return github, stripe


def test_each_call_carries_its_own_profiles_key(api: FakeAPI, second_api: FakeAPI) -> None:
    profiles = _pair(api.url, second_api.url)
    code = """
        const [a, b] = await Promise.all([github.get("/repos/one"), stripe.get("/v1/customers/c1")]);
        console.log(JSON.stringify([a, b]));
    """
    out = run_profile(code, profiles, caller="agent")
    assert out.result.exit_code == 0, out.result.stderr
    assert json.loads(out.result.stdout) == [{"ok": True}, {"ok": True}]
    (gh,) = api.requests
    (st,) = second_api.requests
    assert (gh.path, gh.headers["authorization"]) == ("/repos/one", f"Bearer {GITHUB_KEY}")
    assert (st.path, st.headers["authorization"]) == ("/v1/customers/c1", f"Bearer {STRIPE_KEY}")
    for seen, other in ((gh, STRIPE_KEY), (st, GITHUB_KEY)):
        assert other not in json.dumps(seen.headers) + seen.body.decode()
    rows = {row.profile: (row.method, row.route, row.status) for row in out.trace.rows}
    assert rows == {
        "github": ("GET", "/repos/*", 200),
        "stripe": ("GET", "/v1/customers/*", 200),
    }
    record = json.loads(out.audit)
    assert record["profile"] == "github,stripe"
    assert record["profiles"] == ["github", "stripe"]
    assert sorted(c["profile"] for c in record["calls"]) == ["github", "stripe"]
    assert {(r["profile"], r["route"]) for r in record["routes"]} == {
        ("github", "/repos/*"),
        ("stripe", "/v1/customers/*"),
    }
    assert GITHUB_KEY not in out.audit and STRIPE_KEY not in out.audit


def test_a_path_granted_to_one_profile_is_refused_on_the_other(
    api: FakeAPI, second_api: FakeAPI
) -> None:
    profiles = _pair(api.url, second_api.url)
    code = """
        try { await stripe.get("/repos/one"); } catch (e) { console.log("refused"); }
    """
    out = run_profile(code, profiles, caller="agent")
    assert out.result.stdout.strip() == "refused"
    assert api.requests == [] and second_api.requests == []
    assert [(r.rule, r.profile) for r in out.trace.refused] == [("route_not_granted", "stripe")]


def test_a_forged_global_reaches_only_a_given_profile_under_its_own_grant(
    api: FakeAPI, second_api: FakeAPI
) -> None:
    profiles = _pair(api.url, second_api.url)
    send = (
        "console.log((await globalThis.__coderunner_host_start("
        "JSON.stringify({method: 'GET', path: %s, client: %s}))).status);"
    )
    code = "\n".join(
        send % (json.dumps(path), json.dumps(client))
        for path, client in (
            ("/repos/forged", "github"),  # a raw call naming github: github's grant, key
            ("/repos/forged", "stripe"),  # github's route under stripe's name: refused
            ("/repos/forged", "memory"),  # no profile of this run has that global
            ("/repos/forged", None),  # names no global at all
        )
    )
    out = run_profile(code, profiles, caller="agent")
    assert out.result.stdout.split() == ["200", "403", "403", "403"]
    assert [s.headers["authorization"] for s in api.requests] == [f"Bearer {GITHUB_KEY}"]
    assert second_api.requests == []
    assert out.trace.denied == 3
    assert sorted((r.profile or "") for r in out.trace.refused) == ["", "", "stripe"]


def test_two_profiles_on_one_global_are_refused(api: FakeAPI) -> None:
    one = make_profile(api.url, GITHUB_KEY, ("GET /repos/*",), name="a")
    two = make_profile(api.url, STRIPE_KEY, ("GET /repos/*",), name="b")
    with pytest.raises(GrantsError, match='both use the global "host"'):
        run_with_grant("", (one, two), caller="agent")
    with pytest.raises(GrantsError, match="given twice"):
        run_with_grant("", (one, one), caller="agent")
    with pytest.raises(RunInputError):
        run_with_grant("", (), caller="agent")
    assert api.requests == []


def test_every_profile_must_allow_the_caller(api: FakeAPI, second_api: FakeAPI) -> None:
    github, stripe = _pair(api.url, second_api.url)
    stripe = dataclasses.replace(stripe, allowed_callers=("someone-else",))
    with pytest.raises(GrantsError):
        run_profile('github.get("/repos/x")', (github, stripe), caller="agent")
    assert api.requests == []


def test_one_profile_keeps_its_record_shape(api: FakeAPI) -> None:
    one = make_profile(api.url, GITHUB_KEY, ("GET /repos/*",))
    out = run_profile('await host.get("/repos/x");', one, caller="agent")
    record = json.loads(out.audit)
    assert record["profile"] == "p" and "profiles" not in record
    assert all("profile" not in c for c in record["calls"] + record["routes"])
    assert "profile" not in format_table(out.trace)


def test_the_table_names_each_calls_profile() -> None:
    trace = CallTrace()
    for name in ("github", "stripe"):
        trace.record(
            Route(path="/x", method="GET"),
            status=200,
            delivered=True,
            bytes_sent=0,
            bytes_back=2,
            latency_s=0.001,
            profile=name,
        )
    table = format_table(trace.snapshot())
    assert "profile" in table.splitlines()[1]
    assert "github" in table and "stripe" in table
    line = json.loads(audit_line(("github", "stripe"), trace.snapshot()))
    assert [c["profile"] for c in line["calls"]] == ["github", "stripe"]


def two_profile_grants(tmp_path: Path, *, same_global: bool = False) -> Path:
    """A grants file with a `github` and a `stripe` profile, keys from two variables."""

    def block(global_name: str, env: str, allow: str) -> dict[str, object]:
        return {
            "base_url": "https://api.example.com",
            "base_url_overrides": ["http://127.0.0.1:*"],
            "global": global_name,
            "allowed_callers": ["agent"],
            "token": {"type": "static", "env": env},
            "allow": [allow],
        }

    profiles = {
        "github": block("github", "GH_TEST_TOKEN", "GET /repos/*"),
        "stripe": block(
            "github" if same_global else "stripe", "ST_TEST_TOKEN", "GET /v1/customers/*"
        ),
    }
    path = tmp_path / "grants.json"
    path.write_text(json.dumps({"profiles": profiles}), "utf-8")
    return path


BOTH = """
const [a, b] = await Promise.all([github.get("/repos/one"), stripe.get("/v1/customers/c1")]);
console.log(JSON.stringify([a.ok, b.ok]));
"""


@pytest.fixture
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GH_TEST_TOKEN", GITHUB_KEY)
    monkeypatch.setenv("ST_TEST_TOKEN", STRIPE_KEY)


def _assert_own_keys(api: FakeAPI, second_api: FakeAPI) -> None:
    (gh,) = api.requests
    (st,) = second_api.requests
    assert gh.headers["authorization"] == f"Bearer {GITHUB_KEY}"
    assert st.headers["authorization"] == f"Bearer {STRIPE_KEY}"


@pytest.mark.parametrize("isolation", ["process", "worker"])
def test_a_pool_runs_several_profiles_on_every_tier(
    tmp_path: Path, api: FakeAPI, second_api: FakeAPI, keys: None, isolation: str
) -> None:
    path = two_profile_grants(tmp_path)
    grants = load_grants(path)
    profiles = (
        grants.select("github", "agent").with_base_url(api.url),
        grants.select("stripe", "agent").with_base_url(second_api.url),
    )
    with RunPool(path, workers=1, isolation=isolation) as pool:
        out = pool.run(BOTH, profiles, caller="agent", trace_id="multi-1")
    assert out.result.exit_code == 0, out.result.stderr
    assert out.result.stdout == "[true,true]\n"
    _assert_own_keys(api, second_api)
    record = json.loads(out.audit)
    assert (record["profiles"], record["isolation"]) == (["github", "stripe"], isolation)
    assert sorted(c["profile"] for c in record["calls"]) == ["github", "stripe"]


def test_specgen_run_takes_profile_more_than_once(
    tmp_path: Path, api: FakeAPI, second_api: FakeAPI, keys: None
) -> None:
    path = two_profile_grants(tmp_path)
    (tmp_path / "code.js").write_text(BOTH, "utf-8")
    args = [str(tmp_path / "code.js"), "--grants", str(path), "--caller", "agent", "--json"]
    moved = ["--base-url", f"github={api.url}", "--base-url", f"stripe={second_api.url}"]
    result = CliRunner().invoke(run, [*args, "--profile", "github", "--profile", "stripe", *moved])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["stdout"] == "[true,true]\n"
    _assert_own_keys(api, second_api)

    bare = CliRunner().invoke(run, [*args, "--profile", "github", "--profile", "stripe",
                                    "--base-url", api.url])  # fmt: skip
    assert bare.exit_code != 0
    assert bare.stderr.count("\n") == 1 and "PROFILE=URL" in bare.stderr


def test_specgen_run_refuses_two_profiles_on_one_global(tmp_path: Path, keys: None) -> None:
    path = two_profile_grants(tmp_path, same_global=True)
    (tmp_path / "code.js").write_text("", "utf-8")
    result = CliRunner().invoke(
        run,
        [str(tmp_path / "code.js"), "--grants", str(path), "--caller", "agent",
         "--profile", "github", "--profile", "stripe"],
    )  # fmt: skip
    assert result.exit_code != 0
    assert result.stderr.count("\n") == 1 and 'both use the global "github"' in result.stderr
    assert "Traceback" not in result.output
