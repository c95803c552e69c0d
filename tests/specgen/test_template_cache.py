"""Compiled templates are reused from disk only when they are ours, whole and current.

An entry is code the generator runs: one that anybody else could have written, that is
corrupt, or that was compiled from another version of the template must be ignored (the
template is compiled again), and the output is the same either way.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import jinja2
import platformdirs
import pytest

from specgen.cache_dir import CACHE_ENV, SECRET_NAME, cache_dir
from specgen.template_cache import TemplateCache

REPO = Path(__file__).resolve().parents[2]
SPEC = REPO / "tests" / "data" / "smart-home.openapi.json"


def _env(templates: Path, cache: Path) -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        bytecode_cache=TemplateCache(cache),
    )


class _Compiles:
    """Counts the templates an environment compiles from source."""

    def __init__(self, env: jinja2.Environment, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        original = env.compile

        def counting(*args: Any, **kwargs: Any) -> Any:
            self.count += 1
            return original(*args, **kwargs)

        monkeypatch.setattr(env, "compile", counting)


def _render(templates: Path, cache: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, int]:
    env = _env(templates, cache)
    compiles = _Compiles(env, monkeypatch)
    return env.get_template("t.j2").render(name="x"), compiles.count


@pytest.fixture
def templates(tmp_path: Path) -> Path:
    folder = tmp_path / "templates"
    folder.mkdir()
    (folder / "t.j2").write_text("{% for i in range(2) %}\n{{ name }}{{ i }}\n{% endfor %}\n")
    return folder


def test_a_second_start_reuses_the_compiled_template(
    templates: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    first = _render(templates, cache, monkeypatch)
    second = _render(templates, cache, monkeypatch)
    assert first == ("x0\nx1\n", 1)
    assert second == ("x0\nx1\n", 0)
    (entry,) = cache.glob("jinja-*.bin")
    assert entry.stat().st_mode & 0o777 == 0o600
    assert cache.stat().st_mode & 0o777 == 0o700


def test_an_edited_template_is_compiled_again(
    templates: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    _render(templates, cache, monkeypatch)
    (templates / "t.j2").write_text("edited {{ name }}\n")
    assert _render(templates, cache, monkeypatch) == ("edited x\n", 1)
    assert _render(templates, cache, monkeypatch) == ("edited x\n", 0)


def test_the_folder_keeps_only_the_newest_entries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An entry's name covers the template's file, so every checkout writes its own; the
    folder keeps the most recently written MAX_ENTRIES, and the newest still serve."""
    from specgen import template_cache

    monkeypatch.setattr(template_cache, "MAX_ENTRIES", 3)
    cache = tmp_path / "cache"
    checkouts = []
    for i in range(5):
        folder = tmp_path / f"checkout{i}"
        folder.mkdir()
        (folder / "t.j2").write_text("{{ name }}\n")
        checkouts.append(folder)
        before = set(cache.glob("jinja-*.bin"))
        assert _render(folder, cache, monkeypatch) == ("x\n", 1)
        for new in set(cache.glob("jinja-*.bin")) - before:  # file times are coarse: apart
            os.utime(new, (time.time() - 100 + i, time.time() - 100 + i))
    assert len(list(cache.glob("jinja-*.bin"))) == 3
    assert (cache / SECRET_NAME).exists()  # not an entry: never removed
    assert _render(checkouts[-1], cache, monkeypatch) == ("x\n", 0)
    assert _render(checkouts[0], cache, monkeypatch) == ("x\n", 1)


@pytest.mark.parametrize("who", ["entry", "folder"])
def test_an_entry_others_could_write_is_ignored(
    templates: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, who: str
) -> None:
    cache = tmp_path / "cache"
    _render(templates, cache, monkeypatch)
    (entry,) = cache.glob("jinja-*.bin")
    target = entry if who == "entry" else cache
    target.chmod(target.stat().st_mode | 0o022)
    assert _render(templates, cache, monkeypatch) == ("x0\nx1\n", 1)


def test_a_corrupt_entry_is_ignored(
    templates: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    _render(templates, cache, monkeypatch)
    (entry,) = cache.glob("jinja-*.bin")
    data = bytearray(entry.read_bytes())
    data[len(data) // 2] ^= 0xFF
    entry.write_bytes(bytes(data))
    assert _render(templates, cache, monkeypatch) == ("x0\nx1\n", 1)
    entry.write_bytes(b"")
    assert _render(templates, cache, monkeypatch) == ("x0\nx1\n", 1)


def test_other_environment_settings_do_not_share_an_entry(
    templates: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    _render(templates, cache, monkeypatch)
    env = _env(templates, cache)
    env.trim_blocks = False  # compiled code differs: its entry must too
    compiles = _Compiles(env, monkeypatch)
    assert env.get_template("t.j2").render(name="x") == "\nx0\n\nx1\n\n"
    assert compiles.count == 1


def test_an_unwritable_cache_folder_costs_a_compile_not_a_failure(
    templates: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    assert _render(templates, blocker / "cache", monkeypatch) == ("x0\nx1\n", 1)


def test_the_folder_is_the_engine_caches_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(CACHE_ENV, raising=False)
    for xdg in (None, "", str(tmp_path / "xdg")):
        if xdg is None:
            monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
        else:
            monkeypatch.setenv("XDG_CACHE_HOME", xdg)
        expected = platformdirs.user_cache_dir("plimsoll-specgen", appauthor=False)
        assert cache_dir() == Path(expected)
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "override"))
    assert cache_dir() == tmp_path / "override"


@pytest.mark.parametrize("xdg", ["relative/cache", "./c", " /abs", "~/c"])
@pytest.mark.parametrize("home", ["real", "relative-home"])
def test_a_relative_cache_home_is_ignored_as_xdg_and_platformdirs_do(
    xdg: str, home: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both caches hold code that gets loaded; a relative XDG_CACHE_HOME (or HOME) taken
    as given put them under the folder the command started in, where at df9246f the
    runtime's engine cache, which asked platformdirs, stayed in the user's home."""
    monkeypatch.delenv(CACHE_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", xdg)
    if home == "relative-home":
        monkeypatch.setenv("HOME", "relative-home")
    monkeypatch.chdir(tmp_path)
    folder = cache_dir()
    assert folder.is_absolute()
    assert folder == Path(platformdirs.user_cache_dir("plimsoll-specgen", appauthor=False))


def test_builds_from_a_warm_cache_write_the_same_files(tmp_path: Path) -> None:
    """Whole processes: cold cache, warm cache and no usable cache agree byte for byte."""
    env = {**os.environ, CACHE_ENV: str(tmp_path / "cache")}
    outs = []
    for run in ("cold", "warm"):
        out = tmp_path / run
        subprocess.run(
            [sys.executable, "-m", "specgen", "build", str(SPEC), "-o", str(out), "-q"],
            env=env,
            check=True,
        )
        outs.append({p.name: p.read_bytes() for p in sorted(out.iterdir())})
    assert len(list((tmp_path / "cache").iterdir())) >= 4
    env[CACHE_ENV] = str(tmp_path / "file-not-folder")
    (tmp_path / "file-not-folder").write_text("")
    out = tmp_path / "none"
    subprocess.run(
        [sys.executable, "-m", "specgen", "build", str(SPEC), "-o", str(out), "-q"],
        env=env,
        check=True,
    )
    outs.append({p.name: p.read_bytes() for p in sorted(out.iterdir())})
    assert outs[0] == outs[1] == outs[2]


@pytest.mark.parametrize("relative", ["cache", "./.cache", "~/c", "../c"])
def test_a_relative_cache_override_is_ignored(
    relative: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PLIMSOLL_CACHE_DIR=cache resolved against the working folder, a checkout whose
    files (a planted `jinja-*.bin`) the repository's authors chose; it is ignored, as a
    relative XDG_CACHE_HOME is."""
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv(CACHE_ENV, relative)
    monkeypatch.chdir(tmp_path)
    folder = cache_dir()
    assert folder.is_absolute()
    assert folder == Path(platformdirs.user_cache_dir("plimsoll-specgen", appauthor=False))


def test_the_cache_secret_is_private_and_reused(
    templates: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    _render(templates, cache, monkeypatch)
    key = cache / SECRET_NAME
    first = key.read_bytes()
    assert key.stat().st_mode & 0o777 == 0o600 and len(first) == 32
    (templates / "t.j2").write_text("edited {{ name }}\n")
    _render(templates, cache, monkeypatch)
    assert key.read_bytes() == first
    assert sorted(p.name for p in cache.iterdir() if p.name.startswith(".")) == []


def test_no_secret_is_left_in_a_folder_others_may_write(
    templates: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cache folder set to a shared one (/tmp): nothing there would ever be trusted,
    so nothing is written there, the key included; rendering still works."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    assert _render(templates, shared, monkeypatch)[0] == "x0\nx1\n"
    assert list(shared.iterdir()) == []
