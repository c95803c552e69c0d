"""Ending runs early (an operator's Ctrl-C) at every stage a run can be in.

`end_runs_now` must end a run whose engine and image are still being made (the clock is
ended before the guest's instance exists), `RunPool.interrupt` must kill the run going
on and start none of those queued, and a question waiting on the terminal must end when
the run is interrupted, not at its approval timeout.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import pty
import threading
import time
from pathlib import Path

import pytest

from runtime import Question, RunPool, TerminalApprover, end_runs_now, load_grants, run_with_grant
from runtime.sandbox import snapshot
from tests.runtime.test_run_cli import KEY, grants_file

SPIN = "while (true) {}"
CALLER = "support-agent"


def test_a_run_ended_while_its_engine_and_image_are_made_ends_at_its_first_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLOUDFLARE_API_TOKEN", KEY)
    profile = load_grants(grants_file(tmp_path)).select("agent-memory", CALLER)
    made = snapshot.image_for

    def interrupted_meanwhile(*args: object, **kwargs: object) -> object:
        assert end_runs_now() == 1  # the run is registered before its engine is made
        return made(*args, **kwargs)

    monkeypatch.setattr(snapshot, "image_for", interrupted_meanwhile)
    begun = time.monotonic()
    outcome = run_with_grant(SPIN, profile, caller=CALLER)
    assert time.monotonic() - begun < 3, "it ran to its timeout"
    assert outcome.result.timed_out
    assert json.loads(outcome.audit)["profile"] == "agent-memory"


def test_end_runs_now_with_no_run_going_on_ends_nothing_later(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLOUDFLARE_API_TOKEN", KEY)
    profile = load_grants(grants_file(tmp_path)).select("agent-memory", CALLER)
    assert end_runs_now() == 0
    outcome = run_with_grant('print("after")', profile, caller=CALLER)
    assert (outcome.result.exit_code, outcome.result.stdout) == (0, "after\n")


@pytest.mark.parametrize("isolation", ["process", "worker"])
def test_a_pool_interrupt_kills_the_run_going_on_and_starts_none_queued(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, isolation: str
) -> None:
    monkeypatch.setenv("CLOUDFLARE_API_TOKEN", KEY)
    path = grants_file(tmp_path)
    with RunPool(path, workers=1, isolation=isolation) as pool:
        pool.warm()
        going = pool.submit(SPIN, "agent-memory", caller=CALLER, timeout_s=25)
        queued = pool.submit('print("never")', "agent-memory", caller=CALLER)
        waited = time.monotonic() + 20
        while not going.running():
            assert time.monotonic() < waited
            time.sleep(0.02)
        time.sleep(0.5)  # on its process now, spinning
        begun = time.monotonic()
        assert pool.interrupt() == 1
        outcome = going.result(timeout=20)
        assert time.monotonic() - begun < 10
        assert outcome.result.internal_error in ("WorkerDied", "EngineDied")
        assert json.loads(outcome.audit)["profile"] == "agent-memory"
        with pytest.raises(concurrent.futures.CancelledError):
            queued.result(timeout=20)


def test_a_question_on_the_terminal_ends_when_the_run_is_interrupted() -> None:
    master, slave = pty.openpty()
    approver = TerminalApprover(os.dup(slave))
    question = Question(
        profile="p", caller="ops", method="POST", route="/v1/items", path="/v1/items",
        query=(), headers=(), body_type="application/json", body_bytes=2,
        body_sha256="0" * 64, preview="{}", preview_truncated=False,
    )  # fmt: skip
    answers: list[object] = []
    asking = threading.Thread(target=lambda: answers.append(approver(question, 60.0)))
    try:
        asking.start()
        os.read(master, 4096)  # the question is on the terminal
        begun = time.monotonic()
        approver.interrupt()
        asking.join(10)
        assert not asking.is_alive() and time.monotonic() - begun < 5
        assert answers == [None]  # unanswered: the broker declines the call
    finally:
        approver.close()
        os.close(master)
        os.close(slave)
