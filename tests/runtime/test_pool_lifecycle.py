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

from runtime import RunPool
from runtime.cli import run
from runtime.pool import WorkerDied
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
