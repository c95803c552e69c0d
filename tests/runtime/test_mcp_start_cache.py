"""A server's start reads back what an earlier start derived from the same document,
grant and code (runtime/mcp/start_cache.py), and nothing else: any change to the input
derives it again, and an entry this user's cache secret did not seal is never unpickled."""

from __future__ import annotations

import json
import os
import pickle
import stat
from pathlib import Path

import pytest

from runtime.mcp import server, start_cache
from runtime.mcp.runner import open_grant
from specgen.cache_dir import CACHE_ENV
from tests.runtime.test_run_cli import KEY, grants_file

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "examples" / "memory_grant" / "agent-memory.openapi.json"
OTHER_ROUTE = "GET /client/v4/accounts/*/agent-memory/namespaces"


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv(CACHE_ENV, str(folder))
    monkeypatch.setenv("CLOUDFLARE_API_TOKEN", KEY)
    return folder


@pytest.fixture
def derived(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The documents `prepare` derived from (not read back), in order."""
    seen: list[str] = []
    real = server._derive

    def counting(name: str, *args: object) -> object:
        seen.append(name)
        return real(name, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(server, "_derive", counting)
    return seen


def _grant(tmp_path: Path, **extra: object):  # type: ignore[no-untyped-def]
    folder = tmp_path / f"grant-{len(list(tmp_path.glob('grant-*')))}"
    folder.mkdir()
    return open_grant(grants_file(folder, **extra), "agent-memory", "support-agent")


def _spec(tmp_path: Path, text: str | None = None) -> str:
    path = tmp_path / "spec.json"
    path.write_text(text if text is not None else SPEC.read_text("utf-8"), "utf-8")
    return str(path)


def _answers(prepared: server.Prepared) -> tuple[str, str, list[str | None]]:
    """What a model reads: the instructions, a search, and every operation described."""
    catalog = prepared.catalog
    names = [f"{g}.{a.types.op.name}" for g, _, allowed in catalog.parts for a in allowed]
    return (
        prepared.instructions,
        catalog.search("remember a memory", 5),
        [catalog.describe(n) for n in names],
    )


def test_a_second_start_reads_back_exactly_what_the_first_derived(
    tmp_path: Path, cache: Path, derived: list[str]
) -> None:
    spec, grant = _spec(tmp_path), _grant(tmp_path)
    first = server.prepare(spec, grant)
    assert derived == [spec]
    assert len(list(cache.glob("mcp-start-*.bin"))) == 1
    second = server.prepare(spec, grant)
    assert derived == [spec], "the second start derived again"
    assert second.catalog.parts == first.catalog.parts
    assert len(second.catalog) == len(first.catalog) > 0
    assert _answers(second) == _answers(first)
    assert second.title == first.title


def test_any_change_of_input_derives_again(
    tmp_path: Path, cache: Path, derived: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    spec, grant = _spec(tmp_path), _grant(tmp_path)
    server.prepare(spec, grant)
    # The document's bytes (a summary the instructions show).
    doc = json.loads(SPEC.read_text("utf-8"))
    doc["info"]["title"] = "Agent Memory, edited"
    _spec(tmp_path, json.dumps(doc))
    assert server.prepare(spec, grant).title == "Agent Memory, edited"
    # The grant: one more route permitted.
    wider = _grant(tmp_path, allow=[OTHER_ROUTE])
    assert len(server.prepare(spec, wider).catalog) != len(server.prepare(spec, grant).catalog)
    # The server URL the routes are taken from.
    server.prepare(spec, grant, "https://api.cloudflare.com/client/v4")
    # The code that derives it.
    monkeypatch.setattr(start_cache, "code_fingerprint", lambda: b"another version")
    server.prepare(spec, grant)
    assert len(derived) == 6


def test_the_fingerprint_covers_every_module_and_template(tmp_path: Path) -> None:
    package, templates = tmp_path / "pkg", tmp_path / "templates"
    (package / "sub").mkdir(parents=True)
    templates.mkdir()
    files = {
        package / "a.py": "A = 1\n",
        package / "sub" / "b.py": "B = 2\n",
        templates / "t.txt.j2": "{{ a }}",
    }
    for path, text in files.items():
        path.write_text(text)

    def now() -> bytes:
        return start_cache.fingerprint([package], [templates])

    before = now()
    seen = {before}
    for path, text in files.items():  # an edit of any one of them
        path.write_text(text + " ")
        seen.add(now())
        path.write_text(text)
        assert now() == before
    (package / "sub" / "c.py").write_text("")  # a module added
    seen.add(now())
    (package / "sub" / "c.py").unlink()
    assert len(seen) == len(files) + 2
    # What Python writes beside the modules is not code that derives anything.
    (package / "__pycache__").mkdir()
    (package / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"\0")
    assert now() == before
    # The installation's own: both packages and the templates, so not empty.
    assert start_cache.code_fingerprint() != start_cache.fingerprint([], [])


def test_the_code_fingerprint_covers_the_libraries_that_derive(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A new jiter, validator or Jinja2 (or PyYAML without its C loader) may read,
    check or render the same document otherwise, and no file of ours changes."""
    start_cache.code_fingerprint.cache_clear()
    try:
        before = start_cache.code_fingerprint()
        versions = start_cache.library_versions()
        assert [v.split("=")[0] for v in versions] == [*start_cache.DERIVING, "libyaml"]
        assert all(not v.endswith("=-") for v in versions)  # all installed here
        for i in range(len(versions)):
            changed = [*versions]
            changed[i] += ".1"
            monkeypatch.setattr(start_cache, "library_versions", lambda c=changed: c)
            start_cache.code_fingerprint.cache_clear()
            assert start_cache.code_fingerprint() != before, versions[i]
    finally:
        start_cache.code_fingerprint.cache_clear()


def test_a_key_that_cannot_be_made_costs_a_derive_not_a_start(
    tmp_path: Path, cache: Path, derived: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A module file unreadable mid-upgrade, say: the start goes on without its cache."""
    spec, grant = _spec(tmp_path), _grant(tmp_path)
    good = server.prepare(spec, grant)

    def unreadable() -> bytes:
        raise PermissionError(13, "Permission denied", "runtime/pool.py")

    monkeypatch.setattr(start_cache, "code_fingerprint", unreadable)
    assert _answers(server.prepare(spec, grant)) == _answers(good)
    assert derived == [spec, spec]


class _Planted:
    """Unpickling this runs code: what a planted entry would do."""

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.system, ("touch planted-ran",))


def test_an_entry_not_sealed_by_this_users_secret_is_never_unpickled(
    tmp_path: Path, cache: Path, derived: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    spec, grant = _spec(tmp_path), _grant(tmp_path)
    good = server.prepare(spec, grant)
    (entry,) = cache.glob("mcp-start-*.bin")
    body = entry.read_bytes()
    key = body[:32]
    planted = key + pickle.dumps(_Planted())
    # Unsealed, sealed under another secret (a restored cache's), or its seal cut off.
    for blob in (planted, planted + b"\0" * 32, body[:-32]):
        entry.write_bytes(blob)
        entry.chmod(0o600)
        again = server.prepare(spec, grant)
        assert _answers(again) == _answers(good)
    assert not (tmp_path / "planted-ran").exists()
    assert derived == [spec] * 4
    # The entry written last is this user's own again, and is read back.
    server.prepare(spec, grant)
    assert derived == [spec] * 4


def test_an_entry_others_can_write_is_not_read(
    tmp_path: Path, cache: Path, derived: list[str]
) -> None:
    spec, grant = _spec(tmp_path), _grant(tmp_path)
    server.prepare(spec, grant)
    (entry,) = cache.glob("mcp-start-*.bin")
    entry.chmod(entry.stat().st_mode | stat.S_IWOTH)
    server.prepare(spec, grant)
    assert derived == [spec, spec]


def test_a_cache_folder_that_cannot_be_written_costs_a_derive_not_a_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, derived: list[str]
) -> None:
    monkeypatch.setenv("CLOUDFLARE_API_TOKEN", KEY)
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file where the cache folder would be")
    monkeypatch.setenv(CACHE_ENV, str(blocked))
    spec, grant = _spec(tmp_path), _grant(tmp_path)
    first = server.prepare(spec, grant)
    second = server.prepare(spec, grant)
    assert _answers(first) == _answers(second)
    assert derived == [spec, spec]


def test_the_folder_keeps_only_the_newest_entries(cache: Path) -> None:
    """A document read from a new path each time (a temporary folder) leaves no trail."""
    written = []
    for i in range(start_cache.MAX_ENTRIES + 5):
        slot = start_cache.Slot(start_cache.entry_path(f"/docs/{i}.json", "g", "p"), bytes(32))
        start_cache.store(slot, ("entry", i))
        os.utime(slot.path, ns=(i * 10**9, i * 10**9))  # written in this order
        written.append(slot)
    kept = sorted(cache.glob("mcp-start-*.bin"))
    assert kept == sorted(s.path for s in written[-start_cache.MAX_ENTRIES :])
    assert start_cache.load(written[-1]) == ("entry", start_cache.MAX_ENTRIES + 4)
