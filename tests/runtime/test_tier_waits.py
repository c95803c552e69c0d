"""How the two ends of an engine process's pipe wait, and when a pool retires one.

The pipe's reader on its own is test_tier_wire.py; here, real engine processes: both
ends read without blocking and look for the next frame as long as the run says (the
broker's side sets it per run from how many runs are busy; the engine process is told
in the run's frame), and a pool replaces an engine process that says it has used half
its CPU limit before the limit can kill it during a run.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest

from runtime import RunPool, load_grants
from runtime.tiers import boundary, wire
from tests.runtime.test_run_cli import KEY, grants_file

CALLER = "support-agent"
#: A guest busy for a few hundred milliseconds, so two such runs overlap.
BUSY = "let s = 0; for (let i = 0; i < 2000000; i++) s += i % 7; print(s);"
#: What the engine process's own end of the pipe is set to, read from inside it.
ENGINE_END = """
import gc, os
pipes = [o for o in gc.get_objects() if type(o).__name__ == "_Pipe"]
result = {"spin_s": [p._reader.spin_s for p in pipes], "blocking": os.get_blocking(0)}
"""


@pytest.fixture
def profile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("CLOUDFLARE_API_TOKEN", KEY)
    return load_grants(grants_file(tmp_path)).select("agent-memory", CALLER)


@pytest.fixture
def engine() -> Iterator[boundary.EngineProcess]:
    started = boundary.EngineProcess("worker", escape_hook=True)
    yield started
    started.close()


def _inside(engine: boundary.EngineProcess) -> dict:
    engine.send({"t": "escape", "source": ENGINE_END})
    frame, _ = engine.read(time.monotonic() + 60)
    assert frame["t"] == "escaped", frame
    return frame["result"]


def test_both_ends_read_without_blocking_and_spin_as_long_as_the_run_says(
    engine: boundary.EngineProcess, profile
) -> None:
    assert not os.get_blocking(engine._in)
    assert engine.spin_s == wire.spin_for(1)
    for spin_s in (0.000123, 0.0):
        engine.spin_s = spin_s
        outcome = boundary.run_isolated(engine, 'print("x")', profile, caller=CALLER)
        assert outcome.result.exit_code == 0, outcome.result.stderr
        assert engine._reader.spin_s == spin_s
        assert _inside(engine) == {"spin_s": [spin_s], "blocking": False}


def test_an_engine_says_how_much_cpu_it_has_used_at_each_runs_end(
    engine: boundary.EngineProcess, profile
) -> None:
    assert engine.cpu_s == 0.0
    boundary.run_isolated(engine, 'print("x")', profile, caller=CALLER)
    first = engine.cpu_s
    assert first > 0  # importing and starting the engine alone takes CPU
    outcome = boundary.run_isolated(engine, BUSY, profile, caller=CALLER)
    assert outcome.result.exit_code == 0, outcome.result.stderr
    assert engine.cpu_s - first > 0.05
    assert not engine.worn


class _Counted(boundary.EngineProcess):
    """An engine process that keeps count of its kind, and of the spin each run had."""

    started: ClassVar[list[_Counted]] = []
    spins: ClassVar[list[float]] = []

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        _Counted.started.append(self)

    def begin_run(self) -> None:
        _Counted.spins.append(self.spin_s)
        super().begin_run()


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> type[_Counted]:
    import runtime.pool

    monkeypatch.setattr(runtime.pool, "EngineProcess", _Counted)
    monkeypatch.setattr(_Counted, "started", [])
    monkeypatch.setattr(_Counted, "spins", [])
    return _Counted


@pytest.mark.parametrize("retire_at", [1e-9, boundary.RETIRE_CPU_S], ids=["worn", "fresh"])
def test_a_pool_replaces_an_engine_that_has_used_half_its_cpu_limit_before_its_next_run(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    counted: type[_Counted],
    retire_at: float,
) -> None:
    monkeypatch.setenv("CLOUDFLARE_API_TOKEN", KEY)
    monkeypatch.setattr(boundary, "RETIRE_CPU_S", retire_at)
    with RunPool(grants_file(tmp_path), workers=1, isolation="worker") as pool:
        for _ in range(3):
            outcome = pool.run('print("x")', "agent-memory", caller=CALLER)
            assert outcome.result.exit_code == 0, outcome.result.stderr
    assert len(counted.started) == (3 if retire_at < 1 else 1)
    assert [e.alive for e in counted.started] == [False] * len(counted.started)


def test_a_pool_spins_while_its_busy_runs_fit_the_cpus_and_not_when_they_do_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, counted: type[_Counted]
) -> None:
    import runtime.pool

    monkeypatch.setenv("CLOUDFLARE_API_TOKEN", KEY)
    asked: list[int] = []
    lock = threading.Lock()

    def spin_for(busy: int) -> float:
        with lock:
            asked.append(busy)
        return busy * 1e-4  # a spin that says how many were busy

    monkeypatch.setattr(runtime.pool, "spin_for", spin_for)
    with RunPool(grants_file(tmp_path), workers=2, isolation="worker") as pool:
        both = [pool.submit(BUSY, "agent-memory", caller=CALLER) for _ in range(2)]
        assert all(f.result().result.exit_code == 0 for f in both)
        alone = pool.run('print("x")', "agent-memory", caller=CALLER)
        assert alone.result.exit_code == 0
    assert sorted(asked[:2]) == [1, 2] and asked[2] == 1
    assert sorted(counted.spins[:2]) == [1e-4, 2e-4] and counted.spins[2] == 1e-4
