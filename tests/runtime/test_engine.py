"""Engine pinning and the compiled-module cache (runtime/engine.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from runtime import EngineError, Limits, run_sandbox
from runtime.sandbox import engine, engine_file
from specgen.cache_dir import CACHE_ENV, SECRET_NAME, seal


def test_only_the_pinned_wasm_is_accepted():
    data = engine.wasm_path().read_bytes()
    assert engine.verify_wasm(data) is data
    with pytest.raises(
        EngineError,
        match=r"^engine refused: wasm module sha256 [0-9a-f]{64} is not the pinned build of the quickjs-ng 0.17.0.2 sdist",
    ):
        engine.verify_wasm(data[:-1] + bytes([data[-1] ^ 1]))


def test_cache_key_covers_wasm_engine_settings_and_wasmtime_version(monkeypatch):
    key = engine_file.cache_key()
    settings = engine_file.engine_settings()
    assert settings["wasmtime"] == "50.0.1" and settings["epoch_interruption"] is True
    monkeypatch.setattr(engine_file, "engine_settings", lambda: {**settings, "wasmtime": "51.0.0"})
    assert engine_file.cache_key() != key
    monkeypatch.setattr(
        engine_file, "engine_settings", lambda: {**settings, "max_wasm_stack": 1 << 20}
    )
    assert engine_file.cache_key() != key
    monkeypatch.setattr(engine_file, "engine_settings", lambda: settings)
    monkeypatch.setattr(engine_file, "WASM_SHA256", "0" * 64)
    assert engine_file.cache_key() != key


def test_cache_entry_is_used_and_bad_entries_are_recompiled(tmp_path, monkeypatch):
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    eng = engine.make_engine()
    _, how, top = engine.load_module(eng)
    assert how == "compiled" and top == engine.STACK_BYTES == 1 << 20
    path = engine.cache_path()
    names = sorted(p.name for p in path.parent.iterdir())
    assert path.is_file() and names == sorted([path.name, SECRET_NAME])  # no temp left
    assert engine.load_module(eng)[1] == "cache"

    good = path.read_bytes()
    flipped = bytearray(good)
    flipped[len(flipped) // 2] ^= 0xFF
    path.write_bytes(bytes(flipped))
    assert engine.load_module(eng)[1] == "compiled"  # checksum mismatch
    assert path.read_bytes() == good  # rewritten

    junk = b"not a serialized module"
    sealed = seal(path, junk)
    assert sealed is not None
    path.write_bytes(sealed)
    assert engine.load_module(eng)[1] == "compiled"  # deserialize refused it
    path.write_bytes(b"")
    assert engine.load_module(eng)[1] == "compiled"  # truncated
    assert engine.load_module(eng)[1] == "cache"


def test_a_cache_entry_others_could_have_written_is_not_loaded(tmp_path, monkeypatch):
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    eng = engine.make_engine()
    engine.load_module(eng)
    path = engine.cache_path()
    assert engine.load_module(eng)[1] == "cache"
    path.parent.chmod(0o777)  # a shared folder: anyone could have replaced the entry
    assert engine.load_module(eng)[1] == "compiled"
    path.parent.chmod(0o700)
    path.chmod(0o666)  # a group/world-writable entry in a private folder
    assert engine.load_module(eng)[1] == "compiled"
    path.chmod(0o600)
    assert engine.load_module(eng)[1] == "cache"


def test_unwritable_cache_dir_is_not_fatal(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    monkeypatch.setenv(CACHE_ENV, str(blocker / "sub"))
    assert engine.load_module(engine.make_engine())[1] == "compiled"


def test_a_new_process_with_a_warm_cache_does_not_compile(tmp_path):
    env = {**os.environ, CACHE_ENV: str(tmp_path)}
    code = "from runtime import run_sandbox; from runtime.sandbox import engine; print(engine.get_engine().loaded_from, run_sandbox('print(6*7)').stdout.strip())"
    root = Path(__file__).resolve().parents[2]
    outs = [
        subprocess.run(
            [sys.executable, "-c", code],
            env=env,
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for _ in range(2)
    ]
    assert outs == ["compiled 42\n", "cache 42\n"]


def test_runs_beyond_the_pools_slots_use_an_on_demand_twin_with_its_own_deadline():
    # Every slot of the pool taken (as by POOL_SLOTS runs in flight): the next run must
    # still start, from the on-demand twin, and its deadline must still end it.
    eng = engine.get_engine()
    if not eng.pooled:
        pytest.skip("this host cannot reserve the pool (RLIMIT_AS): every run is on demand")
    taken = 0
    while eng._slots.acquire(blocking=False):
        taken += 1
    try:
        assert taken == engine.POOL_SLOTS
        with eng.instance() as inst:
            assert inst is not eng and not inst.pooled
        ok = run_sandbox("print(6 * 7)")
        assert (ok.exit_code, ok.stdout) == (0, "42\n")
        spin = run_sandbox("for (;;) {}", limits=Limits(timeout_s=0.3))
        assert (spin.exit_code, spin.timed_out) == (124, True)
    finally:
        for _ in range(taken):
            eng._slots.release()
    with eng.instance() as inst:
        assert inst is eng


def test_a_pool_slot_reused_by_the_next_run_holds_nothing_of_the_last():
    # Pooled slots keep their pages mapped between runs; wasmtime must reset them. A run
    # fills memory with a marker; the next run's whole memory must not contain it.
    marker = "Zq8-slot-marker-"
    first = run_sandbox(f"globalThis.k = {marker!r}.repeat(4096) + 'end'; print(k.length)")
    assert first.exit_code == 0, first.stderr
    memory: list[bytes] = []
    second = run_sandbox("print(1)", memory_probe=memory.append)
    assert second.exit_code == 0 and memory
    assert marker.encode() not in memory[0]


def test_a_planted_entry_owned_by_us_is_not_deserialised(tmp_path, monkeypatch):
    """A file from a checkout or a restored CI cache is ours, private even, and carries
    a correct SHA-256 trailer; it is native code wasmtime would map. Without the seal
    of the per-user secret it is never deserialised, and a secret file that others
    can read (planted with the entry, or left by an unpacked archive) is no secret."""
    import hashlib

    import wasmtime

    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    eng = engine.make_engine(pooled=False)
    path = engine.cache_path()
    path.parent.mkdir(mode=0o700)
    theirs = bytes(wasmtime.Module(eng, '(module (func (export "theirs")))').serialize())
    path.write_bytes(theirs + hashlib.sha256(theirs).digest())
    path.chmod(0o600)
    assert engine._read_cached(eng, path) is None

    key = path.parent / SECRET_NAME
    key.write_bytes(b"k" * 32)
    key.chmod(0o644)  # what git checks out, what a tar keeps
    planted = seal(path, theirs)  # replaces the readable key before sealing
    assert planted is not None and key.stat().st_mode & 0o077 == 0
    assert key.read_bytes() != b"k" * 32
    import hmac

    forged = theirs + hmac.digest(b"k" * 32, path.name.encode() + b"\0" + theirs, "sha256")
    path.write_bytes(forged)
    assert engine._read_cached(eng, path) is None
    path.write_bytes(planted)  # the control: sealed with the real secret, it loads
    found = engine._read_cached(eng, path)
    assert found is not None and [e.name for e in found.exports] == ["theirs"]
