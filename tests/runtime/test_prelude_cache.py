"""A grant's prelude is composed once and reused, and is always the grant's own."""

from __future__ import annotations

from runtime import GuestGrant, HostReply, sandbox
from runtime.sandbox import guest
from specgen.routes import Route

ALLOW = (Route("/v1/items/*", "GET"), Route("/v1/items", "POST"))


def test_the_runs_of_one_grant_share_one_prelude_text() -> None:
    preamble = ";globalThis.host.extra = 1;"
    first = guest.prelude("host", ALLOW, preamble)
    assert guest.prelude("host", ALLOW, preamble) is first
    assert first == guest.compose_source("", global_name="host", allow=ALLOW, preamble=preamble)


def test_a_prelude_is_always_composed_from_the_grant_it_is_asked_for() -> None:
    # Fresh objects every time, more of them than the cache holds: ids of dropped ones
    # come back for new objects, which must still get their own text.
    for i in range(3 * guest.MAX_PRELUDES):
        allow = (Route(f"/v1/items{i}/*", "GET"),)
        preamble = f";globalThis.host.n = {i};"
        text = guest.prelude("host", allow, preamble)
        assert text == guest.compose_source("", global_name="host", allow=allow, preamble=preamble)
        assert f"globalThis.host.n = {i};" in text and f"items{i}" in text


def test_equal_grants_in_other_objects_run_the_same() -> None:
    code = "host.get('/v1/items/a').then(r => print(JSON.stringify(r)), e => print(e.message))"
    out = []
    for _ in range(2):
        grant = GuestGrant("host", tuple(Route(r.path, r.method) for r in ALLOW), "" + "")
        result = sandbox.run(
            code, grant=grant, handler=lambda r: HostReply(200, b'{"a":1}', "application/json")
        )
        out.append(result.stdout)
    assert out == ['{"a":1}\n'] * 2
