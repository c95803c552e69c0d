"""The client in the sandbox admits a trailing-slash route (`/a/` is an
ordinary route), as the broker does, and still refuses a route without the slash.

Why a test of its own: the gate compared each path segment and refused an empty one,
which is exactly the segment after a trailing "/", so every generated method of a
document like Mem0's (every path ends in "/") was refused in the sandbox before the
broker saw it. The broker was right; the client's early refusal was not.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from runtime import Profile, Secret, run_with_grant
from specgen.allow import parse_entry
from tests.runtime.loopback import FakeAPI

ENTRIES = ("GET /v1/memories/?page", "POST /v1/memories/", "GET /v1/memories/*/")
PREAMBLE = """
;(function () {
  const h = globalThis["host"];
  h["list"] = (options) => h.call({method: "GET", route: "/v1/memories/", query: ["page"]}, [], undefined, options);
  h["add"] = (body) => h.call({method: "POST", route: "/v1/memories/"}, [], body);
  h["read"] = (id) => h.call({method: "GET", route: "/v1/memories/*/"}, [id], undefined);
  h["bare"] = () => h.call({method: "GET", route: "/v1/memories"}, [], undefined);
})();
"""


@pytest.fixture
def api() -> Iterator[FakeAPI]:
    server = FakeAPI()
    yield server
    server.close()


def test_trailing_slash_routes_pass_the_client_and_reach_the_api(api: FakeAPI) -> None:
    grant = Profile(
        name="p",
        base_url=api.url,
        global_name="host",
        allowed_callers=("*",),
        allow=tuple(parse_entry(e).route for e in ENTRIES),
        entries=tuple(parse_entry(e) for e in ENTRIES),
        preamble=PREAMBLE,
        token=Secret("k-trailing-slash"),
    )
    code = """
    await host.list({page: 2});
    await host.add({messages: []});
    await host.read("m 1");
    let refused = "";
    try { await host.bare(); } catch (e) { refused = e.message; }
    print(refused);
    """
    outcome = run_with_grant(code, grant)
    assert outcome.result.exit_code == 0, outcome.result.stderr
    assert [(r.method, r.path) for r in api.requests] == [
        ("GET", "/v1/memories/?page=2"),
        ("POST", "/v1/memories/"),
        ("GET", "/v1/memories/m%201/"),
    ]
    # The bare route is not granted: the client's gate and the broker refuse it, so no
    # row and no request, but the refusal is on the record with its rule.
    assert "not permitted by sandbox capability: GET /v1/memories" in outcome.result.stdout
    assert outcome.trace.denied == 1 and len(outcome.trace.rows) == 3
    assert [r.rule for r in outcome.trace.refused] == ["route_not_granted"]
