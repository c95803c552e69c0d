"""Distinct reasons for upstream failures, for the guest and for the operator.

Found: a 5 MB reply, a refused connection, a timeout and a TLS failure all reached the
guest as `host api 502: host api unavailable`, and the audit gave no reason either. Each
now has a status and short fixed text for the guest and an enum value in the trace row
(`failure`), never a URL or exception text.
"""

from __future__ import annotations

import threading
import time

import httpcore
import httpx
import orjson
import pytest

from runtime import Broker, HostRequest, run_with_grant
from runtime.broker.upstream import Failure, classify
from tests.runtime.loopback import FakeAPI, free_port, profile, reply

KEY = "key-for-failure-reasons-0123456789abcdef"


def _one(base_url: str) -> tuple[int, bytes, str | None]:
    broker = Broker(profile(base_url, KEY, ("GET /v1/*",)), upstream_timeout_s=2)
    answer = broker(HostRequest("GET", "/v1/x", None))
    (row,) = broker.close().rows
    return answer.status, answer.body, row.failure


def test_unreachable() -> None:
    assert _one(f"http://127.0.0.1:{free_port()}") == (
        502,
        b"host api unreachable\n",
        "unreachable",
    )


def test_tls_handshake_failure(api: FakeAPI) -> None:
    # The loopback API speaks plain HTTP; a TLS client gets no handshake from it.
    port = api.url.rsplit(":", 1)[1]
    assert _one(f"https://127.0.0.1:{port}") == (502, b"host api TLS handshake failed\n", "tls")


def test_over_the_size_cap(api: FakeAPI) -> None:
    api.responder = reply(200, b"x" * ((4 << 20) + 1))
    assert _one(api.url) == (502, b"host api response too large (over 4 MiB)\n", "too_large")


def test_key_reflected_keeps_the_generic_text_for_the_guest(api: FakeAPI) -> None:
    api.responder = reply(200, KEY.encode().hex().encode())
    assert _one(api.url) == (502, b"host api unavailable\n", "key_reflected")


def test_compressed_reply_is_a_bad_response(api: FakeAPI) -> None:
    api.responder = reply(200, b"\x1f\x8b", {"Content-Encoding": "gzip"})
    assert _one(api.url) == (502, b"host api response malformed\n", "bad_response")


@pytest.mark.parametrize(
    ("exc", "reason"),
    [
        (httpx.ConnectError("refused"), Failure.UNREACHABLE),
        (httpcore.ConnectError("refused"), Failure.UNREACHABLE),
        (httpx.ReadTimeout("slow"), Failure.TIMEOUT),
        (httpcore.ConnectTimeout("slow"), Failure.TIMEOUT),
        (httpcore.RemoteProtocolError("junk"), Failure.BAD_RESPONSE),
        (httpcore.ReadError("reset"), Failure.BAD_RESPONSE),
        (ValueError("anything else"), Failure.BAD_RESPONSE),
    ],
)
def test_classify_reads_types_never_text(exc: Exception, reason: Failure) -> None:
    assert classify(exc) is reason


def test_the_reason_reaches_the_guest_and_the_audit_without_the_url() -> None:
    port = free_port()
    code = 'try { await host.get("/v1/secret-segment") } catch (e) { console.log(e.message) }'
    outcome = run_with_grant(code, profile(f"http://127.0.0.1:{port}", KEY, ("GET /v1/*",)))
    assert outcome.result.stdout == "host api 502: host api unreachable\n"
    (row,) = orjson.loads(outcome.audit)["calls"]
    assert row["failure"] == "unreachable"
    assert str(port) not in outcome.audit and "secret-segment" not in outcome.audit


def test_a_call_on_the_wire_when_the_guest_exits_is_cancelled_not_a_bad_response(
    api: FakeAPI,
) -> None:
    """Found: std.exit while a call waited for a slow API recorded `bad_response`, the
    fault the aborted socket raised, though the API never answered badly: the run's end
    aborted it, which the table of failures calls `cancelled`."""
    answering = threading.Event()

    def slow(handler, seen):  # type: ignore[no-untyped-def]
        answering.wait(10)  # released when the test ends

    api.responder = slow
    code = (
        'import * as std from "qjs:std"; import * as os from "qjs:os";\n'
        'host.get("/v1/slow"); os.setTimeout(() => std.exit(3), 300);'
    )
    try:
        outcome = run_with_grant(code, profile(api.url, KEY, ("GET /v1/*",)))
    finally:
        answering.set()
    assert outcome.result.exit_code == 3
    (row,) = orjson.loads(outcome.audit)["calls"]
    assert (row["status"], row["delivered"], row["failure"]) == (0, False, "cancelled")


def test_a_fault_the_broker_did_not_cause_keeps_its_reason_after_the_run_ends() -> None:
    """Only a call whose socket close() shut is `cancelled`: a transport the broker cannot
    abort (a caller's own) that fails while the run ends failed on its own."""
    release = threading.Event()

    def dropped(request: httpx.Request) -> httpx.Response:
        release.wait(5)
        raise httpx.ReadError("the connection dropped")

    broker = Broker(
        profile("https://api.example.com", KEY, ("GET /v1/*",)),
        transport=httpx.MockTransport(dropped),
    )
    call = threading.Thread(target=broker, args=(HostRequest("GET", "/v1/x", None),))
    call.start()
    time.sleep(0.2)  # on the wire
    closing = threading.Thread(target=broker.close)
    closing.start()
    time.sleep(0.1)  # the run has ended; the call fails now
    release.set()
    closing.join(10)
    call.join(10)
    (row,) = broker.trace.snapshot().rows
    assert (row.status, row.failure) == (0, "bad_response")
