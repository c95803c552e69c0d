"""Runs 3-5 of the memory-grant page print exactly what the page shows.

The real generated preamble (specgen over the example's OpenAPI extract) runs on the
injected client; a stand-in broker answers from the allow list with the broker's texts.
`console.log` ends every line with "\\n", and the broker's refusal body itself ends in
"\\n", so "broker answered: 403 ...allowlist" is followed by an empty line in stdout; the
page renders the two as one line.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runtime import GuestGrant, HostReply, HostRequest, Limits
from runtime import run_sandbox as run
from runtime.broker.calls import build_path, match_wire
from specgen import operations, render
from specgen.route_index import RouteIndex
from specgen.routes import first_match, parse_route_line

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "memory_grant"
ACCOUNT = "00000000000000000000000000000042"
BASE = f"/client/v4/accounts/{ACCOUNT}/agent-memory/namespaces/support-agent/profiles/customer-42"
ALLOW = tuple(
    parse_route_line(x)
    for x in (f"POST {BASE}/remember", f"POST {BASE}/recall", f"GET {BASE}/memories/*")
)
TOKEN = "fake-agent-memory-token-held-by-the-broker"


@pytest.fixture(scope="module", params=["reference", ""], ids=["reference", "structured"])
def grant(request: pytest.FixtureRequest) -> GuestGrant:
    """The page's preamble (reference mode, raw paths) and the default build's
    (structured calls): the page's runs must print the same with either."""
    doc = json.loads((EXAMPLE / "agent-memory.openapi.json").read_text())
    gen = operations.generate(
        doc, name="agent-memory", global_name="memory", prefix="/client/v4", compat=request.param
    )
    preamble = render.artifacts(gen)["preamble.js"]
    return GuestGrant(global_name="memory", allow=ALLOW, preamble=preamble)


def broker(request: HostRequest) -> HostReply:
    # The stand-in holds no key: what run 5 looks for is planted by the test below.
    if request.route is not None:
        path, from_value = build_path(request.route, request.values)
        matched = match_wire(RouteIndex(ALLOW), request.method, path, from_value)
    else:
        matched = first_match(ALLOW, request.method, request.path)
    if matched is None:
        return HostReply(403, b"forbidden by sandbox capability allowlist\n")
    return HostReply(200, b'{"success":true,"result":{"count":1,"answer":"x"}}', "application/json")


def page_run(number: int, grant: GuestGrant):
    code = next(EXAMPLE.glob(f"runs/{number}-*.js")).read_text()
    return run(code, grant=grant, handler=broker, limits=Limits(clock="fixed"))


def test_run_3_client_and_broker_refuse_another_customer(grant):
    r = page_run(3, grant)
    assert (r.exit_code, r.stderr) == (0, "")
    assert r.stdout == (
        "client refused: host api call not permitted by sandbox capability: POST "
        f"/client/v4/accounts/{ACCOUNT}/agent-memory/namespaces/support-agent/profiles/customer-43/recall\n"
        "broker answered: 403 forbidden by sandbox capability allowlist\n\n"
    )


def test_run_4_route_not_granted(grant):
    r = page_run(4, grant)
    assert r.stdout == (
        "client refused: host api call not permitted by sandbox capability: DELETE "
        f"/client/v4/accounts/{ACCOUNT}/agent-memory/namespaces/support-agent\n"
        "broker answered: 403 forbidden by sandbox capability allowlist\n\n"
    )


def test_run_5_scans_every_global_without_throwing_or_hanging(grant):
    r = page_run(5, grant)
    assert (r.exit_code, r.stderr) == (0, "")
    assert r.stdout == (
        "functions on memory: 20\nglobals holding the key: none\nclient functions holding the key: none\n"
    )


def test_run_2_prints_sync_line_before_the_promise_result(grant):
    r = page_run(2, grant)
    assert r.stdout == "left over from the first run: undefined\n1 memory found: x\n"


def test_run_5_finds_the_key_when_it_is_there(grant):
    """Run 5's "none" means something only if the same scan names a global and a client
    function that hold TOKEN (the example's key) when one is planted."""
    planted = GuestGrant(
        global_name=grant.global_name,
        allow=grant.allow,
        preamble=grant.preamble
        + f'\nglobalThis.planted = "{TOKEN}";\nmemory.leaky = function () {{ return "{TOKEN}"; }};\n',
    )
    r = page_run(5, planted)
    assert (r.exit_code, r.stderr) == (0, "")
    lines = r.stdout.splitlines()
    assert lines[0] == "functions on memory: 21"
    assert "planted" in lines[1].removeprefix("globals holding the key: ").split(",")
    assert lines[2] == "client functions holding the key: leaky"
