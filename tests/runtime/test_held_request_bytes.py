"""Request bodies waiting on the host are bounded per run, whatever the call budget.

Host memory is outside the guest's `--memory-mb`: every admitted call keeps its body
until it is answered, and only 16 are on the wire at once, so 9,990 started calls of
1 MiB each held 6.96 GB with a 256 MiB guest. The broker counts the bytes its admitted,
unanswered calls hold and refuses a call past MAX_HELD_REQUEST_BYTES (429, denied),
before it is queued; the count goes down as calls are answered.
"""

from __future__ import annotations

from runtime import Broker, HostRequest
from runtime.broker import handler
from runtime.messages import MSG_HELD, reply_text
from tests.runtime.loopback import FakeAPI, profile

KEY = "sk-held-bytes-0123456789abcdef"
#: A JSON string of exactly 1 MiB, the largest body a call may carry.
BODY = b'"' + b"a" * ((1 << 20) - 2) + b'"'


def test_calls_past_the_held_bytes_bound_are_refused_and_counted(api: FakeAPI) -> None:
    fits = handler.MAX_HELD_REQUEST_BYTES // len(BODY)
    assert fits == 32  # a regression of the bound itself shows here, not as memory
    broker = Broker(profile(api.url, KEY, ("POST /items",), max_calls=1000))
    try:
        # Started, none sent yet: what a guest's loop of unawaited calls does.
        started = [broker.start(HostRequest("POST", "/items", BODY)) for _ in range(fits + 8)]
        replies = [work() for work in started]
        refused = [r for r in replies if r.status == 429]
        assert len(refused) == 8
        assert {r.body for r in refused} == {reply_text(MSG_HELD)}
        assert all(r.status == 200 for r in replies[:fits])
        assert len(api.requests) == fits
        # Answered calls hold nothing: the next one is admitted and sent.
        assert broker.start(HostRequest("POST", "/items", BODY))().status == 200
    finally:
        snapshot = broker.close()
    assert snapshot.denied == 8
    assert len(api.requests) == fits + 1
