"""Telemetry: run and upstream spans, metrics and audit logs with in-memory exporters,
OTLP/HTTP export to a real loopback receiver, and nothing of the SDK when it is off."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from runtime import Limits, run_with_grant, telemetry
from tests.runtime.loopback import FakeAPI, profile

KEY = "sk-telemetry-KEY-6f1d0c"
SECRET_PATH = "pathvalue-93ac7e"
SECRET_BODY = "bodyvalue-c0ffee"
SECRET_DENIED = "deniedvalue-7a7a7a"
SECRETS = (KEY, SECRET_PATH, SECRET_BODY, SECRET_DENIED)


@pytest.fixture
def exported() -> Iterator[tuple[InMemorySpanExporter, InMemoryMetricReader, object]]:
    spans, reader, logs = (
        InMemorySpanExporter(),
        InMemoryMetricReader(),
        InMemoryLogRecordExporter(),
    )
    assert telemetry.configure(
        "test", True, span_exporter=spans, metric_reader=reader, log_exporter=logs
    )
    yield spans, reader, logs
    telemetry.configure(enabled=False)


def _everything(spans, reader, logs) -> str:
    """Every span, event, metric point and log record, as one text to search."""
    parts = [s.to_json() for s in spans.get_finished_spans()]
    data = reader.get_metrics_data()
    parts.append(data.to_json() if data is not None else "")
    parts += [r.to_json() for r in logs.get_finished_logs()]
    return "\n".join(parts)


def _metric(reader: InMemoryMetricReader, name: str) -> list[dict]:
    data = json.loads(reader.get_metrics_data().to_json())
    return [
        p
        for rm in data["resource_metrics"]
        for sm in rm["scope_metrics"]
        for m in sm["metrics"]
        if m["name"] == name
        for p in m["data"]["data_points"]
    ]


def test_a_run_has_its_span_and_one_child_per_upstream_call_with_no_value(
    api: FakeAPI, exported
) -> None:
    spans, reader, logs = exported
    grant = profile(api.url, KEY, ("GET /v1/items/*", "POST /v1/items"))
    code = f"""
    await host.get("/v1/items/{SECRET_PATH}");
    await host.post("/v1/items", {{text: "{SECRET_BODY}"}});
    await host.get("/v1/other/{SECRET_DENIED}").catch(e => e);
    """
    outcome = run_with_grant(code, grant, limits=Limits(timeout_s=10), caller="alice")
    assert outcome.result.exit_code == 0, outcome.result.stderr
    assert len(api.requests) == 2
    telemetry.emit_audit(json.loads(outcome.audit))

    finished = {s.name: s for s in spans.get_finished_spans()}
    run = finished["plimsoll.run"]
    assert run.attributes["plimsoll.profile"] == "p"
    assert run.attributes["plimsoll.caller"] == "alice"
    assert run.attributes["plimsoll.isolation"] == "process"
    assert run.attributes["plimsoll.exit_code"] == 0
    assert run.attributes["plimsoll.denied"] == 1
    get, post = finished["GET /v1/items/*"], finished["POST /v1/items"]
    for child in (get, post):
        assert child.parent is not None and child.parent.span_id == run.context.span_id
        assert child.context.trace_id == run.context.trace_id
        assert run.start_time <= child.start_time <= child.end_time <= run.end_time
        assert child.attributes["http.response.status_code"] == 200
        assert child.attributes["plimsoll.caller"] == "alice"
    assert get.attributes["url.template"] == "/v1/items/*"
    assert get.attributes["http.request.method"] == "GET"

    durations = _metric(reader, "http.client.request.duration")
    assert sorted(p["attributes"]["url.template"] for p in durations) == [
        "/v1/items",
        "/v1/items/*",
    ]
    assert all(p["count"] == 1 for p in durations)
    denied = _metric(reader, "plimsoll.calls.denied")
    assert [(p["attributes"]["plimsoll.rule"], p["value"]) for p in denied] == [
        ("route_not_granted", 1)
    ]
    (log,) = logs.get_finished_logs()
    assert log.log_record.body["profile"] == "p"

    text = _everything(spans, reader, logs)
    assert "/v1/items/*" in text  # the search below does look at the exported text
    for secret in SECRETS:
        assert secret not in text


def test_approvals_are_counted_by_verdict_and_channel(api: FakeAPI, exported) -> None:
    import dataclasses

    from runtime import FixedApprover

    spans, reader, _ = exported
    grant = dataclasses.replace(
        profile(api.url, KEY, ("POST /v1/items",)), approve_methods=("POST",)
    )
    code = 'await host.post("/v1/items", {a: 1});'
    outcome = run_with_grant(
        code, grant, limits=Limits(timeout_s=10), approver=FixedApprover.parse(("none",))
    )
    assert outcome.trace.rows[0].approval == "declined"
    points = _metric(reader, "plimsoll.approvals")
    assert [
        (p["attributes"]["plimsoll.approval.verdict"], p["attributes"]["plimsoll.approval.channel"])
        for p in points
    ] == [("declined", outcome.trace.rows[0].approval_channel)]
    (row_span,) = [s for s in spans.get_finished_spans() if s.name == "POST /v1/items"]
    assert row_span.attributes["error.type"] == "approval_declined"


def test_off_by_default_specgen_run_never_imports_the_sdk(api: FakeAPI, tmp_path: Path) -> None:
    """`specgen run` with no OTEL_* variable makes its call and loads no SDK module."""
    (tmp_path / "grants.json").write_text(
        json.dumps(
            {
                "profiles": {
                    "p": {
                        "base_url": api.url,
                        "allowed_callers": ["agent"],
                        "token": {"type": "static", "env": "TELEMETRY_KEY"},
                        "allow": ["GET /v1/items/*"],
                    }
                }
            }
        ),
        "utf-8",
    )
    (tmp_path / "code.js").write_text('await host.get("/v1/items/1")', "utf-8")
    script = f"""
import atexit, sys
atexit.register(lambda: print(sorted(m for m in sys.modules if m.startswith("opentelemetry.sdk")),
                              file=sys.stderr))
from specgen.cli import main
sys.argv = ["specgen", "run", {str(tmp_path / "code.js")!r}, "--grants", {str(tmp_path / "grants.json")!r},
            "--profile", "p", "--caller", "agent", "--json"]
main()
"""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["TELEMETRY_KEY"] = KEY
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().splitlines()[-1] == "[]", done.stderr
    assert len(api.requests) == 1


def test_off_by_default_the_mcp_server_never_imports_the_sdk(tmp_path: Path) -> None:
    """An MCP server built and called with no OTEL_* variable loads no SDK module."""
    script = """
import sys
from runtime import telemetry
from runtime.mcp import server
assert not telemetry.enabled()
print(sorted(m for m in sys.modules if m.startswith("opentelemetry.sdk")))
"""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_otel_sdk_disabled_wins_over_an_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    assert telemetry.configure() is False
    monkeypatch.setenv("OTEL_SDK_DISABLED", "false")
    try:
        assert telemetry.configure() is True
    finally:
        telemetry.configure(enabled=False)


class _Receiver(BaseHTTPRequestHandler):
    got: list[tuple[str, bytes]]

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.got.append((self.path, body))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def test_otlp_http_export_to_a_loopback_receiver(api: FakeAPI) -> None:
    """With OTEL_EXPORTER_OTLP_ENDPOINT set, a run's spans reach an OTLP/HTTP receiver,
    decoded here with opentelemetry-proto; no value of the call is in them."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    got: list[tuple[str, bytes]] = []
    handler = type("R", (_Receiver,), {"got": got})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    script = f"""
from runtime import Limits, run_with_grant
from tests.runtime.loopback import profile
grant = profile({api.url!r}, {KEY!r}, ("GET /v1/items/*",))
out = run_with_grant('await host.get("/v1/items/{SECRET_PATH}")', grant,
                     limits=Limits(timeout_s=10), caller="bob")
assert out.result.exit_code == 0, out.result.stderr
"""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["OTEL_EXPORTER_OTLP_ENDPOINT"] = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        done = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120
        )
    finally:
        server.shutdown()
    assert done.returncode == 0, done.stderr
    traces = [body for path, body in got if path == "/v1/traces"]
    assert traces, [path for path, _ in got]
    names: dict[str, dict[str, object]] = {}
    for body in traces:
        request = ExportTraceServiceRequest.FromString(body)
        for rs in request.resource_spans:
            for ss in rs.scope_spans:
                for span in ss.spans:
                    names[span.name] = {
                        a.key: a.value.string_value or a.value.int_value for a in span.attributes
                    }
    assert names["GET /v1/items/*"]["url.template"] == "/v1/items/*"
    assert names["plimsoll.run"]["plimsoll.caller"] == "bob"
    raw = b"".join(body for _, body in got)
    for secret in (KEY, SECRET_PATH):
        assert secret.encode() not in raw


@pytest.mark.parametrize("tier", ["process", "worker"])
def test_mcp_tools_call_span_parents_the_run_and_its_upstream_call(
    api: FakeAPI,
    exported,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
    tier: str,
) -> None:
    """Over the official SDK client, in process: tools/call execute -> run -> upstream.
    On the worker tier the engine is another process and the broker, here, makes the
    upstream span inside the run span."""
    import anyio
    from mcp.client.client import Client

    from runtime.mcp.runner import open_grant
    from runtime.mcp.server import build_server, prepare

    spans, reader, logs = exported
    monkeypatch.setenv("TELEMETRY_KEY", KEY)
    spec = {
        "openapi": "3.0.3",
        "info": {"title": "items", "version": "1"},
        "servers": [{"url": "http://127.0.0.1"}],
        "paths": {
            "/v1/items": {
                "post": {
                    "operationId": "createItem",
                    "requestBody": {
                        "content": {"application/json": {"schema": {"type": "object"}}}
                    },
                    "responses": {"200": {"description": "ok"}},
                }
            }
        },
    }
    (tmp_path / "spec.json").write_text(json.dumps(spec), "utf-8")
    grant = {
        "base_url": api.url,
        "allowed_callers": ["agent"],
        "token": {"type": "static", "env": "TELEMETRY_KEY"},
        "allow": ["POST /v1/items"],
    }
    (tmp_path / "grants.json").write_text(json.dumps({"profiles": {"p": grant}}), "utf-8")
    workers = 1 if tier == "worker" else 0
    opened = open_grant(tmp_path / "grants.json", "p", "agent", timeout_s=5.0, workers=workers)
    if opened._pool is not None:
        request.addfinalizer(opened._pool.close)
    server = build_server(prepare(str(tmp_path / "spec.json"), opened))
    code = f'await host.post("/v1/items", {{text: "{SECRET_BODY}"}}); console.log("ok")'

    async def go() -> str:
        async with Client(server) as client:
            result = await client.call_tool("execute", {"code": code})
            return result.content[0].text  # type: ignore[union-attr]

    answer = json.loads(anyio.run(go))
    assert answer["exit_code"] == 0, answer
    assert len(api.requests) == 1
    finished = {s.name: s for s in spans.get_finished_spans()}
    tool = finished["tools/call execute"]
    assert tool.attributes["mcp.method.name"] == "tools/call"
    assert tool.attributes["gen_ai.tool.name"] == "execute"
    assert tool.attributes["gen_ai.operation.name"] == "execute_tool"
    run = finished["plimsoll.run"]
    upstream = finished["POST /v1/items"]
    assert run.parent is not None and run.parent.span_id == tool.context.span_id
    assert upstream.parent is not None and upstream.parent.span_id == run.context.span_id
    assert run.attributes["plimsoll.caller"] == "agent"
    assert run.attributes["plimsoll.isolation"] == tier
    assert run.start_time <= upstream.start_time <= upstream.end_time <= run.end_time
    durations = _metric(reader, "mcp.server.operation.duration")
    calls = [p for p in durations if p["attributes"]["mcp.method.name"] == "tools/call"]
    assert [p["attributes"]["gen_ai.tool.name"] for p in calls] == ["execute"]
    text = _everything(spans, reader, logs)
    for secret in SECRETS:
        assert secret not in text


def test_query_and_header_values_never_reach_a_span_or_metric(exported) -> None:
    """A structured call (the generated client's shape) with distinctive path, query
    and header values: the broker's span and metrics carry only names and templates."""
    import httpx
    import respx

    from runtime import Broker, HostRequest, Profile, Secret
    from specgen.allow import parse_entry

    spans, reader, logs = exported
    entry = parse_entry(
        {"route": "GET /v1/users/*/items", "query": ["q"], "headers": ["X-Request-Id"]}
    )
    grant = Profile(
        name="p",
        base_url="https://api.internal",
        global_name="host",
        allowed_callers=("*",),
        allow=(entry.route,),
        entries=(entry,),
        token=Secret(KEY),
    )
    header_value = "headervalue-4d4d4d"
    query_value = "queryvalue-51bd02"
    with respx.mock(base_url="https://api.internal") as router:
        router.route().mock(return_value=httpx.Response(200, json={"ok": True}))
        broker = Broker(grant, caller="carol")
        run = telemetry.start_run(broker, "p", caller="carol", tier="process", trace_id=None)
        reply = broker(
            HostRequest(
                "GET",
                "",
                None,
                route="/v1/users/*/items",
                values=(SECRET_PATH,),
                query=(("q", query_value),),
                headers=(("X-Request-Id", header_value),),
            )
        )
        sent = router.calls.last.request
        snapshot = broker.close()
    assert reply.status == 200
    assert query_value in str(sent.url) and sent.headers["X-Request-Id"] == header_value
    assert run is not None
    run.finish(0, False, snapshot.denied)
    finished = {s.name: s for s in spans.get_finished_spans()}
    assert finished["GET /v1/users/*/items"].attributes["url.template"] == "/v1/users/*/items"
    text = _everything(spans, reader, logs)
    for secret in (KEY, SECRET_PATH, query_value, header_value):
        assert secret not in text


def test_a_run_of_two_profiles_labels_each_call_and_refusal_with_its_own_profile(
    api: FakeAPI, exported
) -> None:
    import dataclasses

    spans, reader, _ = exported
    second = FakeAPI()
    try:
        github = dataclasses.replace(
            profile(api.url, KEY, ("GET /repos/*",), name="github"), global_name="github"
        )
        stripe = dataclasses.replace(
            profile(second.url, "sk-other", ("GET /v1/customers/*",), name="stripe"),
            global_name="stripe",
        )
        code = """
            await github.get("/repos/one");
            await stripe.get("/v1/customers/c1");
            try { await stripe.get("/repos/one"); } catch (e) {}
        """
        out = run_with_grant(code, (github, stripe), limits=Limits(timeout_s=10.0))
    finally:
        second.close()
    assert out.result.exit_code == 0, out.result.stderr
    by_route = {
        s.attributes[telemetry.URL_TEMPLATE]: s.attributes[telemetry.PROFILE]
        for s in spans.get_finished_spans()
        if s.name != "plimsoll.run"
    }
    assert by_route == {"/repos/*": "github", "/v1/customers/*": "stripe"}
    (run_span,) = [s for s in spans.get_finished_spans() if s.name == "plimsoll.run"]
    assert run_span.attributes[telemetry.PROFILE] == "github,stripe"
    (denied,) = _metric(reader, telemetry.DENIED_CALLS)
    assert denied["attributes"][telemetry.PROFILE] == "stripe"
    assert denied["value"] == 1


def test_an_audit_log_with_otel_sends_each_line_as_a_log_record(exported, tmp_path: Path) -> None:
    from runtime.mcp.audit import AuditLog

    _, _, logs = exported
    line = json.dumps({"profile": "a,b", "caller": "agent", "calls": [], "denied": 0})
    read, write = os.pipe()
    try:
        AuditLog(tmp_path / "audit.jsonl", stderr_fd=write, stderr=False, otel=True).write(line)
        os.close(write)
        assert os.read(read, 1000) == b""  # stderr turned off
    finally:
        os.close(read)
    assert (tmp_path / "audit.jsonl").read_text() == line + "\n"
    (record,) = logs.get_finished_logs()
    assert record.log_record.body == json.loads(line)
    assert record.log_record.event_name == "plimsoll.audit"
