"""The Mem0 example end to end: every claim on its page, and claims failing when made false."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from examples.kit.claims import key_leaks
from examples.mem0_grant import page as page_mod
from examples.mem0_grant.__main__ import DOCUMENT, OPTIONS, PAGE
from examples.mem0_grant.claims import failed_claims
from examples.mem0_grant.runner import GRANTS, HERE, PROFILE, TOKEN, ExampleResult, run_example
from specgen import build as pipeline
from specgen.check import grant_drift
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
        [sys.executable, "-m", "examples.mem0_grant", "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr


def test_specgen_carries_every_route_with_its_trailing_slash(spec: pipeline.Result) -> None:
    assert len(spec.gen.allow) == 55 and not spec.gen.skipped
    assert all(route.path.endswith("/") for route in spec.gen.allow)
    assert grant_drift(spec, GRANTS, PROFILE) == []


def test_the_broker_sends_token_and_adds_the_pin(result: ExampleResult) -> None:
    figures = page_mod.figures(result, pipeline.run(str(DOCUMENT), OPTIONS))
    assert (figures.key_requests, figures.api_requests) == (5, 5)
    assert (figures.refused, figures.refused_reached, figures.key_found) == (1, 0, 0)
    lists = [req.path for req in result.api_log if req.method == "GET"]
    assert lists and all(path.startswith("/v1/memories/?user_id=alice&") for path in lists)
    # The trace keeps names, never values.
    rows = [row for run in result.runs for row in run.rows if row.method == "GET"]
    assert rows and all(row.params == ("user_id", "page", "page_size") for row in rows)
    calls = [json.loads(run.audit_line)["calls"] for run in result.runs if run.number == 3]
    assert calls and "alice" not in json.dumps(calls)  # the pinned value is not kept


def test_a_log_without_the_key_fails_the_claims(result: ExampleResult) -> None:
    tampered = replace(
        result, api_log=[replace(result.api_log[0], carried_token=False), *result.api_log[1:]]
    )
    assert any("lacked the key" in f for f in failed_claims(tampered))


def _grants_without_the_pin(tmp_path: Path) -> Path:
    data = json.loads(GRANTS.read_text())
    allow = data["profiles"][PROFILE]["allow"]
    allow[2] = "GET /v1/memories/?user_id&page&page_size"
    target = tmp_path / "grants.json"
    target.write_text(json.dumps(data))
    shutil.copy(HERE / "preamble.js", tmp_path / "preamble.js")
    return target


def test_without_the_pin_bob_is_listed_and_the_claims_fail(tmp_path: Path) -> None:
    widened = run_example(grants_path=_grants_without_the_pin(tmp_path))
    run4 = {run.number: run for run in widened.runs}[4]
    assert run4.denied == 0 and run4.requests
    assert run4.requests[0].path == "/v1/memories/?user_id=bob&page=1&page_size=2"
    failures = failed_claims(widened)
    assert any(f.startswith("run 4: the broker denied 0") for f in failures)
    # and run 3, which names no user, now lists nobody's memories (a 400 from the API)
    assert any(f.startswith("run 3 printed") for f in failures)


def test_the_key_is_nowhere_on_the_guest_side(result: ExampleResult) -> None:
    assert key_leaks(result) == []
    assert TOKEN not in PAGE.read_text(encoding="utf-8")


def test_the_page_says_what_the_grant_cannot_confine() -> None:
    text = PAGE.read_text(encoding="utf-8")
    assert "code given this grant can add memories for any user" in text
    grant = json.loads(GRANTS.read_text())["profiles"][PROFILE]
    assert grant["token"]["value"] == "Token {token}"
    body_routes = [e for e in grant["allow"] if e.startswith("POST ")]
    assert body_routes == ["POST /v1/memories/", "POST /v2/memories/search/"]


def test_every_link_goes_somewhere_real() -> None:
    html = PAGE.read_text(encoding="utf-8")
    links = re.findall(r'href="([^"]*)"', html)
    local = [href for href in links if "://" not in href]
    assert local and all((HERE / href).is_file() for href in local), local
    assert all(href.startswith("https://") for href in links if "://" in href)
    assert "../memory_grant/index.html" in local


_MEASURE = """(() => {
  const width = document.documentElement.clientWidth;
  const wide = [];
  for (const el of document.querySelectorAll("body *")) {
    const r = el.getBoundingClientRect();
    if (r.right > width + 0.5 || r.left < -0.5) wide.push(el.tagName + " " + (el.textContent || "").slice(0, 40));
  }
  const scrolling = [...document.querySelectorAll("pre, table")].filter((el) => el.scrollWidth > el.clientWidth + 1).map((el) => el.tagName + "#" + el.id);
  return {innerWidth, scrollWidth: document.documentElement.scrollWidth, wide, scrolling};
})()"""


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    binary = prerequisites.chromium()
    with Browser(binary, tmp_path_factory.mktemp("chromium")) as opened:
        yield opened


@pytest.mark.parametrize("width", [390, 1280])
def test_nothing_on_the_page_is_wider_than_the_screen(browser: Browser, width: int) -> None:
    browser.open(PAGE.as_uri(), width)
    measured: dict[str, Any] = browser.evaluate(_MEASURE)
    assert measured["innerWidth"] == width
    assert measured["scrollWidth"] <= width, measured["wide"]
    assert measured["wide"] == [] and measured["scrolling"] == []
    for number in range(1, 5):
        assert browser.evaluate(f"!!document.getElementById('run-{number}')")
