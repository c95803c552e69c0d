"""RunPool when its workers fail: no run waits for ever, every started run ends with an audit."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from runtime import RunPool, load_grants
from runtime.cli import run
from runtime.pool import WorkerDied
from tests.runtime.loopback import FakeAPI
from tests.runtime.test_run_cli import KEY, grants_file

CALLER = "support-agent"


def _no_process(self: RunPool) -> None:
    raise OSError(11, "Resource temporarily unavailable")


def test_a_worker_that_cannot_be_started_fails_its_runs_instead_of_hanging(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLOUDFLARE_API_TOKEN", KEY)
    monkeypatch.setattr(RunPool, "_spawn", _no_process)
    with RunPool(grants_file(tmp_path), workers=2) as pool:
        futures = [pool.submit('print("x")', "agent-memory", caller=CALLER) for _ in range(3)]
        for future in futures:
            with pytest.raises(WorkerDied, match=r"could not start: .*Resource temporarily"):
                future.result(timeout=30)


def test_a_batch_whose_workers_cannot_start_says_so_per_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    grants_file(tmp_path)
    monkeypatch.setattr(RunPool, "_spawn", _no_process)
    paths = []
    for name in ("a.js", "b.js"):
        (tmp_path / name).write_text('print("x")', "utf-8")
        paths.append(str(tmp_path / name))
    result = CliRunner().invoke(
        run,
        [
            *paths,
            "--grants",
            str(tmp_path / "grants.json"),
            "--profile",
            "agent-memory",
            "--caller",
            CALLER,
            "--json",
            "--isolation",
            "process",  # the process tier's workers (an engine process: test_tiers.py)
        ],
        env={"CLOUDFLARE_API_TOKEN": KEY},
        catch_exceptions=False,
    )
    assert result.exit_code == 1
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(r["file"], r["exit_code"]) for r in lines] == [(p, 1) for p in paths]
    assert all("a pool worker could not start" in r["refused"] for r in lines)
    assert all("audit" not in r for r in lines)  # nothing ran, so nothing to audit


def test_a_killed_worker_ends_its_run_with_an_audit_and_is_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLOUDFLARE_API_TOKEN", KEY)
    with RunPool(grants_file(tmp_path), workers=1) as pool:
        pool.warm()
        (worker,) = multiprocessing.active_children()
        spinning = pool.submit(
            "while (true) {}", "agent-memory", caller=CALLER, timeout_s=20, trace_id="t-1"
        )
        threading.Timer(0.5, os.kill, (worker.pid, signal.SIGKILL)).start()
        began = time.monotonic()
        outcome = spinning.result(timeout=30)
        assert time.monotonic() - began < 20
        assert (outcome.result.exit_code, outcome.result.internal_error) == (70, "WorkerDied")
        audit = json.loads(outcome.audit)
        assert (audit["profile"], audit["trace_id"], audit["worker_died"]) == (
            "agent-memory",
            "t-1",
            True,
        )
        after = pool.run('print("next")', "agent-memory", caller=CALLER)
        assert (after.result.exit_code, after.result.stdout) == (0, "next\n")
        assert "worker_died" not in json.loads(after.audit)
        assert worker.pid not in [p.pid for p in multiprocessing.active_children()]


def test_a_killed_workers_audit_names_every_call_its_run_had_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, api: FakeAPI
) -> None:
    """The worker tells the parent of each call as its broker admits it, so when the
    worker dies the parent's audit still lists them (outcome unknown: status 0,
    failure worker_died), in the guest's order, with their routes counted."""
    monkeypatch.setenv("CLOUDFLARE_API_TOKEN", KEY)
    path = grants_file(tmp_path)
    profile = load_grants(path).select("agent-memory", CALLER).with_base_url(api.url)
    code = (
        "const go = p => globalThis.__coderunner_host_start("
        'JSON.stringify({method: "GET", path: p}));'
        ' await Promise.all(["/v1/items/a", "/v1/items/b", "/v1/items/c"].map(go));'
        " while (true) {}"
    )
    with RunPool(path, workers=1) as pool:
        pool.warm()
        (worker,) = multiprocessing.active_children()
        doomed = pool.submit(code, profile, caller=CALLER, timeout_s=20)
        deadline = time.monotonic() + 20
        while len(api.requests) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(api.requests) == 3
        os.kill(worker.pid, signal.SIGKILL)  # type: ignore[arg-type]
        outcome = doomed.result(timeout=30)
    assert outcome.result.internal_error == "WorkerDied"
    audit = json.loads(outcome.audit)
    assert audit["worker_died"] is True
    assert [
        (c["seq"], c["method"], c["route"], c["status"], c["failure"]) for c in audit["calls"]
    ] == [(n, "GET", "/v1/items/*", 0, "worker_died") for n in (1, 2, 3)]
    assert audit["routes"] == [
        {"method": "GET", "route": "/v1/items/*", "calls": 3, "delivered": 0}
    ]
