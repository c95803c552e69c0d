"""A batch `specgen run` (several CODE files on a RunPool) end to end.

Real runs in real worker processes against a real loopback API (`FakeAPI`, the witness
of what reached it): order kept, one audit line per run, the batch's exit code, refusals
before any run, the key never on the pipe to the workers, and a run whose worker is
killed under it still ends with its audit record.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import re
import signal
import threading
import time
from http.server import BaseHTTPRequestHandler
from multiprocessing.connection import Connection
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from runtime.cli import run
from tests.runtime.loopback import FakeAPI, Seen, json_ok
from tests.runtime.test_run_cli import KEY, grants_file

BASE = ["--profile", "agent-memory", "--caller", "support-agent"]


def item(name: str, then: str = "") -> str:
    """Agent code that fetches /v1/items/NAME through the generated client and says so."""
    return (
        f'const r = await memory.items("{name}");'
        f' print("{name}", JSON.stringify(r));'
        f' (await import("qjs:std")).err.puts("done {name}\\n"); {then}'
    )


def write(tmp_path: Path, files: dict[str, str]) -> list[str]:
    paths = []
    for name, code in files.items():
        (tmp_path / name).write_text(code, "utf-8")
        paths.append(str(tmp_path / name))
    return paths


def invoke(tmp_path: Path, paths: list[str], *args: str) -> Result:
    return CliRunner().invoke(
        run,
        [*paths, "--grants", str(tmp_path / "grants.json"), *BASE, *args],
        env={"CLOUDFLARE_API_TOKEN": KEY},
        catch_exceptions=False,
    )


def records(result: Result) -> list[dict]:
    return [json.loads(line) for line in result.stdout.splitlines()]


class LastToAnswer:
    """Answers /v1/items/slow only after `others` other requests were answered, so the
    run that asked first finishes last; records the order the answers went out."""

    def __init__(self, others: int) -> None:
        self.others = others
        self.answered: list[str] = []
        self._others_done = threading.Semaphore(0)

    def __call__(self, handler: BaseHTTPRequestHandler, seen: Seen) -> None:
        if seen.path.endswith("/slow"):
            for _ in range(self.others):
                self._others_done.acquire(timeout=30)
        json_ok(handler, seen)
        self.answered.append(seen.path)
        if not seen.path.endswith("/slow"):
            self._others_done.release()


def test_results_come_in_input_order_each_with_its_own_audit(tmp_path: Path) -> None:
    """The first file's reply waits for the other three, so with two workers it finishes
    last; the output still lists it first, and each audit line holds its run's call only."""
    grants_file(tmp_path)
    names = ["slow", "b", "c", "d"]
    last = LastToAnswer(others=3)
    slow_api = FakeAPI(responder=last)
    paths = write(tmp_path, {f"{n}.js": item(n) for n in names})
    try:
        args = ["--base-url", slow_api.url, "--workers", "2", "--json", "--trace-id", "T"]
        # The first run waits for the second worker to start: allow for a loaded machine.
        result = invoke(tmp_path, paths, *args, "--timeout", "30")
    finally:
        slow_api.close()
    assert result.exit_code == 0, result.stderr
    assert result.stderr == ""
    out = records(result)
    assert [r["file"] for r in out] == paths
    assert [r["stdout"] for r in out] == [f'{n} {{"ok":true}}\n' for n in names]
    assert [r["stderr"] for r in out] == [f"done {n}\n" for n in names]
    for n, record in enumerate(out, start=1):
        audit = record["audit"]
        assert audit["trace_id"] == f"T:{n}"
        assert [(c["method"], c["route"], c["status"]) for c in audit["calls"]] == [
            ("GET", "/v1/items/*", 200)
        ]
    # The first run really did finish last (or the order test proves nothing).
    assert last.answered[-1] == "/v1/items/slow"
    assert sorted(last.answered) == sorted(f"/v1/items/{n}" for n in names)
    assert {s.headers["authorization"] for s in slow_api.requests} == {f"Bearer {KEY}"}


def test_one_failing_file_among_good_ones(tmp_path: Path, api: FakeAPI) -> None:
    """Every file runs; the batch exits with the first non-zero exit in input order."""
    grants_file(tmp_path)
    paths = write(
        tmp_path,
        {
            "ok1.js": item("ok1"),
            "throws.js": item("t", 'throw new Error("bad \\x1b[31m input");'),
            "exits.js": item("e", 'const std = await import("qjs:std"); std.exit(3);'),
            "ok2.js": item("ok2"),
        },
    )
    result = invoke(tmp_path, paths, "--base-url", api.url, "--workers", "2")
    assert result.exit_code == 1
    assert len(api.requests) == 4  # the failure did not stop the others

    # stdout: a header per file, then its guest lines, in input order.
    assert result.stdout == "".join(
        f'specgen: [{i}/4] "{p}"\nout| {n} {{"ok":true}}\n'
        for i, (p, n) in enumerate(zip(paths, ["ok1", "t", "e", "ok2"], strict=True), start=1)
    )
    err = result.stderr.splitlines()
    # Every line is the guest's (prefixed) or the CLI's own; the escape stays escaped.
    assert all(line.startswith(("err| ", "specgen: ")) for line in err), err
    assert "\x1b" not in result.stderr and "bad \\x1b[31m input" in result.stderr
    assert len([line for line in err if line.startswith("specgen: audit: ")]) == 4
    closing = [line for line in err if re.match(r'specgen: \[\d/4\] ".*": exit \d+$', line)]
    assert [line.rsplit(" ", 1)[1] for line in closing] == ["0", "1", "3", "0"]
    assert err[-1] == (
        f'specgen: 4 runs, 2 non-zero; exit 1 from the first: [2/4] "{paths[1]}" exit 1'
    )
    # Each file's audit line comes after its own err| lines and before its closing line.
    audits = [i for i, line in enumerate(err) if line.startswith("specgen: audit: ")]
    closes = [err.index(line) for line in closing]
    assert all(a < c for a, c in zip(audits, closes, strict=True))
    assert err.index("err| done e") < audits[2] < closes[2] < err.index("err| done ok2")

    exits = invoke(tmp_path, [paths[0], paths[2], paths[1]], "--base-url", api.url)
    assert exits.exit_code == 3  # now the exit(3) file comes first


def _comparable(result: Result) -> list[dict]:
    """The JSON records without what differs between any two runs (timings, the tier)."""
    out = records(result)
    for record in out:
        del record["duration_s"]
        assert record.pop("isolation") == record["audit"].pop("isolation")
        for call in record["audit"]["calls"]:
            del call["latency_ms"]
    return out


def test_one_or_two_workers_or_none_give_the_same_output(tmp_path: Path, api: FakeAPI) -> None:
    grants_file(tmp_path)
    paths = write(
        tmp_path,
        {
            "a.js": item("a"),
            "b.js": 'throw new Error("b")',
            "c.js": "while (true) {}",
            "d.js": item("d", 'print("\\u202e");'),
        },
    )
    args = ("--base-url", api.url, "--timeout", "1")
    json_runs = [
        _comparable(invoke(tmp_path, paths, *args, "--json", "--workers", w))
        for w in ("1", "2", "0")
    ]
    assert json_runs[0] == json_runs[1] == json_runs[2]
    assert [r["exit_code"] for r in json_runs[0]] == [0, 1, 124, 0]
    # A batch's default tier is worker (engine processes), but with --workers 0.
    tiers = [
        {
            r["isolation"]
            for r in records(invoke(tmp_path, paths[:2], *args, "--json", "--workers", w))
        }
        for w in ("1", "0")
    ]
    assert tiers == [{"worker"}, {"process"}]
    text_runs = [invoke(tmp_path, paths, *args, "--workers", w) for w in ("1", "2", "0")]
    assert {r.exit_code for r in text_runs} == {1}
    assert text_runs[0].stdout == text_runs[1].stdout == text_runs[2].stdout

    def untimed(stderr: str) -> str:  # latencies, the table's widths, the tier
        stderr = stderr.replace('"isolation":"worker"', '"isolation":"process"')
        return re.sub(r" +", " ", re.sub(r"\b\d+\.\d+\b", "", stderr))

    assert untimed(text_runs[0].stderr) == untimed(text_runs[1].stderr)
    assert untimed(text_runs[0].stderr) == untimed(text_runs[2].stderr)
    assert "the run timed out after 1 s" in text_runs[0].stderr


def test_a_directory_or_a_quoted_pattern_is_a_batch_in_name_order(
    tmp_path: Path, api: FakeAPI
) -> None:
    grants_file(tmp_path)
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    for name in ("b.js", "a.js", ".hidden.js", "notes.txt"):
        (scripts / name).write_text(f'print("{name}")', "utf-8")
    (scripts / "sub.js").mkdir()  # a directory named like a script is not one
    expected = [str(scripts / "a.js"), str(scripts / "b.js")]
    for arg in (str(scripts), str(scripts / "*.js")):
        result = invoke(tmp_path, [arg], "--json", "--workers", "1")
        assert result.exit_code == 0, result.stderr
        assert [(r["file"], r["stdout"]) for r in records(result)] == [
            (expected[0], "a.js\n"),
            (expected[1], "b.js\n"),
        ]
    # One file in a directory still gets the batch's shape; one plain file does not.
    (scripts / "b.js").unlink()
    single = invoke(tmp_path, [str(scripts)], "--workers", "0")
    assert single.stdout == f'specgen: [1/1] "{expected[0]}"\nout| a.js\n'
    plain = invoke(tmp_path, [expected[0]], "--workers", "2")
    assert plain.stdout == "out| a.js\n"


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("missing", r'^specgen: read ".*/missing\.js": No such file or directory$'),
        ("not-utf8", r'^specgen: ".*/latin1\.js": not valid UTF-8 at byte 7$'),
        ("empty-dir", r'^specgen: ".*/empty": a directory with no \*\.js file in it$'),
        ("no-match", r'^specgen: ".*/nothing-\*\.js": no file matches the pattern$'),
        ("profile", r'^specgen: grants: .*: no profile "nope" \(profiles: "agent-memory"\)$'),
        ("caller", r"caller \"intruder\" is not in its allowed_callers$"),
        ("trace-id", r"^specgen: --trace-id: with 3 files the runs' ids go up to .*past"),
        ("timeout", r"^specgen: --timeout 31 must be more than 0 and at most 30 seconds$"),
    ],
)
def test_every_refusal_is_one_line_before_any_run(
    tmp_path: Path, api: FakeAPI, case: str, message: str
) -> None:
    grants_file(tmp_path)
    paths = write(tmp_path, {"a.js": item("a"), "b.js": item("b"), "c.js": item("c")})
    args = ["--base-url", api.url]
    if case == "missing":
        paths.insert(1, str(tmp_path / "missing.js"))
    elif case == "not-utf8":
        (tmp_path / "latin1.js").write_bytes(b'print("\xe9")')
        paths.append(str(tmp_path / "latin1.js"))
    elif case == "empty-dir":
        (tmp_path / "empty").mkdir()
        paths.append(str(tmp_path / "empty"))
    elif case == "no-match":
        paths.append(str(tmp_path / "nothing-*.js"))
    elif case == "profile":
        args += ["--profile", "nope"]
    elif case == "caller":
        args += ["--caller", "intruder"]
    elif case == "trace-id":
        args += ["--trace-id", "x" * 127]
    elif case == "timeout":
        args += ["--timeout", "31"]
    result = invoke(tmp_path, paths, *args)
    assert result.exit_code == 1
    assert result.stdout == ""
    assert len(result.stderr.splitlines()) == 1, result.stderr
    assert re.search(message, result.stderr.strip()), result.stderr
    assert api.requests == []


def test_the_key_never_crosses_the_pipe_to_the_workers(
    tmp_path: Path, api: FakeAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Everything the parent sends a worker, captured at the pipe: jobs go out (the
    capture sees them), the key does not, and the workers still attach it upstream."""
    grants_file(tmp_path)
    paths = write(tmp_path, {f"{n}.js": item(n) for n in "abc"})
    sent: list[bytes] = []
    original = Connection._send_bytes  # type: ignore[attr-defined]

    def capture(self: Connection, buf: memoryview) -> None:
        sent.append(bytes(buf))
        original(self, buf)

    monkeypatch.setattr(Connection, "_send_bytes", capture)
    # The process tier's workers: each reads the grants file and the key itself.
    moved = invoke(
        tmp_path, paths, "--base-url", api.url, "--workers", "2", "--json", "--isolation", "process"
    )
    assert [r["exit_code"] for r in records(moved)] == [0, 0, 0]
    assert len([b for b in sent if b"memory.items(" in b]) == 3  # a token-less Profile each
    quiet = write(tmp_path, {f"q{n}.js": f'print("quiet {n}")' for n in "ab"})
    named = invoke(tmp_path, quiet, "--workers", "2", "--json", "--isolation", "process")
    assert [r["stdout"] for r in records(named)] == ["quiet a\n", "quiet b\n"]
    assert len([b for b in sent if b"quiet " in b]) == 2
    assert all(KEY.encode() not in b and KEY.encode("utf-16-le") not in b for b in sent)
    assert [s.headers["authorization"] for s in api.requests] == [f"Bearer {KEY}"] * 3


@pytest.mark.parametrize("as_json", [True, False])
def test_a_run_whose_worker_is_killed_still_ends_with_its_audit_record(
    tmp_path: Path, api: FakeAPI, as_json: bool
) -> None:
    """The worker is killed (SIGKILL) after the run's call reached the API: that run
    ends with exit 70 and an audit line, written by the parent, that still names the
    call (the worker told the parent as its broker admitted it), status 0, failure
    worker_died; the next file runs on a replacement worker."""
    grants_file(tmp_path)
    paths = write(
        tmp_path, {"doomed.js": item("doomed", "while (true) {}"), "after.js": item("after")}
    )
    killed: list[int] = []

    def kill_when_called() -> None:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not api.requests:
            time.sleep(0.01)
        for child in multiprocessing.active_children():
            os.kill(child.pid, signal.SIGKILL)  # type: ignore[arg-type]
            killed.append(child.pid)  # type: ignore[arg-type]

    killer = threading.Thread(target=kill_when_called)
    killer.start()
    args = ["--base-url", api.url, "--workers", "1", "--timeout", "20", "--trace-id", "k"]
    args += ["--isolation", "process"]  # its multiprocessing worker (tiers: test_tiers.py)
    result = invoke(tmp_path, paths, *args, *(["--json"] if as_json else []))
    killer.join()
    assert killed, "no worker process was found to kill"
    assert result.exit_code == 70
    assert [s.path for s in api.requests] == ["/v1/items/doomed", "/v1/items/after"]
    lost = {
        "profile": "agent-memory",
        "trace_id": "k:1",
        "isolation": "process",
        "calls": [
            {
                "seq": 1,
                "method": "GET",
                "route": "/v1/items/*",
                "status": 0,
                "delivered": False,
                "bytes_sent": 0,
                "bytes_back": 0,
                "latency_ms": 0.0,
                "failure": "worker_died",
            }
        ],
        "denied": 0,
        "dropped": 0,
        "routes": [{"method": "GET", "route": "/v1/items/*", "calls": 1, "delivered": 0}],
        "worker_died": True,
    }
    if not as_json:
        assert result.stdout.splitlines()[-1] == 'out| after {"ok":true}'
        err = result.stderr.splitlines()
        first = err[: err.index(f'specgen: [1/2] "{paths[0]}": exit 70') + 1]
        assert first == [
            "specgen: the run was ended by an internal error (WorkerDied), exit 70;"
            " its trace and audit follow",
            "specgen: the worker process running it died; the calls it had made are in the"
            " audit with status 0 and failure worker_died (some may have reached the API)",
            "specgen: audit: " + json.dumps(lost, separators=(",", ":")),
            f'specgen: [1/2] "{paths[0]}": exit 70',
        ]
        return
    doomed, after = records(result)
    assert (doomed["exit_code"], doomed["internal_error"], doomed["timed_out"]) == (
        70,
        "WorkerDied",
        False,
    )
    assert doomed["duration_s"] < 20  # ended by the kill, not by the timeout
    assert doomed["audit"] == lost
    assert (after["exit_code"], after["stdout"]) == (0, 'after {"ok":true}\n')
    assert after["audit"]["trace_id"] == "k:2" and "worker_died" not in after["audit"]
