"""A FIFO planted under a cache entry's name is refused at once, never waited on.

A restored cache (a tar archive) can hold a FIFO where `cache.key`, a compiled template
or the compiled engine belongs. Opening one for reading waits for a writer that never
comes: `specgen build` hung with a FIFO named `cache.key`. Each is tried in a whole
process under a timeout, so a hang fails the test instead of stalling the suite.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from specgen.cache_dir import CACHE_ENV, SECRET_NAME

REPO = Path(__file__).resolve().parents[2]
SPEC = REPO / "tests" / "data" / "smart-home.openapi.json"
#: Far above what a build or an engine load takes on a loaded machine; a hang is forever.
TIMEOUT_S = 120


def _build(cache: Path, out: Path) -> dict[str, bytes]:
    subprocess.run(
        [sys.executable, "-m", "specgen", "build", str(SPEC), "-o", str(out), "-q"],
        env={**os.environ, CACHE_ENV: str(cache)},
        check=True,
        timeout=TIMEOUT_S,
    )
    return {p.name: p.read_bytes() for p in sorted(out.iterdir())}


def test_fifos_under_the_template_caches_names_do_not_hang_a_build(tmp_path: Path) -> None:
    warm = tmp_path / "warm"
    expected = _build(warm, tmp_path / "out-warm")
    names = sorted(p.name for p in warm.iterdir() if p.name.startswith("jinja-"))
    assert names
    planted = tmp_path / "planted"
    planted.mkdir(mode=0o700)
    for name in [SECRET_NAME, *names]:
        os.mkfifo(planted / name, 0o600)
    assert _build(planted, tmp_path / "out-planted") == expected
    # the FIFO key was replaced by a real one, and the entries written afresh
    assert (planted / SECRET_NAME).is_file()
    assert all((planted / name).is_file() for name in names)


def test_a_fifo_under_the_engine_caches_name_does_not_hang_a_load(tmp_path: Path) -> None:
    planted = tmp_path / "planted"
    planted.mkdir(mode=0o700)
    code = (
        "import os, sys\n"
        "from runtime.sandbox import engine\n"
        "os.mkfifo(engine.cache_path(), 0o600)\n"
        "os.mkfifo(engine.cache_path().parent / 'cache.key', 0o600)\n"
        "engine.get_engine()\n"
        "print(engine.cache_path().is_file())\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, CACHE_ENV: str(planted)},
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        cwd=REPO,
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "True\n", "")
