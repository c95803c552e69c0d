"""The call trace and the audit line: metadata only, bounded, one JSON object per run."""

from __future__ import annotations

import json

import httpx
import pytest
import respx

from runtime import Broker, HostRequest, Profile, Secret, TraceIdError, audit_line, format_table
from runtime.broker.trace import MAX_ROWS, CallTrace
from specgen.routes import Route, parse_route_line
from tests.runtime.loopback import FakeAPI

KEY = "audit-key-91c2"


def test_cap_is_256_rows_and_the_rest_are_counted_dropped() -> None:
    trace = CallTrace()
    for _ in range(259):
        trace.record(
            Route("/a/*", "GET"),
            status=200,
            delivered=True,
            bytes_sent=0,
            bytes_back=1,
            latency_s=0.001,
        )
    snap = trace.snapshot()
    assert len(snap.rows) == MAX_ROWS == 256
    assert snap.dropped == 3
    assert [r.seq for r in snap.rows] == list(range(1, 257))


def test_calls_past_the_row_cap_are_still_accounted_by_method_and_route(api: FakeAPI) -> None:
    """Found: 256 reads then a DELETE showed 256 GETs and `dropped: 1`; the DELETE that
    reached the API was nowhere in the audit."""
    from runtime import Limits, run_with_grant
    from tests.runtime.loopback import profile

    grant = profile(api.url, KEY, ("GET /a/*", "DELETE /a/*"), max_calls=300)
    code = 'for (let i = 0; i < 256; i++) await host.get("/a/" + i); await host.del("/a/x");'
    outcome = run_with_grant(code, grant, limits=Limits(timeout_s=20))
    assert outcome.result.exit_code == 0, outcome.result.stderr
    assert len(api.requests) == 257
    record = json.loads(outcome.audit)
    assert len(record["calls"]) == MAX_ROWS and record["dropped"] == 1
    assert record["routes"] == [
        {"method": "DELETE", "route": "/a/*", "calls": 1, "delivered": 1},
        {"method": "GET", "route": "/a/*", "calls": 256, "delivered": 256},
    ]
    table = format_table(outcome.trace)
    assert "DELETE /a/*: 1 sent, 1 delivered" in table


def test_undelivered_rows_report_no_bytes_back() -> None:
    trace = CallTrace()
    trace.record(
        Route("/a", "post"), status=200, delivered=False, bytes_sent=5, bytes_back=99, latency_s=0.0
    )
    (row,) = trace.snapshot().rows
    assert (row.method, row.bytes_back, row.bytes_sent) == ("POST", 0, 5)


def test_row_fields_are_exactly_the_metadata() -> None:
    trace = CallTrace()
    trace.record(
        Route("/a", "GET"),
        status=200,
        delivered=True,
        bytes_sent=0,
        bytes_back=1,
        latency_s=0.0012345,
    )
    row = trace.snapshot().to_dict()["calls"][0]
    assert list(row) == [
        "seq",
        "method",
        "route",
        "status",
        "delivered",
        "bytes_sent",
        "bytes_back",
        "latency_ms",
        "failure",
    ]
    assert row["latency_ms"] == 1.234
    assert row["failure"] is None


def test_audit_line_has_only_profile_trace_id_rows_and_counters() -> None:
    trace = CallTrace()
    trace.record(
        Route("/v1/items/*", "GET"),
        status=200,
        delivered=True,
        bytes_sent=0,
        bytes_back=2,
        latency_s=0.0,
    )
    trace.deny()
    trace.deny("parameter_not_granted", Route("/v1/items/*", "get"))
    line = audit_line("agent-memory", trace.snapshot(), trace_id="req-42:abc")
    assert "\n" not in line
    record = json.loads(line)
    assert list(record) == [
        "profile", "trace_id", "calls", "denied", "dropped", "routes", "refused"
    ]  # fmt: skip
    # each refusal says which rule refused it, and the allow entry when it matched one
    assert record["refused"] == [
        {"rule": "route_not_granted"},
        {"rule": "parameter_not_granted", "method": "GET", "route": "/v1/items/*"},
    ]
    assert record["profile"] == "agent-memory"
    assert record["trace_id"] == "req-42:abc"
    assert record["denied"] == 2 and record["dropped"] == 0
    assert record["calls"][0]["route"] == "/v1/items/*"
    assert list(json.loads(audit_line("p", CallTrace().snapshot()))) == [
        "profile",
        "calls",
        "denied",
        "dropped",
        "routes",
    ]


@pytest.mark.parametrize("bad", ["", "a b", "x" * 129, "a\nb", "/v1/items/42", '{"k":1}', "é"])
def test_trace_id_is_a_plain_token(bad: str) -> None:
    with pytest.raises(TraceIdError):
        audit_line("p", CallTrace().snapshot(), trace_id=bad)


def test_key_path_and_body_never_reach_the_audit_line() -> None:
    def run(allow: str, path: str = "/v1/items/id-777") -> str:
        grant = Profile(
            name="p",
            base_url="https://api.internal",
            global_name="host",
            allowed_callers=("*",),
            allow=(parse_route_line(allow),),
            token=Secret(KEY),
        )
        with respx.mock(assert_all_called=False) as api:
            api.route().mock(return_value=httpx.Response(200, text="body-secret-" + KEY))
            b = Broker(grant)
            b(HostRequest("POST", path, b'{"content":"private words"}'))
            b(HostRequest("POST", "/v1/items/%41", None))
            snap = b.close()
        return audit_line("p", snap, trace_id="t1") + format_table(snap)

    text = run("POST /v1/items/*")
    for needle in (KEY, "id-777", "private words", "body-secret", "%41"):
        assert needle not in text
    assert '"denied":1' in text
    # planted: a key the operator wrote into the grant itself is found by the same search
    assert KEY in run(f"POST /v1/items/{KEY}", f"/v1/items/{KEY}")


def test_table_lists_rows_and_counters() -> None:
    trace = CallTrace()
    trace.record(
        Route("/v1/items/*", "GET"),
        status=200,
        delivered=True,
        bytes_sent=0,
        bytes_back=2,
        latency_s=0.0,
    )
    table = format_table(trace.snapshot())
    assert "/v1/items/*" in table and "denied 0, dropped 0" in table
    assert "no call recorded" in format_table(CallTrace().snapshot())


def test_refusals_past_the_row_cap_are_still_counted_by_rule() -> None:
    """Found: 5,000 calls over a budget of 256 printed 'denied 4744' and then 'refused by
    rule: budget_exhausted 256', counted from the capped list of refusals."""
    trace = CallTrace()
    route = parse_route_line("GET /v1/items/*")
    for _ in range(MAX_ROWS + 50):
        trace.deny("budget_exhausted")
    for _ in range(3):
        trace.deny("parameter_not_granted", route)
    snapshot = trace.snapshot()
    assert len(snapshot.refused) == MAX_ROWS
    assert snapshot.refused_by_rule == (
        ("budget_exhausted", MAX_ROWS + 50),
        ("parameter_not_granted", 3),
    )
    assert (
        f"  refused by rule: budget_exhausted {MAX_ROWS + 50}, parameter_not_granted 3"
        in format_table(snapshot).splitlines()
    )
