"""Files that are not what a command expects: a FIFO, a device, a link, a folder under
a file's name, an empty or aliased -o.

Each refusal is one line on stderr and a non-zero exit, never a hang, a traceback or a
file lost. Whatever could hang or grow without end is run in a whole process under a
timeout (and, for a device, a memory limit), so a regression fails the test instead of
stalling or exhausting the suite.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from specgen.cli import cli

ROOT = Path(__file__).resolve().parents[2]
SMART = ROOT / "tests/data/smart-home.openapi.json"
#: Far above what a build or a check of the small document takes on a loaded machine;
#: a hang is forever.
TIMEOUT_S = 120
#: The address space a check may use in the device test: ample for Python and the
#: generator, far below what reading /dev/zero without a bound reaches.
MEMORY_LIMIT = 2 << 30


def run(*args: str | Path) -> Result:
    return CliRunner().invoke(cli, [str(a) for a in args])


def refused(result: Result) -> str:
    """Assert a clean refusal: exit 1, nothing on stdout, ONE line on stderr."""
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, SystemExit), result.exception
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def process(*args: str | Path, limit_memory: bool = False) -> subprocess.CompletedProcess[str]:
    """specgen in its own process, under a timeout (and a memory limit if asked)."""

    def limit() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))

    return subprocess.run(
        [sys.executable, "-m", "specgen", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        env={**os.environ, "SPECGEN_DEBUG": ""},
        preexec_fn=limit if limit_memory else None,
    )


def one_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 1, done.stderr
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


def built(tmp_path: Path) -> Path:
    out = tmp_path / "out"
    assert run("build", SMART, "-o", out, "-q").exit_code == 0
    return out


def contents(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


# -- check: the committed files ----------------------------------------------------------------


def test_check_refuses_a_committed_fifo_without_waiting_for_a_writer(tmp_path: Path) -> None:
    out = built(tmp_path)
    (out / "types.d.ts").unlink()
    os.mkfifo(out / "types.d.ts")
    assert one_line(process("check", SMART, out)) == (
        f"specgen: cannot read {out}/types.d.ts: a FIFO, not the regular file build writes"
    )
    fifo = tmp_path / "elsewhere.fifo"
    os.mkfifo(fifo)
    (out / "types.d.ts").unlink()
    (out / "types.d.ts").symlink_to(fifo)
    assert one_line(process("check", SMART, out)) == (
        f"specgen: cannot read {out}/types.d.ts: a symbolic link, not the regular file build writes"
    )


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero")
def test_check_refuses_a_committed_link_to_a_device_without_reading_it(tmp_path: Path) -> None:
    out = built(tmp_path)
    (out / "types.d.ts").unlink()
    (out / "types.d.ts").symlink_to("/dev/zero")
    done = process("check", SMART, out, limit_memory=True)
    assert one_line(done) == (
        f"specgen: cannot read {out}/types.d.ts: a symbolic link, not the regular file build writes"
    )


def test_check_refuses_a_committed_folder_or_device_in_one_line(tmp_path: Path) -> None:
    out = built(tmp_path)
    (out / "preamble.js").unlink()
    (out / "preamble.js").mkdir()
    assert refused(run("check", SMART, out)) == (
        f"specgen: cannot read {out}/preamble.js: a directory, not the regular file build writes"
    )


def test_check_does_not_read_a_committed_file_far_larger_than_the_build(tmp_path: Path) -> None:
    out = built(tmp_path)
    allow = out / "allow.json"
    want = allow.stat().st_size
    limit = 2 * want + (1 << 20)
    with allow.open("r+b") as fh:
        fh.truncate(limit + 1)  # sparse: no disk, and all of it NULs on one line
    assert refused(run("check", SMART, out)) == (
        f"specgen: cannot read {allow}: larger than {limit} bytes (build writes {want}), "
        "so not compared"
    )


def test_check_diff_shows_control_characters_escaped(tmp_path: Path) -> None:
    out = built(tmp_path)
    path = out / "description.txt"
    ordinary = path.read_text().splitlines()[0]
    path.write_bytes(
        f"{ordinary}\n".encode() + b"title \x1b]0;pwned\x07 and \x00 nul\r\n\xe2\x80\xaeevil"
    )
    result = run("check", SMART, out)
    assert result.exit_code == 1, result.output
    for raw in ("\x1b", "\x07", "\x00", "\r", "\u202e"):
        assert raw not in result.stdout
    lines = result.stdout.splitlines()
    assert "-title \\x1b]0;pwned\\x07 and \\x00 nul\\x0d" in lines
    assert "-\\u202eevil" in lines
    assert "\\ No newline at end of file" in lines
    assert f" {ordinary}" in lines  # ordinary text reads as it is


# -- build: the set of files ------------------------------------------------------------------


def test_build_refuses_a_folder_in_a_files_place_before_replacing_any(tmp_path: Path) -> None:
    out = built(tmp_path)
    (out / "types.d.ts").unlink()
    (out / "types.d.ts").mkdir()
    (out / "allow.json").write_text("old\n")
    before = contents(out)
    result = run("build", SMART, "-o", out, "-q")
    assert refused(result) == f"specgen: write {out}/types.d.ts: Is a directory"
    assert contents(out) == before  # allow.json is still the old one
    assert sorted(p.name for p in out.iterdir() if p.name.startswith(".")) == []


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="names an fd through /proc")
def test_a_write_failing_at_the_third_file_leaves_the_old_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = built(tmp_path)
    for path in out.iterdir():
        path.write_text(f"old {path.name}\n")
    before = contents(out)
    third = sorted(before)[2]  # build writes its files in name order
    real_fsync = os.fsync

    def full_at_the_third(fd: int) -> None:
        if Path(os.readlink(f"/proc/self/fd/{fd}")).name.startswith(f".{third}."):
            raise OSError(28, "No space left on device")
        real_fsync(fd)

    monkeypatch.setattr("specgen.files.os.fsync", full_at_the_third)
    result = run("build", SMART, "-o", out, "-q")
    assert refused(result) == f"specgen: write {out}/{third}: No space left on device"
    assert contents(out) == before  # not one file of the new build
    assert sorted(p.name for p in out.iterdir()) == sorted(before)  # no temporary file


# -- empty -o -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            ["build", SMART, "-o", ""],
            "-o/--outdir is empty; name the folder (. for the current one)",
        ),
        (
            ["build", SMART, "--outdir="],
            "-o/--outdir is empty; name the folder (. for the current one)",
        ),
        (["check", SMART, ""], "OUTDIR is empty; name the folder (. for the current one)"),
        (
            ["grant", "init", SMART, "--profile", "p", "-o", ""],
            "-o/--output is empty; name the file to write",
        ),
        (["grant", "schema", "-o", ""], "-o/--output is empty; name the file to write"),
        (
            ["extract", SMART, "--sha256", "0" * 64, "--tag", "t", "-o", ""],
            "-o/--output is empty; name the file to write",
        ),
    ],
)
def test_an_empty_output_path_is_refused_not_taken_for_the_current_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str | Path], line: str
) -> None:
    monkeypatch.chdir(tmp_path)
    assert refused(run(*args)) == f"specgen: {line}"
    assert list(tmp_path.iterdir()) == []


# -- extract -o -----------------------------------------------------------------------------


def pinned_copy(tmp_path: Path) -> tuple[Path, str]:
    whole = tmp_path / "whole.json"
    whole.write_bytes(SMART.read_bytes())
    return whole, hashlib.sha256(whole.read_bytes()).hexdigest()


def test_extract_refuses_to_write_over_its_own_input(tmp_path: Path) -> None:
    whole, pin = pinned_copy(tmp_path)
    alias = tmp_path / "alias.json"
    alias.symlink_to(whole)
    for output in (whole, alias, tmp_path / "." / "whole.json"):
        line = refused(
            run("extract", whole, "--sha256", pin, "--path-prefix", "/rooms", "-o", output)
        )
        assert line == (
            f"specgen: -o {output} is WHOLE itself; writing the cut there would replace the "
            "pinned document (write it to another file)"
        )
    assert whole.read_bytes() == SMART.read_bytes()


def test_extract_refuses_dash_and_replaces_another_existing_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    whole, pin = pinned_copy(tmp_path)
    monkeypatch.chdir(tmp_path)
    line = refused(run("extract", whole, "--sha256", pin, "--path-prefix", "/rooms", "-o", "-"))
    assert (
        line
        == "specgen: -o -: extract writes a file, not stdout; name the file (./- for one named -)"
    )
    assert not (tmp_path / "-").exists()
    cut = tmp_path / "cut.json"
    cut.write_text("an older cut\n")
    done = run("extract", whole, "--sha256", pin, "--path-prefix", "/rooms", "-o", cut)
    assert done.exit_code == 0, done.output  # a cut is remade from the pin at any time
    assert '"/rooms/{room}/lights"' in cut.read_text()


# -- a FIFO as SPEC or @FILE ------------------------------------------------------------------


@pytest.mark.parametrize("command", [["build"], ["emit", "allow"], ["validate"], ["check"]])
def test_a_fifo_no_one_writes_to_as_spec_reads_empty_at_once(
    tmp_path: Path, command: list[str]
) -> None:
    fifo = tmp_path / "spec.fifo"
    os.mkfifo(fifo)
    args = [*command, fifo, *([tmp_path] if command == ["check"] else [])]
    assert one_line(process(*args)) == (
        f"specgen: {fifo}: the top level must be an object, not empty"
    )


def test_a_pipe_as_spec_is_read_as_process_substitution_names_one(tmp_path: Path) -> None:
    """`specgen build <(curl ...)`: the shell names a pipe another process writes."""
    read, write = os.pipe()
    writer = subprocess.Popen(["cat", str(SMART)], stdout=write)
    os.close(write)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "specgen", "emit", "allow", f"/dev/fd/{read}"],
            capture_output=True,
            text=True,
            pass_fds=(read,),
            timeout=60,
        )
    finally:
        os.close(read)
        writer.wait()
    assert done.returncode == 0, done.stderr
    assert '"GET /lights' in done.stdout


def test_a_device_as_spec_is_refused_before_it_is_read() -> None:
    assert one_line(process("build", "/dev/zero")) == (
        "specgen: /dev/zero: cannot read: not a regular file (give a file, a pipe, or - to"
        " read stdin)"
    )


def test_a_fifo_as_grants_or_allow_file_is_refused_not_waited_on(tmp_path: Path) -> None:
    fifo = tmp_path / "entries.fifo"
    os.mkfifo(fifo)
    allow = one_line(process("grant", "init", SMART, "--profile", "p", "--allow", f"@{fifo}"))
    assert allow.startswith(f'specgen: --allow "@{fifo}": invalid JSON: ')  # read empty
    grants = one_line(process("check", SMART, "--grants", fifo, "--profile", "p"))
    assert grants == f"specgen: grants {fifo}: cannot read: not a regular file"
    described = process("emit", "description", SMART, "--grants", fifo, "--profile", "p")
    assert one_line(described) == f"specgen: grants {fifo}: cannot read: not a regular file"


def test_stdin_stays_readable_as_dash(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["emit", "allow", "-"], input=SMART.read_bytes())
    assert result.exit_code == 0, result.output
    assert '"GET /lights' in result.stdout
