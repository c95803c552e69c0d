"""Review attack on the compiled-engine cache, whose rules the template cache follows:
what is deserialised (native code the host runs) must be the entry that was checked.

The cache folder is a link someone else controls (PLIMSOLL_CACHE_DIR in a shared
place): it points at our folder while the folder is checked and at theirs after.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import wasmtime

from runtime.sandbox import engine as engine_mod
from specgen.cache_dir import SECRET_NAME, seal

OTHER_UID = 65534  # nobody


def _entry(engine: wasmtime.Engine, folder: Path, export: str) -> Path:
    folder.mkdir(mode=0o700, exist_ok=True)
    body = bytes(wasmtime.Module(engine, f'(module (func (export "{export}")))').serialize())
    path = folder / "qjs.cwasm"
    sealed = seal(path, body)  # under the folder's own cache secret
    assert sealed is not None
    path.write_bytes(sealed)
    path.chmod(0o600)
    return path


@pytest.mark.skipif(
    os.getuid() != 0 and not os.environ.get("CI"), reason="chown to another user needs root"
)
def test_an_engine_cache_folder_swapped_after_its_check_is_not_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = engine_mod.make_engine(pooled=False)
    theirs = tmp_path / "theirs"
    planted = _entry(engine, theirs, "theirs")
    os.chown(planted, OTHER_UID, OTHER_UID)
    os.chown(theirs / SECRET_NAME, OTHER_UID, OTHER_UID)
    os.chown(theirs, OTHER_UID, OTHER_UID)
    ours = tmp_path / "ours"
    _entry(engine, ours, "ours")
    link = tmp_path / "cache"
    link.symlink_to(ours)
    entry = link / "qjs.cwasm"

    # the control: unswapped, ours is read; pointing at theirs, nothing is
    found = engine_mod._read_cached(engine, entry)
    assert found is not None and [e.name for e in found.exports] == ["ours"]
    link.unlink()
    link.symlink_to(theirs)
    assert engine_mod._read_cached(engine, entry) is None
    link.unlink()
    link.symlink_to(ours)

    our_inode = ours.stat().st_ino
    swapped: list[bool] = []

    def swap_after(result: os.stat_result) -> os.stat_result:
        if result.st_ino == our_inode and not swapped:
            swapped.append(True)
            link.unlink()
            link.symlink_to(theirs)
        return result

    real_stat, real_fstat = os.stat, os.fstat
    monkeypatch.setattr(os, "stat", lambda *a, **k: swap_after(real_stat(*a, **k)))
    monkeypatch.setattr(os, "fstat", lambda *a, **k: swap_after(real_fstat(*a, **k)))
    found = engine_mod._read_cached(engine, entry)
    monkeypatch.undo()
    assert swapped, "the folder was never looked at"
    assert found is None or [e.name for e in found.exports] == ["ours"], "theirs was loaded"
