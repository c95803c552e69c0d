"""OpenTelemetry traces, metrics and audit logs, off and free unless asked for.

Why here and lazily: most runs never export anything, so nothing of the OpenTelemetry
SDK is imported, and no provider exists, until telemetry is turned on, either by the
standard `OTEL_*` variables (an OTLP endpoint; `OTEL_SDK_DISABLED=true` wins) or by
`configure(...)`. While it is off, every hook below returns after one check.

What is exported is metadata only, the same the trace row holds: the allow entry a
call matched (its route template, never the path sent), method, status, the rule that
refused a call, an approval's verdict and channel. No path value, query value, body,
header value or key exists in the data these hooks receive, so none can be exported.

Spans: a run span (`plimsoll.run`) per run, a child of the current span (an MCP
`tools/call` span, which the MCP SDK makes with the global tracer provider this module
sets), and a CLIENT span per upstream call, child of the run span, with HTTP semantic
convention attributes (`url.template` is the route template).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import threading
import time
from typing import Any

#: Attribute names from the OpenTelemetry semantic conventions (HTTP, MCP, errors).
HTTP_METHOD = "http.request.method"
URL_TEMPLATE = "url.template"
HTTP_STATUS = "http.response.status_code"
ERROR_TYPE = "error.type"
#: Ours: what the conventions have no name for.
PROFILE = "plimsoll.profile"
CALLER = "plimsoll.caller"
TIER = "plimsoll.isolation"
EXIT_CODE = "plimsoll.exit_code"
TIMED_OUT = "plimsoll.timed_out"
DENIED = "plimsoll.denied"
RULE = "plimsoll.rule"
VERDICT = "plimsoll.approval.verdict"
CHANNEL = "plimsoll.approval.channel"

#: Metric names.
UPSTREAM_DURATION = "http.client.request.duration"
DENIED_CALLS = "plimsoll.calls.denied"
APPROVALS = "plimsoll.approvals"

_ENDPOINT_VARS = (
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
    "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT",
)

_lock = threading.Lock()
#: None: not decided yet (the environment is read on first use); False: off.
_state: _Telemetry | bool | None = None


def _from_environment() -> bool:
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    return any(os.environ.get(name) for name in _ENDPOINT_VARS)


def configure(
    service_name: str = "plimsoll-specgen",
    enabled: bool | None = None,
    *,
    span_exporter: Any = None,
    metric_reader: Any = None,
    log_exporter: Any = None,
) -> bool:
    """Turn telemetry on or off for this process; True when it is on.

    `enabled` None follows the environment (`OTEL_*`). The exporters default to OTLP
    over HTTP, configured by the standard variables; tests pass in-memory ones
    (`InMemorySpanExporter`, `InMemoryMetricReader`, `InMemoryLogRecordExporter`),
    which are then exported synchronously.
    """
    global _state
    with _lock:
        on = _from_environment() if enabled is None else enabled
        if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true" and enabled is None:
            on = False
        old = _state
        _state = (
            _Telemetry(service_name, span_exporter, metric_reader, log_exporter) if on else False
        )
    if isinstance(old, _Telemetry):
        old.shutdown()
    return on


def _current() -> _Telemetry | None:
    state = _state
    if state is None:
        configure()
        state = _state
    return state if isinstance(state, _Telemetry) else None


def enabled() -> bool:
    return _current() is not None


def shutdown() -> None:
    """Flush and stop the exporters (also done at interpreter exit)."""
    state = _state
    if isinstance(state, _Telemetry):
        state.shutdown()


class _Telemetry:
    """The SDK's providers, made only when telemetry is on."""

    def __init__(self, service: str, spans: Any, reader: Any, logs: Any) -> None:
        from opentelemetry.sdk._logs import LoggerProvider
        from opentelemetry.sdk._logs.export import (
            BatchLogRecordProcessor,
            SimpleLogRecordProcessor,
        )
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

        # Batched spans, metrics and logs are sent at exit (`specgen run` exits at once).
        atexit.register(self.shutdown)
        resource = Resource.create({"service.name": service})
        if spans is None:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            self.span_processor: Any = BatchSpanProcessor(OTLPSpanExporter())
        else:
            self.span_processor = SimpleSpanProcessor(spans)
        self.tracer_provider = _global_tracer_provider(resource, self.span_processor)
        if reader is None:
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import (
                OTLPMetricExporter,
            )

            reader = PeriodicExportingMetricReader(OTLPMetricExporter())
        self.meter_provider = MeterProvider(resource=resource, metric_readers=[reader])
        self.logger_provider = LoggerProvider(resource=resource)
        if logs is None:
            from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter

            self.logger_provider.add_log_record_processor(
                BatchLogRecordProcessor(OTLPLogExporter())
            )
        else:
            self.logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
        self.tracer = self.tracer_provider.get_tracer("plimsoll-specgen")
        meter = self.meter_provider.get_meter("plimsoll-specgen")
        self.upstream_duration = meter.create_histogram(
            UPSTREAM_DURATION, unit="s", description="Upstream calls the broker sent."
        )
        self.denied = meter.create_counter(
            DENIED_CALLS, description="Calls the broker refused, by rule."
        )
        self.approvals = meter.create_counter(
            APPROVALS, description="Held calls, by verdict and channel."
        )
        self.logger = self.logger_provider.get_logger("plimsoll-specgen.audit")

    def shutdown(self) -> None:
        if getattr(self, "_down", False):  # configure() and exit may both ask
            return
        self._down = True
        if _relay is not None and _relay.target is self.span_processor:
            _relay.target = None  # the MCP SDK's spans stop here too
        for part in (self.span_processor, self.meter_provider, self.logger_provider):
            with contextlib.suppress(Exception):
                part.shutdown()


#: The process's one tracer provider and the processor it hands spans to.
_provider: Any = None
_relay: Any = None


def _global_tracer_provider(resource: Any, processor: Any) -> Any:
    """The tracer provider, set as the global one the first time.

    The MCP SDK makes its `tools/call` span with the global provider, which the API
    lets a process set only once; so the provider is made once (with the first
    configuration's resource) and each configure() points its relay at its own
    span processor.
    """
    global _provider, _relay
    from opentelemetry import trace
    from opentelemetry.sdk.trace import SpanProcessor, TracerProvider

    if _provider is None:

        class Relay(SpanProcessor):
            target: Any = None

            def on_start(self, span: Any, parent_context: Any = None) -> None:
                target = self.target
                if target is not None:
                    target.on_start(span, parent_context=parent_context)

            def on_end(self, span: Any) -> None:
                target = self.target
                if target is not None:
                    target.on_end(span)

            def force_flush(self, timeout_millis: int = 30000) -> bool:
                target = self.target
                return target.force_flush(timeout_millis) if target is not None else True

        _relay = Relay()
        _provider = TracerProvider(resource=resource)
        _provider.add_span_processor(_relay)
        trace.set_tracer_provider(_provider)
    _relay.target = processor
    return _provider


class RunSpan:
    """One run's span, and the trace observer that makes its upstream spans."""

    def __init__(
        self, t: _Telemetry, profile: str, caller: str | None, tier: str, trace_id: str | None
    ) -> None:
        from opentelemetry import trace

        self._t = t
        self._common: dict[str, str] = {PROFILE: profile}
        if caller:
            self._common[CALLER] = caller
        attributes: dict[str, Any] = {**self._common, TIER: tier}
        if trace_id is not None:
            attributes["plimsoll.trace_id"] = trace_id
        self.started_ns = time.time_ns()
        self.span = t.tracer.start_span(
            "plimsoll.run", attributes=attributes, start_time=self.started_ns
        )
        self._context = trace.set_span_in_context(self.span)

    # -- the broker trace's observer (runtime.broker.trace.CallTrace.observer) --------

    def _labels(self, profile: str | None) -> dict[str, str]:
        """The run's labels; in a run of several profiles, the one that decided the call."""
        return self._common if profile is None else {**self._common, PROFILE: profile}

    def denied(self, rule: str, method: str, route: str, profile: str | None = None) -> None:
        attributes = {**self._labels(profile), RULE: rule}
        if route:
            attributes.update({HTTP_METHOD: method, URL_TEMPLATE: route})
        self._t.denied.add(1, attributes)

    def row(
        self,
        method: str,
        route: str,
        status: int,
        latency_s: float,
        failure: str | None,
        approval: tuple[str, str, float] | None,
        profile: str | None = None,
    ) -> None:
        from opentelemetry.trace import SpanKind, StatusCode

        labels = self._labels(profile)
        end = time.time_ns()
        start = max(self.started_ns, end - int(latency_s * 1e9))
        attributes: dict[str, Any] = {**labels, HTTP_METHOD: method, URL_TEMPLATE: route}
        if status > 0:
            attributes[HTTP_STATUS] = status
        error = failure if failure is not None else (str(status) if status >= 400 else None)
        if error is not None:
            attributes[ERROR_TYPE] = error
        if approval is not None:
            attributes.update({VERDICT: approval[0], CHANNEL: approval[1]})
            self._t.approvals.add(1, {**labels, VERDICT: approval[0], CHANNEL: approval[1]})
        span = self._t.tracer.start_span(
            f"{method} {route}",
            context=self._context,
            kind=SpanKind.CLIENT,
            attributes=attributes,
            start_time=start,
        )
        if error is not None:
            span.set_status(StatusCode.ERROR)
        span.end(end_time=end)
        self._t.upstream_duration.record(latency_s, attributes)

    # -- the end ------------------------------------------------------------------------

    def finish(self, exit_code: int, timed_out: bool, denied: int) -> None:
        from opentelemetry.trace import StatusCode

        self.span.set_attributes({EXIT_CODE: exit_code, TIMED_OUT: timed_out, DENIED: denied})
        if exit_code != 0:
            self.span.set_attribute(ERROR_TYPE, "timeout" if timed_out else f"exit_{exit_code}")
            self.span.set_status(StatusCode.ERROR)
        self.span.end()


def start_run(
    broker: Any, profile: str, *, caller: str | None, tier: str, trace_id: str | None
) -> RunSpan | None:
    """The run's span with `broker`'s trace observed, or None when telemetry is off."""
    t = _current()
    if t is None:
        return None
    run = RunSpan(t, profile, caller, tier, trace_id)
    broker.trace.observer = run
    return run


def end_run(run: RunSpan | None, outcome: Any = None) -> None:
    """End the run's span with its outcome (None: the run never started)."""
    if run is None:
        return
    if outcome is None:
        run.finish(-1, False, 0)
        return
    result = outcome.result
    run.finish(result.exit_code, result.timed_out, outcome.trace.denied)


def emit_audit(record: dict[str, Any]) -> None:
    """Send one audit record as an OTel log record (its body the record, as JSON data),
    when telemetry is on; the record holds the same metadata the audit line does."""
    t = _current()
    if t is None:
        return
    from opentelemetry._logs import SeverityNumber

    t.logger.emit(
        body=record,
        event_name="plimsoll.audit",
        severity_number=SeverityNumber.INFO,
        attributes={PROFILE: str(record.get("profile", ""))},
    )


MCP_DURATION = "mcp.server.operation.duration"


def instrument_mcp(server: Any) -> None:
    """Time every MCP request `server` (an MCPServer) handles, when telemetry is on.

    The MCP SDK already makes the `tools/call` span (SERVER, `mcp.method.name`,
    `gen_ai.tool.name`, `gen_ai.operation.name`, `jsonrpc.request.id`) with the global
    tracer provider that `configure` sets; this adds the conventions' duration metric,
    with the same low-cardinality attributes, from a middleware inside that span.
    """
    t = _current()
    if t is None:
        return
    histogram = t.meter_provider.get_meter("plimsoll-specgen").create_histogram(
        MCP_DURATION,
        unit="s",
        description="MCP request duration as the server observes it.",
        explicit_bucket_boundaries_advisory=[
            0.01,
            0.02,
            0.05,
            0.1,
            0.2,
            0.5,
            1,
            2,
            5,
            10,
            30,
            60,
            120,
            300,
        ],
    )

    async def timed(ctx: Any, call_next: Any) -> Any:
        attributes: dict[str, Any] = {"mcp.method.name": ctx.method}
        if ctx.protocol_version:
            attributes["mcp.protocol.version"] = ctx.protocol_version
        name = ctx.params.get("name") if ctx.params else None
        if ctx.method == "tools/call":
            attributes["gen_ai.operation.name"] = "execute_tool"
            if isinstance(name, str):
                attributes["gen_ai.tool.name"] = name
        started = time.monotonic()
        try:
            result = await call_next(ctx)
        except Exception as exc:
            attributes[ERROR_TYPE] = type(exc).__qualname__
            histogram.record(time.monotonic() - started, attributes)
            raise
        if getattr(result, "is_error", False):
            attributes[ERROR_TYPE] = "tool_error"
        histogram.record(time.monotonic() - started, attributes)
        return result

    server._lowlevel_server.middleware.append(timed)
