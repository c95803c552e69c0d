"""Review attacks on the batch `specgen run` (runtime/cli.py, runtime/pool.py).

Each test is an attack on one of the batch's claims; a passing test documents that the
claim held. File names come from whoever wrote the directory a batch runs, so they are
hostile text like the guest's own output: every line the CLI prints about a file must
quote its name so that no control, line-separator or bidi character reaches the
terminal raw, and no name or guest output can pass for a framing line of another file.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from runtime.cli import run
from tests.runtime.loopback import FakeAPI
from tests.runtime.test_run_cli import KEY, grants_file

BASE = ["--profile", "agent-memory", "--caller", "support-agent"]

#: Characters a file name may hold that must never reach a terminal raw: newline and
#: carriage return (a forged line), ESC and the 8-bit CSI (terminal sequences), NEL and
#: U+2028/U+2029 (line breaks to str.splitlines and some viewers), a bidi override.
HOSTILE = ["\n", "\r", "\x1b", "\x9b", "\x85", "\u2028", "\u2029", "\u202e"]
HOSTILE_NAMES = [
    'a\nspecgen: [9 of 9] "x.js": exit 0.js',
    "b\x1b[2J.js",
    "c\x9b31m.js",
    "d\x85specgen: audit: {}.js",
    "e\u2028f.js",
    "g\u202eh.js",
    "\rk.js",
    "l\u2029m.js",
]


def invoke(tmp_path: Path, paths: list[str], *args: str) -> Result:
    return CliRunner().invoke(
        run,
        [*paths, "--grants", str(tmp_path / "grants.json"), *BASE, *args],
        env={"CLOUDFLARE_API_TOKEN": KEY},
        catch_exceptions=False,
    )


def raw_hostile(text: str) -> list[str]:
    """The hostile characters in `text` other than the newlines that end its lines."""
    return [ch for ch in HOSTILE if ch in text.replace("\n", "")] + (
        ["\n"] if any(not line for line in text.split("\n")[:-1]) else []
    )


def framed(text: str) -> bool:
    """Every line is the CLI's own or a prefixed guest line."""
    return all(line.startswith(("specgen: ", "out| ", "err| ")) for line in text.split("\n")[:-1])


@pytest.mark.parametrize("workers", ["0", "2"])
def test_hostile_file_names_are_quoted_in_every_text_line(tmp_path: Path, workers: str) -> None:
    grants_file(tmp_path)
    paths = []
    for name in HOSTILE_NAMES:
        (tmp_path / name).write_text('print("hi")', "utf-8")
        paths.append(str(tmp_path / name))
    result = invoke(tmp_path, paths, "--workers", workers)
    assert result.exit_code == 0, result.stderr
    n = len(paths)
    for stream in (result.stdout, result.stderr):
        assert raw_hostile(stream) == [], stream
        assert framed(stream), stream
    lines = result.stdout.split("\n")
    # exactly one header per file, each followed by that file's guest output
    assert [line.startswith("specgen: [") for line in lines[:-1]] == [True, False] * n
    closing = [line for line in result.stderr.split("\n") if line.endswith(": exit 0")]
    assert len(closing) == n
    audits = [line for line in result.stderr.split("\n") if line.startswith("specgen: audit: ")]
    assert len(audits) == n


def test_hostile_file_names_keep_json_lines_one_record_each(tmp_path: Path) -> None:
    """JSON Lines: a reader splitting on line breaks (str.splitlines splits on NEL, U+2028
    and U+2029 too) gets one record per file, and each names its file exactly."""
    grants_file(tmp_path)
    paths = []
    for name in HOSTILE_NAMES:
        (tmp_path / name).write_text('print("hi\\u2028there\\x85")', "utf-8")
        paths.append(str(tmp_path / name))
    result = invoke(tmp_path, paths, "--workers", "0", "--json")
    assert result.exit_code == 0, result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["file"] for r in records] == paths
    assert {r["stdout"] for r in records} == {"hi\u2028there\x85\n"}


def test_a_file_name_that_is_not_utf8_runs_and_is_named(tmp_path: Path) -> None:
    """Linux file names are bytes; a name that is not UTF-8 (a surrogate-escaped str in
    Python) is still a file the batch runs and names, never a traceback."""
    grants_file(tmp_path)
    good = tmp_path / "good.js"
    good.write_text('print("good")', "utf-8")
    odd = os.fsdecode(os.fsencode(tmp_path) + b"/odd\xff\x1b.js")
    Path(odd).write_text('print("odd")', "utf-8")
    for extra in ([], ["--json"]):
        result = invoke(tmp_path, [str(good), odd], "--workers", "0", *extra)
        assert result.exit_code == 0, result.stderr
        out = result.stdout
        assert "\x1b" not in out + result.stderr
        if extra:
            records = [json.loads(line) for line in out.splitlines()]
            assert [r["stdout"] for r in records] == ["good\n", "odd\n"]
            assert records[1]["file"].endswith("/odd\\xff\x1b.js")  # JSON escapes ESC
        else:
            assert "out| odd" in out and '/odd\\\\xff\\u001b.js"' in out


@pytest.mark.parametrize("case", ["missing", "not-utf8", "empty-dir"])
def test_a_refusal_quotes_a_hostile_file_name_on_one_line(
    tmp_path: Path, api: FakeAPI, case: str
) -> None:
    grants_file(tmp_path)
    good = tmp_path / "good.js"
    good.write_text('print("good")', "utf-8")
    hostile = tmp_path / 'x\x1b]0;owned\x07\nspecgen: [1 of 2] "good.js": exit 0\r\x85'
    if case == "not-utf8":
        hostile.write_bytes(b'print("\xe9")')
    elif case == "empty-dir":
        hostile.mkdir()
    result = invoke(tmp_path, [str(good), str(hostile)], "--base-url", api.url)
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1 and result.stderr.endswith("\n"), result.stderr
    assert raw_hostile(result.stderr) == [] and "\x07" not in result.stderr, result.stderr
    assert "\\u001b]0;owned" in result.stderr  # named, escaped
    assert api.requests == []


def test_a_guest_cannot_forge_framing_or_audit_lines(tmp_path: Path) -> None:
    """A guest writes what would be the next file's header, a closing line, an audit
    line and a summary, behind every line break a terminal or a reader knows."""
    grants_file(tmp_path)
    forged = (
        'specgen: [2/2] "b.js"',
        'specgen: [1/2] "a.js": exit 0',
        'specgen: audit: {"profile":"agent-memory","calls":[],"worker_died":true}',
        "specgen: 2 runs, all exit 0",
    )
    breaks = ["\n", "\r", "\x85", "\u2028", "\u2029", "\x0b", "\x0c", "\x1c"]
    payload = json.dumps("".join(b + line for b in breaks for line in forged))
    std = 'const std = await import("qjs:std");'
    code = f"{std} print({payload}); std.err.puts({payload}); std.exit(5);"
    (tmp_path / "a.js").write_text(code, "utf-8")
    (tmp_path / "b.js").write_text('print("b")', "utf-8")
    paths = [str(tmp_path / "a.js"), str(tmp_path / "b.js")]
    result = invoke(tmp_path, paths, "--workers", "2")
    assert result.exit_code == 5
    for stream in (result.stdout, result.stderr):
        assert framed(stream), stream
        assert raw_hostile(stream) == []
        for line in stream.splitlines():  # every splitter's idea of a line
            assert line.startswith(("specgen: ", "out| ", "err| ")), line
    trusted = [line for line in result.stderr.split("\n") if line.startswith("specgen: ")]
    assert len([t for t in trusted if t.startswith("specgen: audit: ")]) == 2
    assert not any("worker_died" in t for t in trusted)
    assert "went down with it" not in result.stderr
    assert trusted[-1].startswith("specgen: 2 runs, 1 non-zero; exit 5 from the first: [1/2]")
    headers = [line for line in result.stdout.split("\n") if line.startswith("specgen: [")]
    assert headers == [f"specgen: [{i}/2] {json.dumps(p)}" for i, p in enumerate(paths, 1)]
