"""Review attacks on the `specgen build` speed work (duplicates, template_cache, quoting,
oneshot, memoised typescript). Each test attacks one claim; a passing test documents
that the claim held, and each can fail: the duplicate-key cases are refused by the old
full check too, the planted cache entry is proven to run when it is trusted, the hostile
texts are proven to reach the generated files.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import pickle
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import jinja2
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specgen.cache_dir import SECRET_NAME, seal
from specgen.cli import cli
from specgen.duplicates import may_repeat_a_key
from specgen.errors import SpecError
from specgen.extract import _parse as extract_parse
from specgen.load import parse
from specgen.quoting import is_invisible, ts_comment
from specgen.template_cache import TemplateCache
from specgen.typescript import MAX_DOC, doc_text

REPO = Path(__file__).resolve().parents[2]
SMART_HOME = REPO / "tests" / "data" / "smart-home.openapi.json"
OTHER_UID = 65534  # nobody

# -- every duplicate key is still refused, naming the key ------------------------------

DUPLICATES = [
    ('{"openapi":"3.0.0","a:":1,"a:":2}', "a:"),
    ('{"openapi":"3.0.0","a\\u003a":1,"a\\u003a":2}', "a:"),
    ('{"openapi":"3.0.0","a:":1,"a\\u003A":2}', "a:"),
    ('{"openapi":"3.0.0","x":"\\":","x":1}', "x"),
    ('{"openapi":"3.0.0","x":"\\"a\\":1,\\"x\\":","x":1}', "x"),
    ('{"openapi":"3.0.0","p":{"q":{"r":1,"r":{"s:":":"}}}}', "r"),
    ('{"openapi":"3.0.0","1":1,"1":2.5e3}', "1"),
    ('{"openapi":"3.0.0","\\u0022":1,"\\"":2}', '"'),
    ('{"openapi":"3.0.0","a\\\\":1,"a\\\\":2}', "a\\"),
    ('{"openapi":"3.0.0","\\\\u003a":1,"\\\\u003a":2}', "\\u003a"),
    ('{"openapi":"3.0.0","a":1,"\\u0061":2}', "a"),
    ('{ "openapi" : "3.0.0" ,\n\t"a"\r\n:\t1 ,  "a" :2 }', "a"),
    ('{"openapi":"3.0.0","k":{"x":"a:b:c","y":":::"},"k":{"x":"a:b:c","y":":::"}}', "k"),
    ('{"openapi":"3.0.0","\\ud83d\\ude00":1,"\U0001f600":2}', "\U0001f600"),
    ('{"openapi":"3.0.0","big":1,"big":123456789012345678901234567890}', "big"),
    ('{"openapi":"3.0.0","a":{"b":1,"b":2},"c":"\\u003a\\u003a"}', "b"),
]


@pytest.mark.parametrize(("raw", "key"), DUPLICATES)
@pytest.mark.parametrize("reader", ["load", "extract"])
def test_every_duplicate_key_is_refused_naming_it(raw: str, key: str, reader: str) -> None:
    data = raw.encode("utf-8")
    with pytest.raises(SpecError, match="duplicate key") as refused:
        if reader == "load":
            parse("doc.json", data)
        else:
            extract_parse(data, "doc.json")
    assert json.dumps(key) in str(refused.value) or f'"{key}"' in str(refused.value)


@pytest.mark.parametrize("odd", ["NaN", "-Infinity", "1e400", '"\\ud800"'])
def test_extract_refuses_a_duplicate_in_json_only_the_standard_library_reads(odd: str) -> None:
    """orjson refuses NaN, Infinity, 1e400 and a lone surrogate escape; extract then
    reads the document with the standard library, which keeps the last of two keys."""
    raw = f'{{"openapi":"3.0.0","a":1,"a":2,"n":{odd}}}'.encode()
    with pytest.raises(SpecError, match='duplicate key "a"'):
        extract_parse(raw, "doc.json")


def test_a_duplicate_deeper_than_orjson_writes_is_refused() -> None:
    inner = '{"d":1,"d":2}'
    for _ in range(300):
        inner = '{"n":' + inner + "}"
    with pytest.raises(SpecError, match='duplicate key "d"'):
        parse("deep.json", ('{"openapi":"3.0.0","x":' + inner + "}").encode())


def test_a_byte_order_mark_never_hides_a_duplicate() -> None:
    raw = b'\xef\xbb\xbf{"openapi":"3.0.0","a":1,"a":2}'
    with pytest.raises(SpecError) as refused:  # refused either way, never accepted
        parse("bom.json", raw)
    assert "duplicate" in str(refused.value) or "byte-order" in str(refused.value).lower()


_KEYS = st.text(alphabet=st.sampled_from([*'ab:"\\\u00e9\u2028/', "\U0001f600"]), max_size=4)
_SCALARS = st.one_of(
    st.integers(-(2**63), 2**63 - 1), st.booleans(), st.none(), _KEYS, st.floats(-1e9, 1e9)
)
_DOCS = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(_KEYS, inner, min_size=1, max_size=3)
    ),
    max_leaves=12,
)


def _dump(node: Any, draw: Any, dup_at: list[int], counter: list[int]) -> str:
    """JSON text of `node`, each string character escaped or not at random; the object
    whose number is dup_at[0] gets one of its keys written twice."""
    if isinstance(node, dict):
        counter[0] += 1
        pairs = [(k, v) for k, v in node.items()]
        if counter[0] == dup_at[0]:
            k = pairs[draw(st.integers(0, len(pairs) - 1))][0]
            pairs.append((k, draw(_SCALARS)))
        ws = draw(st.sampled_from(["", " ", "\n\t", "\r\n "]))
        body = ",".join(
            f"{ws}{_str(k, draw)}{ws}:{ws}{_dump(v, draw, dup_at, counter)}" for k, v in pairs
        )
        return "{" + body + ws + "}"
    if isinstance(node, list):
        return "[" + ",".join(_dump(v, draw, dup_at, counter) for v in node) + "]"
    if isinstance(node, str):
        return _str(node, draw)
    return json.dumps(node)


def _str(s: str, draw: Any) -> str:
    out = []
    for ch in s:
        if ch in '"\\' or draw(st.booleans()):
            if ord(ch) > 0xFFFF:
                c = ord(ch) - 0x10000
                code = f"\\u{0xD800 + (c >> 10):04x}\\u{0xDC00 + (c & 0x3FF):04x}"
            else:
                code = f"\\u{ord(ch):04{draw(st.sampled_from('xX'))}}"
            out.append(code)
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _objects(node: Any) -> int:
    if isinstance(node, dict):
        return 1 + sum(_objects(v) for v in node.values())
    if isinstance(node, list):
        return sum(_objects(v) for v in node)
    return 0


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.dictionaries(_KEYS, _DOCS, min_size=1, max_size=3), st.data())
def test_a_repeat_written_any_way_is_refused(doc: dict[str, Any], data: Any) -> None:
    """Random documents, every string character escaped or not at random (colons and
    quotes included), random whitespace, one key repeated in one object: always refused."""
    dup_at = [data.draw(st.integers(1, _objects(doc)))]
    text = _dump(doc, data.draw, dup_at, [0])
    wrapped = '{"openapi":"3.0.0","x":' + text + "}"
    with pytest.raises(SpecError, match="duplicate key"):
        parse("doc.json", wrapped.encode("utf-8"))
    # and the same document without the repeat is not refused by the count's logic
    clean = '{"openapi":"3.0.0","x":' + _dump(doc, data.draw, [0], [0]) + "}"
    parse("doc.json", clean.encode("utf-8"))


def test_the_count_never_clears_a_document_whose_parse_dropped_something() -> None:
    """may_repeat_a_key against a parse that kept fewer pairs: never False."""
    raw = b'{"a":"x:y","a":"z"}'
    assert may_repeat_a_key(raw, {"a": "z"})
    assert may_repeat_a_key(b'{"a":1,"b":{"c":2,"c":3}}', {"a": 1, "b": {"c": 3}})


# -- the template cache runs only what this user compiled ------------------------------


def _env(templates: Path, cache: Path) -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates)),
        keep_trailing_newline=True,
        bytecode_cache=TemplateCache(cache),
    )


@pytest.fixture
def templates(tmp_path: Path) -> Path:
    folder = tmp_path / "templates"
    folder.mkdir()
    (folder / "t.j2").write_text("hello {{ name }}\n")
    return folder


def _plant(templates: Path, folder: Path, marker: Path, *, sealed: bool = True) -> Path:
    """Write, in `folder`, a well-formed entry (right name, right source checksum, and
    the folder's own cache seal, or with `sealed=False` only a SHA-256 trailer, what a
    planter without the secret can write) whose code creates `marker` before defining
    the real template."""
    folder.mkdir(mode=0o700, exist_ok=True)
    env = _env(templates, folder)
    cache = env.bytecode_cache
    assert isinstance(cache, TemplateCache)
    source = (templates / "t.j2").read_text()
    bucket = cache.get_bucket(env, "t.j2", str(templates / "t.j2"), source)
    python = env.compile(source, "t.j2", str(templates / "t.j2"), raw=True)
    evil = f"open({str(marker)!r}, 'w').close()\n" + python
    bucket.code = compile(evil, str(templates / "t.j2"), "exec")
    body = bucket.bytecode_to_string()
    entry = cache._path(bucket)
    blob = seal(entry, body) if sealed else body + hashlib.sha256(body).digest()
    assert blob is not None
    entry.write_bytes(blob)
    entry.chmod(0o600)
    return entry


def _render(templates: Path, cache: Path) -> str:
    return _env(templates, cache).get_template("t.j2").render(name="x")


needs_root = pytest.mark.skipif(
    os.getuid() != 0 and not os.environ.get("CI"), reason="chown to another user needs root"
)


def test_a_planted_entry_of_ours_does_run(templates: Path, tmp_path: Path) -> None:
    """The control: the planting works, so the refusals below are real."""
    marker = tmp_path / "ran"
    _plant(templates, tmp_path / "cache", marker)
    assert _render(templates, tmp_path / "cache") == "hello x\n"
    assert marker.exists()


def test_a_planted_entry_without_the_seal_is_never_unpickled(
    templates: Path, tmp_path: Path
) -> None:
    """A `git clone` or a restored CI cache leaves files owned by the user (mode 0644
    or, from a tar, 0600) with whatever checksum the planter computed. Jinja2 unpickles
    the entry's header before its own check, so a pickle that runs code in place of the
    header must never reach it: nothing is read without the per-user seal."""
    marker = tmp_path / "ran"
    entry = _plant(templates, tmp_path / "cache", marker, sealed=False)
    assert _render(templates, tmp_path / "cache") == "hello x\n"
    assert not marker.exists()

    class Payload:
        def __reduce__(self) -> tuple[object, tuple[str]]:
            return (os.mkdir, (str(marker),))

    body = jinja2.bccache.bc_magic + pickle.dumps(Payload(), 2)
    for mode in (0o644, 0o600):
        entry.write_bytes(body + hashlib.sha256(body).digest())
        entry.chmod(mode)
        assert _render(templates, tmp_path / "cache") == "hello x\n"
        assert not marker.exists()
    # A readable cache secret is no secret: an entry sealed with it is not run either.
    key = entry.parent / SECRET_NAME
    key.write_bytes(b"k" * 32)
    key.chmod(0o644)
    entry.write_bytes(body + hmac.digest(b"k" * 32, entry.name.encode() + b"\0" + body, "sha256"))
    assert _render(templates, tmp_path / "cache") == "hello x\n"
    assert not marker.exists()


@needs_root
@pytest.mark.parametrize("what", ["entry", "folder"])
def test_an_entry_or_folder_owned_by_another_user_is_not_run(
    templates: Path, tmp_path: Path, what: str
) -> None:
    marker = tmp_path / "ran"
    entry = _plant(templates, tmp_path / "cache", marker)
    os.chown(entry if what == "entry" else entry.parent, OTHER_UID, OTHER_UID)
    assert _render(templates, tmp_path / "cache") == "hello x\n"
    assert not marker.exists()


@pytest.mark.parametrize("mode", [0o620, 0o602])
def test_a_group_or_world_writable_folder_is_not_trusted(
    templates: Path, tmp_path: Path, mode: int
) -> None:
    marker = tmp_path / "ran"
    entry = _plant(templates, tmp_path / "cache", marker)
    entry.parent.chmod(0o700 | mode)
    assert _render(templates, tmp_path / "cache") == "hello x\n"
    assert not marker.exists()


@needs_root
def test_an_entry_that_is_a_symlink_to_another_users_file_is_not_run(
    templates: Path, tmp_path: Path
) -> None:
    marker = tmp_path / "ran"
    entry = _plant(templates, tmp_path / "theirs", marker)
    os.chown(entry, OTHER_UID, OTHER_UID)
    os.chown(entry.parent, OTHER_UID, OTHER_UID)
    ours = tmp_path / "cache"
    ours.mkdir(mode=0o700)
    (ours / entry.name).symlink_to(entry)
    assert _render(templates, ours) == "hello x\n"
    assert not marker.exists()


@needs_root
def test_a_cache_folder_swapped_after_its_check_is_not_read(
    templates: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cache folder is a link another user controls (PLIMSOLL_CACHE_DIR under a
    shared folder): it points at our folder while the folder is checked, then at theirs.
    What is read must be what was checked."""
    marker = tmp_path / "ran"
    theirs = tmp_path / "theirs"
    entry = _plant(templates, theirs, marker)
    os.chown(entry, OTHER_UID, OTHER_UID)
    os.chown(theirs, OTHER_UID, OTHER_UID)
    ours = tmp_path / "ours"
    ours.mkdir(mode=0o700)
    link = tmp_path / "cache"
    link.symlink_to(ours)
    _render(templates, link)  # a genuine entry of ours, same name
    assert (ours / entry.name).exists() and not marker.exists()
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
    out = _render(templates, link)
    monkeypatch.undo()
    assert swapped, "the folder was never looked at"
    assert out == "hello x\n"
    assert not marker.exists(), "an entry written by another user ran"


def test_a_truncated_or_tampered_entry_is_not_run(templates: Path, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    entry = _plant(templates, tmp_path / "cache", marker)
    blob = entry.read_bytes()
    flipped = blob[:-33] + bytes([blob[-33] ^ 1]) + blob[-32:]
    for bad in (blob[:-1], blob[:40], blob[:-32] + bytes(32), b"", flipped):
        entry.write_bytes(bad)
        assert _render(templates, tmp_path / "cache") == "hello x\n"
        assert not marker.exists()
        entry.unlink()


def test_a_stale_entry_is_not_run_after_the_template_changed(
    templates: Path, tmp_path: Path
) -> None:
    marker = tmp_path / "ran"
    _plant(templates, tmp_path / "cache", marker)
    (templates / "t.j2").write_text("bye {{ name }}\n")
    assert _render(templates, tmp_path / "cache") == "bye x\n"
    assert not marker.exists()


# -- hostile document text never reaches a generated file raw --------------------------

HOSTILE = "A*/ B\u202eC\u2028D\u2029E\x85F\x1b[2JG\u200bH\u2066I\x00J\r\nK\ufeffL\U000e0041M"
#: What a title may hold (the build refuses control characters and line terminators
#: there): bidi, zero-width, BOM, tag characters and a comment end.
SOFT = "A*/ B\u202eC\u200bH\u2066I\ufeffL\U000e0041M\u034fN\ufe0fO"


def _hostile_doc(tmp_path: Path) -> Path:
    doc = json.loads(SMART_HOME.read_text())
    doc["info"]["title"] = SOFT
    doc["info"]["description"] = HOSTILE
    op = doc["paths"]["/lights"]["get"]
    op["summary"] = SOFT
    op["description"] = HOSTILE + " " + "w " * 600 + "*/ tail"
    op["parameters"] = [
        {"name": "q", "in": "query", "description": HOSTILE, "schema": {"type": "string"}}
    ]
    doc["paths"]["/lights"]["post"]["requestBody"]["content"]["application/json"]["schema"] = {
        "type": "object",
        "description": HOSTILE,
        "properties": {"n": {"type": "string", "description": HOSTILE}},
    }
    path = tmp_path / "hostile.json"
    path.write_text(json.dumps(doc), "utf-8")
    return path


def test_hostile_text_never_reaches_a_generated_file_raw(tmp_path: Path) -> None:
    spec = _hostile_doc(tmp_path)
    out = tmp_path / "out"
    result = CliRunner().invoke(cli, ["build", str(spec), "-o", str(out)])
    assert result.exit_code == 0, result.output
    files = {p.name: p.read_text("utf-8") for p in out.iterdir()}
    assert "A*" in files["types.d.ts"] and "A*" in files["description.txt"]  # it got there
    for name, text in files.items():
        raw = sorted({hex(ord(c)) for c in text if c not in "\n\t" and is_invisible(c)})
        assert raw == [], (name, raw)
        assert "\u2028" not in text and "\u2029" not in text and "\x85" not in text, name
    # every doc comment in types.d.ts closes where the generator closed it
    ts = files["types.d.ts"]
    for comment in re.findall(r"/\*\*.*?\*/", ts, flags=re.S):
        assert comment.count("*/") == 1
        assert re.fullmatch(r"/\*\*( .*)? \*/|/\*\*\n( *\*.*\n)* *\*/", comment), comment


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("*/ \t\n\x85\u2028ab")), max_size=1500))
def test_a_long_description_folds_as_the_whole_text_would(text: str) -> None:
    """doc_text folds only a prefix of a long text: same line as folding all of it."""
    line = ts_comment(text)
    expected = line if len(line) <= MAX_DOC else line[: MAX_DOC - 1].rstrip() + "…"
    assert doc_text(text) == expected
    assert "*/" not in doc_text(text)


# -- os._exit loses nothing and keeps failures failing ---------------------------------


def _specgen(*args: str, stdout: Any = subprocess.PIPE, **kw: Any) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    code = "from specgen.cli import main; main()"
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        stdout=stdout,
        stderr=subprocess.PIPE,
        env=env,
        cwd=REPO,
        timeout=120,
        **kw,
    )


def test_a_full_stdout_fails_and_says_so() -> None:
    with open("/dev/full", "w") as full:
        done = _specgen("build", str(SMART_HOME), stdout=full)
    assert done.returncode != 0
    err = done.stderr.decode()
    assert "specgen: internal error: OSError: [Errno 28] No space left on device" in err
    assert "Traceback" not in err


def test_output_to_a_closed_pipe_is_not_reported_as_success() -> None:
    """Its reader gone before the build writes (SIGPIPE ignored, as Python does): the
    output was lost, so the exit must not be 0, and no traceback."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = _specgen("build", str(SMART_HOME), stdout=write_end)
    finally:
        os.close(write_end)
    err = done.stderr.decode()
    assert done.returncode != 0, err
    assert "Traceback" not in err


def test_small_buffered_output_that_cannot_be_flushed_still_fails() -> None:
    """The last few bytes sit in the buffer when os._exit would run: the flush fails,
    so the process must not leave with status 0."""
    code = (
        "import sys\n"
        "from specgen.oneshot import one_shot_without_gc, record_exit\n"
        "one_shot_without_gc(['build'], {'build'})\n"
        "sys.stdout.write('small')\n"
        "record_exit(0)\n"
        "sys.exit(0)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-c", code], stdout=full, stderr=subprocess.PIPE, env=env, timeout=60
        )
    assert done.returncode != 0


def test_written_files_and_output_survive_the_fast_exit(tmp_path: Path) -> None:
    """A build in its own process (leaving through os._exit) writes the same bytes as
    one in this process (which never reaches it), and prints all of its stdout."""
    out = tmp_path / "out"
    done = _specgen("build", str(SMART_HOME), "-o", str(out))
    assert done.returncode == 0, done.stderr
    here = tmp_path / "here"
    assert CliRunner().invoke(cli, ["build", str(SMART_HOME), "-o", str(here)]).exit_code == 0
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in here.iterdir())
    for path in here.iterdir():
        assert (out / path.name).read_bytes() == path.read_bytes()
    whole = _specgen("build", str(SMART_HOME))
    in_process = CliRunner().invoke(cli, ["build", str(SMART_HOME)])
    assert whole.returncode == 0 and whole.stdout.decode() == in_process.stdout
    bad = tmp_path / "bad.json"
    bad.write_text('{"openapi":"3.0.0","a":1,"a":2}')
    failed = _specgen("build", str(bad), "-o", str(tmp_path / "o2"))
    assert failed.returncode == 1
    assert failed.stderr.decode().splitlines() == [
        f'specgen: {bad}: duplicate key "a" in the object at the top level'
    ]
    assert not (tmp_path / "o2").exists()
