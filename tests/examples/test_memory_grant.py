"""The memory-grant example end to end: every claim on its page, and each claim failing
when it is made false."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from examples.kit.claims import key_leaks
from examples.memory_grant import page as page_mod
from examples.memory_grant.__main__ import DOCUMENT, OPTIONS, PAGE, _extract
from examples.memory_grant.claims import failed_claims
from examples.memory_grant.runner import GRANTS, HERE, PROFILE, TOKEN, ExampleResult, run_example
from specgen import build as pipeline
from specgen.check import grant_drift
from specgen.errors import SpecError
from tests import conftest as prerequisites
from tests.examples.headless import Browser

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
    # runs 3 and 4 each made two refused calls: through the client and around it
    assert (figures.refused, figures.refused_reached, figures.key_found) == (4, 0, 0)
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
    assert (
        proc.returncode == 1
        and "catalog: + GET /client/v4/accounts/*/agent-memory/namespaces/*" in proc.stderr
    )


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


_MEASURE = """(() => {
  const width = document.documentElement.clientWidth;
  const scrolls = (el) => ["auto", "scroll"].includes(getComputedStyle(el).overflowX);
  const insideScroller = (el) => { for (let p = el.parentElement; p; p = p.parentElement) if (scrolls(p)) return true; return false; };
  const wide = [];
  for (const el of document.querySelectorAll("body *")) {
    const r = el.getBoundingClientRect();
    if ((r.right > width + 0.5 || r.left < -0.5) && !insideScroller(el)) wide.push(el.tagName + "." + el.className + " " + (el.textContent || "").slice(0, 40));
  }
  const scrolling = [...document.querySelectorAll("pre, table")].filter((el) => el.scrollWidth > el.clientWidth + 1).map((el) => el.tagName + "#" + el.id);
  const diagram = document.querySelector("figure.diagram");
  const text = [], outside = [];
  const walker = document.createTreeWalker(diagram, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    if (!node.textContent.trim()) continue;
    const range = document.createRange(); range.selectNodeContents(node);
    const box = node.parentElement.closest(".box");
    const size = parseFloat(getComputedStyle(node.parentElement).fontSize);
    text.push([node.textContent.trim(), size, range.getBoundingClientRect().height]);
    if (box) { const b = box.getBoundingClientRect();
      for (const r of range.getClientRects()) if (r.left < b.left || r.right > b.right || r.top < b.top || r.bottom > b.bottom) outside.push(node.textContent.trim()); }
  }
  const boxes = [...diagram.querySelectorAll(".box")].map((b) => { const r = b.getBoundingClientRect(); return [r.left, r.top]; });
  return {innerWidth, scrollWidth: document.documentElement.scrollWidth, wide, scrolling, text, outside, boxes};
})()"""


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    binary = prerequisites.chromium()
    with Browser(binary, tmp_path_factory.mktemp("chromium")) as opened:
        yield opened


def _measure(browser: Browser, width: int) -> dict[str, Any]:
    browser.open(PAGE.as_uri(), width)
    measured = browser.evaluate(_MEASURE)
    assert measured["innerWidth"] == width  # a phone's browser zooms out when a page overflows
    return measured


def test_the_page_renders_in_a_real_browser(browser: Browser) -> None:
    browser.open(PAGE.as_uri(), 1280)
    for number in range(1, 6):
        assert browser.evaluate(f"!!document.getElementById('run-{number}')")
    # runs 1 and 2 recorded calls; 3, 4 and 5 did not
    assert browser.evaluate("document.querySelectorAll('table.trace').length") == 2
    assert browser.evaluate("document.querySelectorAll('table.api').length") == 2
    assert browser.evaluate("document.body.innerText.split('No call recorded').length - 1") == 3
    assert browser.evaluate("!!document.getElementById('api-log')")


@pytest.mark.parametrize("width", [390, 1280])
def test_nothing_on_the_page_is_wider_than_the_screen(browser: Browser, width: int) -> None:
    measured = _measure(browser, width)
    assert measured["scrollWidth"] <= width, measured["wide"]
    assert measured["wide"] == []
    # Code and tables wrap or reflow; none hides a part of itself behind a sideways scroll
    # (on a desktop that was the grants block, with the three allow entries cut off).
    assert measured["scrolling"] == []


def test_the_diagram_is_legible_on_a_phone_and_stacks(browser: Browser) -> None:
    phone = _measure(browser, 390)
    assert phone["text"], "the diagram has no text"
    assert [t for t, size, height in phone["text"] if size < 10 or height < 10] == []
    assert phone["outside"] == []  # every label inside its box
    lefts = {round(left) for left, _top in phone["boxes"]}
    tops = [top for _left, top in phone["boxes"]]
    assert len(lefts) == 1 and tops == sorted(tops)  # one column, top to bottom
    desktop = _measure(browser, 1280)
    assert desktop["outside"] == []
    assert len({round(top) for _left, top in desktop["boxes"][:3]}) == 1  # one row


def test_routes_wrap_between_segments_only() -> None:
    html = PAGE.read_text(encoding="utf-8")
    assert "word-break: break-all" not in html
    allow = json.loads(GRANTS.read_text())["profiles"][PROFILE]["allow"]
    for route in allow:
        assert route.replace("/", "/<wbr>") in html


def test_every_link_goes_somewhere_real() -> None:
    html = PAGE.read_text(encoding="utf-8")
    links = re.findall(r'href="([^"]*)"', html)
    local = [href for href in links if "://" not in href]
    external = sorted({href for href in links if "://" in href})
    assert local and all((HERE / href).is_file() for href in local), local
    assert all(href.startswith("https://") for href in external)
    # The sources the page names, each linked (URLs from the mission page and PROVENANCE).
    for source in (
        "https://spec.openapis.org/oas/v3.0.3.html",
        "https://github.com/cloudflare/api-schemas",
        "https://developers.cloudflare.com/agent-memory/api/http-api/",
        "https://docs.mem0.ai/openapi.json",
    ):
        assert source in external
    assert "fake.py" in local and "grants.json" in local


def test_the_page_claims_nothing_the_code_lacks() -> None:
    text = PAGE.read_text(encoding="utf-8")
    # There is no container or VM provider, and nothing builds metrics from the trace.
    for claim in ("run the same grant and broker behind", "audit log and metrics", "gVisor or a"):
        assert claim not in text
    # The Mem0 rows state what this code does, and the Platform row links the example that
    # shows it: a trailing "/" is an ordinary route, specgen carries all 55 operations, the
    # grants loader reads the entries it writes (query, pins, bodies), a token block sends
    # `Token <key>` (and a bare key in X-API-Key), and no allow entry can pin a field of a
    # body. All must hold for the rows to stay.
    from runtime import Secret, load_grants
    from runtime.broker.credentials import Header, credential_for
    from specgen.allow import AllowError, parse_entry
    from specgen.build import Options
    from specgen.build import run as build
    from specgen.routes import target_allowed

    assert target_allowed("/v1/memories/") and target_allowed("/v1/memories")
    mem0 = build(str(ROOT / "examples/mem0_grant/mem0.openapi.json"), Options())
    assert len(mem0.gen.operations) == 55 and not mem0.gen.skipped
    assert "specgen generates all 55 operations" in text
    from runtime.broker.grants import _allow_entries

    entries = _allow_entries({"allow": json.loads(mem0.files["allow.json"])})
    assert any(e.query for e in entries) and any(e.body for e in entries)
    assert "whose query parameters, <code>DELETE</code> bodies and pins a grant carries" in text
    example = ROOT / "examples/mem0_grant"
    grants = load_grants(example / "grants.json", environ={"MEM0_API_KEY": "k"})
    profile = grants.select("mem0-alice", "support-agent")
    credential = credential_for(profile)
    assert credential is not None and credential.headers() == [("Authorization", "Token k")]
    assert "Authorization: Token &lt;key&gt;" in text and "broker writes only" not in text
    with pytest.raises(AllowError):
        parse_entry({"route": "POST /v1/memories/", "body_fields": ["user_id=alice"]})
    assert "which a grant cannot pin" in text
    assert (example / "index.html").is_file() and 'href="../mem0_grant/index.html"' in text
    # ... and the self-hosted row: a token block sends a bare key in X-API-Key
    from runtime.broker.token_block import parse_token

    hosted = parse_token({"type": "static", "env": "K", "header": "X-API-Key"}, {"K": "k"})
    assert Header(Secret("k"), hosted.header, hosted.value).headers() == [("X-API-Key", "k")]
    assert '"header": "X-API-Key"' in text
