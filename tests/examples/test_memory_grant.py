"""The memory-grant example end to end: every claim on its page, and each claim failing
when it is made false."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from examples.memory_grant import page as page_mod
from examples.memory_grant.__main__ import DOCUMENT, OPTIONS, PAGE, _extract
from examples.memory_grant.claims import failed_claims, key_leaks
from examples.memory_grant.runner import GRANTS, HERE, PROFILE, TOKEN, ExampleResult, run_example
from specgen import build as pipeline
from specgen.check import grant_drift
from specgen.errors import SpecError

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def spec() -> pipeline.Result:
    return pipeline.run(str(DOCUMENT), OPTIONS)


@pytest.fixture(scope="module")
def result() -> ExampleResult:
    return run_example(scan_memory=True)


def test_every_claim_on_the_page_holds(result: ExampleResult) -> None:
    assert failed_claims(result) == []


def test_the_committed_page_and_files_are_current() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "examples.memory_grant", "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr


def test_check_names_a_stale_page(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spec: pipeline.Result
) -> None:
    from examples.memory_grant import __main__ as cli

    stale = tmp_path / "index.html"
    stale.write_text(
        PAGE.read_text(encoding="utf-8").replace("5 runs", "6 runs").replace("<b>5</b>", "<b>6</b>")
    )
    monkeypatch.setattr(cli, "PAGE", stale)
    with pytest.raises(SystemExit) as exit_info:
        cli._check(spec)
    assert exit_info.value.code == 1


def test_trace_keeps_templates_and_byte_counts(result: ExampleResult) -> None:
    first = result.runs[0]
    assert [row.route.rsplit("/", 1)[-1] for row in first.rows] == ["remember", "recall", "*"]
    assert all("01JFAKEMEM" not in row.route for run in result.runs for row in run.rows)
    assert [row.status for row in first.rows] == [200, 200, 200]


def test_requests_with_the_key_are_counted_from_the_fake_log(
    result: ExampleResult, spec: pipeline.Result
) -> None:
    figures = page_mod.figures(result, spec)
    assert (figures.key_requests, figures.api_requests) == (4, 4)
    assert (figures.routes_granted, figures.routes_total, figures.runs) == (3, 14, 5)
    assert (figures.refused, figures.refused_reached, figures.key_found) == (2, 0, 0)
    # Take the key off one logged request: the figure must follow the log, not a constant.
    from dataclasses import replace

    tampered = ExampleResult(
        runs=result.runs,
        api_log=[replace(result.api_log[0], carried_token=False), *result.api_log[1:]],
        profile_allow=result.profile_allow,
        token=result.token,
    )
    assert page_mod.figures(tampered, spec).key_requests == 3
    assert any("lacked the key" in f for f in failed_claims(tampered))


def test_the_key_is_nowhere_on_the_guest_side(result: ExampleResult) -> None:
    assert key_leaks(result) == []
    assert TOKEN not in PAGE.read_text(encoding="utf-8")
    for run in result.runs:
        audit = json.loads(run.audit_line)
        assert audit["profile"] == PROFILE
        assert TOKEN not in run.audit_line


def test_a_key_planted_in_the_preamble_is_named_by_run_5() -> None:
    preamble = (HERE / "preamble.js").read_text(encoding="utf-8")
    planted = run_example(
        preamble_override=preamble + f'\nvar leaked = "{TOKEN}";\n', scan_memory=True
    )
    run5 = planted.runs[4]
    assert "globals holding the key: execArgv" in run5.stdout
    failures = failed_claims(planted)
    assert any("run 5 printed" in f for f in failures)
    assert any("guest's memory" in f for f in failures), failures


def _widened_grants(tmp_path: Path) -> Path:
    data = json.loads(GRANTS.read_text())
    allow = data["profiles"][PROFILE]["allow"]
    allow.append(allow[1].replace("customer-42", "customer-43"))
    allow.append(
        "DELETE /client/v4/accounts/00000000000000000000000000000042/agent-memory/namespaces/support-agent"
    )
    target = tmp_path / "grants.json"
    target.write_text(json.dumps(data))
    shutil.copy(HERE / "preamble.js", tmp_path / "preamble.js")
    return target


def test_a_wider_grant_makes_the_refusal_claims_fail(tmp_path: Path) -> None:
    widened = run_example(grants_path=_widened_grants(tmp_path))
    runs = {run.number: run for run in widened.runs}
    assert runs[3].denied == 0 and runs[3].requests
    failures = failed_claims(widened)
    assert any(f.startswith("run 3: the broker denied 0") for f in failures)
    assert any(f.startswith("run 4:") for f in failures)


def test_a_drifted_catalog_fails(tmp_path: Path, spec: pipeline.Result) -> None:
    assert grant_drift(spec, GRANTS, PROFILE) == []
    data = json.loads(GRANTS.read_text())
    data["profiles"][PROFILE]["catalog"].pop(3)
    drifted = tmp_path / "grants.json"
    drifted.write_text(json.dumps(data))
    problems = grant_drift(spec, drifted, PROFILE)
    assert problems and "GET /client/v4/accounts/*/agent-memory/namespaces/*" in problems[0]
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "specgen",
            "check",
            str(DOCUMENT),
            "--global",
            "memory",
            "--grants",
            str(drifted),
            "--profile",
            PROFILE,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1 and "catalog lacks" in proc.stderr


def _whole_document() -> bytes:
    doc = json.loads(DOCUMENT.read_text())
    paths = {k.removeprefix("/client/v4"): v for k, v in doc["paths"].items()}
    paths["/zones/{zone_id}/dns_records"] = {
        "get": {"operationId": "dns-list", "responses": {"200": {"description": "ok"}}}
    }
    doc["paths"] = paths
    return json.dumps(doc, indent=2).encode()


def test_extract_refuses_any_file_but_the_pinned_one(tmp_path: Path) -> None:
    whole = tmp_path / "openapi.json"
    whole.write_bytes(_whole_document())
    out = tmp_path / "cut.json"
    with pytest.raises(SpecError, match="not the pinned 29f54710"):
        _extract(str(whole), output=out)
    assert not out.exists()
    proc = subprocess.run(
        [sys.executable, "-m", "examples.memory_grant", "--extract", str(whole)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1 and "refusing to cut from any other file" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_check_with_extract_is_a_usage_error_that_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from click.testing import CliRunner

    from examples.memory_grant import __main__ as cli

    raw = _whole_document()
    whole = tmp_path / "openapi.json"
    whole.write_bytes(raw)
    out = tmp_path / "cut.json"
    # A whole document that matches the pin and a cut that lands in tmp_path, so that
    # without the refusal the extract would succeed and write.
    monkeypatch.setattr(cli._extract, "__defaults__", (out, hashlib.sha256(raw).hexdigest()))
    result = CliRunner().invoke(cli.main, ["--check", "--extract", str(whole)])
    assert result.exit_code == 2 and "--check and --extract" in result.output
    assert not out.exists()


def test_an_unwritable_output_is_one_line_not_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from click.testing import CliRunner

    from examples.memory_grant import __main__ as cli

    raw = _whole_document()
    whole = tmp_path / "openapi.json"
    whole.write_bytes(raw)
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    out = blocker / "cut.json"
    monkeypatch.setattr(cli._extract, "__defaults__", (out, hashlib.sha256(raw).hexdigest()))
    result = CliRunner().invoke(cli.main, ["--extract", str(whole)])
    # SystemExit: CliRunner reports an escaped OSError as exit code 1 too.
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit)
    assert result.stderr.startswith("memory_grant: write ") and result.stderr.count("\n") == 1


def test_extract_cuts_the_agent_memory_paths_from_a_pinned_file(tmp_path: Path) -> None:
    raw = _whole_document()
    whole = tmp_path / "openapi.json"
    whole.write_bytes(raw)
    out = tmp_path / "cut.json"
    _extract(str(whole), output=out, pin=hashlib.sha256(raw).hexdigest())
    cut = json.loads(out.read_text())
    assert len(cut["paths"]) == 11 and not any(p.startswith("/zones") for p in cut["paths"])
    assert sum(len([m for m in item if m != "parameters"]) for item in cut["paths"].values()) == 14


def _chromium() -> str | None:
    return (
        shutil.which("chromium")
        or shutil.which("chromium-browser")
        or shutil.which("google-chrome")
    )


def test_the_page_renders_in_a_real_browser(tmp_path: Path) -> None:
    browser = _chromium()
    if browser is None:
        pytest.skip(
            "no chromium on this machine (CI installs Debian's chromium); the browser check did not run"
        )
    proc = subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--dump-dom",
            PAGE.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "HOME": str(tmp_path)},
    )
    dom = proc.stdout
    assert proc.returncode == 0, proc.stderr[-2000:]
    for number in range(1, 6):
        assert f'id="run-{number}"' in dom
    assert dom.count('class="trace"') == 2  # runs 1 and 2 recorded calls
    assert dom.count('class="api"') == 2
    assert dom.count("No call recorded") == 3
    assert 'id="api-log"' in dom and "<svg" in dom
