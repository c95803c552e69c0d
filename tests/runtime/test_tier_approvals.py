"""Held calls through RunPool on the process tier and on the worker tier.

On the worker tier the engine runs in its own process and the broker, with the
approver, in this one: the run's clock is the broker's, and the engine's copy stops
only when the broker says a call is held. So a person's wait is forgiven there too,
guest code spinning during a hold still meets its own limit, and an engine cannot
stop the broker's clock by claiming a hold itself. The API is a loopback fake, the
independent witness of what was sent.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime import Answer, Limits, Question, RunPool, load_grants
from runtime.tiers import boundary, launch
from tests.runtime.loopback import FakeAPI

KEY = "tier-approval-key-3f7e"
CALLER = "ops"
POOLED_TIERS = ["process", "worker"]


class Person:
    """A scripted approver: answers `answer` after `delay_s`, records the questions."""

    channel = "test"

    def __init__(self, answer: Answer = Answer.YES, delay_s: float = 0.0) -> None:
        self.answer = answer
        self.delay_s = delay_s
        self.questions: list[Question] = []

    def __call__(self, question: Question, timeout_s: float) -> Answer | None:
        self.questions.append(question)
        time.sleep(self.delay_s)
        return self.answer


@pytest.fixture
def api() -> Iterator[FakeAPI]:
    server = FakeAPI()
    yield server
    server.close()


def _grants(tmp_path: Path, api: FakeAPI) -> Path:
    body = {
        "base_url": api.url,
        "allowed_callers": [CALLER],
        "token": {"type": "static", "env": "TIER_APPROVAL_KEY"},
        "allow": ["GET /v1/items/*", {"route": "POST /v1/items", "approve": True}],
    }
    path = tmp_path / "grants.json"
    path.write_text(json.dumps({"profiles": {"p": body}}), "utf-8")
    return path


@pytest.fixture
def pool(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    api: FakeAPI,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[RunPool]:
    monkeypatch.setenv("TIER_APPROVAL_KEY", KEY)
    with RunPool(_grants(tmp_path, api), workers=1, isolation=request.param) as opened:
        opened.warm()
        yield opened


def _audit(outcome: object) -> dict:
    record: dict = json.loads(outcome.audit)  # type: ignore[attr-defined]
    return record


POST = """
const r = await host.post("/v1/items", {n: 1}).catch(e => e);
console.log(r instanceof Error ? r.message.trim() : JSON.stringify(r));
"""


@pytest.mark.parametrize("pool", POOLED_TIERS, indirect=True)
def test_a_held_call_is_asked_and_sent_as_approved(pool: RunPool, api: FakeAPI) -> None:
    person = Person()
    out = pool.run(POST, "p", caller=CALLER, timeout_s=5.0, approver=person)
    assert out.result.stdout == '{"ok":true}\n', out.result.stderr
    [question] = person.questions
    [seen] = api.requests
    assert question.method == "POST" and seen.body == b'{"n":1}'
    record = _audit(out)
    assert record["isolation"] == pool.isolation
    assert record["calls"][0]["approval"] == "approved"


@pytest.mark.parametrize("pool", POOLED_TIERS, indirect=True)
def test_a_declined_call_never_reaches_the_api(pool: RunPool, api: FakeAPI) -> None:
    out = pool.run(POST, "p", caller=CALLER, timeout_s=5.0, approver=Person(Answer.NO))
    assert out.result.stdout == "host api 403: approval declined\n"
    assert api.requests == []
    assert _audit(out)["calls"][0]["approval"] == "declined"


@pytest.mark.parametrize("pool", POOLED_TIERS, indirect=True)
def test_without_an_approver_a_held_call_is_refused(pool: RunPool, api: FakeAPI) -> None:
    out = pool.run(POST, "p", caller=CALLER, timeout_s=5.0)
    assert out.result.stdout.startswith("host api 403: approval declined")
    assert api.requests == []
    assert _audit(out)["calls"][0]["approval"] == "unavailable"


@pytest.mark.parametrize("pool", ["worker"], indirect=True)
def test_a_wait_of_10_s_does_not_count_against_a_5_s_run_on_the_worker_tier(
    pool: RunPool, api: FakeAPI
) -> None:
    code = POST + 'console.log("after");'
    out = pool.run(code, "p", caller=CALLER, timeout_s=5.0, approver=Person(delay_s=10.0))
    assert out.result.timed_out is False, out.result.stderr
    assert (out.result.exit_code, out.result.stdout) == (0, '{"ok":true}\nafter\n')
    assert out.result.duration_s >= 10
    assert len(api.requests) == 1
    assert _audit(out)["calls"][0]["approval_wait_ms"] >= 10_000


@pytest.mark.parametrize("pool", POOLED_TIERS, indirect=True)
def test_the_wait_is_forgiven_for_a_blocking_raw_call_too(pool: RunPool, api: FakeAPI) -> None:
    # A blocking call: on the worker tier the broker holds it on the thread that reads
    # the engine's frames, and the engine's clock stops meanwhile.
    code = """
    const r = __coderunner_host_call(JSON.stringify({method: "POST", path: "/v1/items", body: {a: 1}}));
    let n = 0; for (let i = 0; i < 1000; i++) n += i;
    console.log(r.status, n);
    """
    out = pool.run(code, "p", caller=CALLER, timeout_s=1.0, approver=Person(delay_s=3.0))
    assert (out.result.exit_code, out.result.stdout) == (0, "200 499500\n"), out.result.stderr


@pytest.mark.parametrize("pool", POOLED_TIERS, indirect=True)
def test_guest_code_spinning_while_a_call_is_held_still_meets_its_timeout(
    pool: RunPool, api: FakeAPI
) -> None:
    code = 'host.post("/v1/items", {a: 1}).catch(() => {}); for (;;) {}'
    started = time.monotonic()
    out = pool.run(code, "p", caller=CALLER, timeout_s=1.0, approver=Person(delay_s=4.0))
    assert out.result.timed_out is True
    assert out.result.internal_error == ""  # the engine's own limit ended it, not the broker
    assert time.monotonic() - started < 4.0 + 2.0


#: A stand-in engine process that, once its run starts, claims a call is held (the
#: broker's frame, sent the wrong way) and then never finishes.
SELF_HOLDING_ENGINE = """
import os, sys, time
sys.path[:0] = [ROOT]
from runtime.tiers import wire
reader = wire.FrameReader(0)
wire.write_frame(1, {"t": "hello", "pid": os.getpid()})
while True:
    frame, _ = reader.read()
    if frame["t"] == "warm":
        wire.write_frame(1, {"t": "ready"})
    elif frame["t"] == "run":
        break
for kind in KINDS:
    wire.write_frame(1, {"t": kind})
time.sleep(60)
"""


@pytest.mark.parametrize("kinds", [["hold"], ["release"], []], ids=["hold", "release", "silent"])
def test_an_engine_cannot_hold_the_runs_deadline_open(
    kinds: list[str], tmp_path: Path, api: FakeAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TIER_APPROVAL_KEY", KEY)
    root = str(Path(__file__).resolve().parents[2])
    script = f"ROOT = {root!r}\nKINDS = {kinds!r}\n" + SELF_HOLDING_ENGINE
    monkeypatch.setattr(launch, "command", lambda *a, **k: [sys.executable, "-c", script])
    profile = load_grants(_grants(tmp_path, api)).select("p", CALLER)
    engine = boundary.EngineProcess("worker")
    outcomes: list = []
    runner = threading.Thread(
        target=lambda: outcomes.append(
            boundary.run_isolated(
                engine, "1", profile, caller=CALLER, limits=Limits(timeout_s=1.0), approver=Person()
            )
        ),
        daemon=True,
    )
    started = time.monotonic()
    runner.start()
    runner.join(timeout=1.0 + boundary.DONE_GRACE_S + 5)
    assert outcomes, "the broker waited past the run's deadline for an engine"
    outcome = outcomes[0]
    if kinds:  # a frame only the broker sends is the engine breaking the protocol
        assert outcome.result.internal_error == boundary.ENGINE_PROTOCOL
        assert time.monotonic() - started < 1.0
    else:  # silence: the broker's own clock, never stopped, ends the run
        assert outcome.result.internal_error == boundary.ENGINE_DIED
        assert time.monotonic() - started >= 1.0 + boundary.DONE_GRACE_S
    assert not engine.alive
    assert json.loads(outcome.audit)["isolation"] == "worker"
