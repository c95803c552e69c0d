"""The GitHub triage example end to end: every claim on its page, every call one the GitHub
fake accepts, the walk reaching the last page only through Link, and claims failing when
made false."""

from __future__ import annotations

import copy
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

from examples.github_triage import fake as github
from examples.github_triage import page as page_mod
from examples.github_triage.__main__ import DOCUMENT, OPTIONS, PAGE
from examples.github_triage.claims import EXPECTED_PAGES, failed_claims
from examples.github_triage.runner import (
    GRANTS,
    HERE,
    PROFILE,
    TOKEN,
    Observed,
    run_example,
    run_observed,
)
from examples.kit.claims import key_leaks
from specgen import build as pipeline
from specgen.check import grant_drift
from tests import conftest as prerequisites
from tests.examples.headless import Browser

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def spec() -> pipeline.Result:
    return pipeline.run(str(DOCUMENT), OPTIONS)


@pytest.fixture(scope="module")
def observed() -> Observed:
    return run_observed(scan_memory=True)


def test_every_claim_on_the_page_holds(observed: Observed) -> None:
    assert failed_claims(observed.result) == []


def test_the_committed_page_and_files_are_current() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "examples.github_triage", "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr


def test_specgen_carries_every_operation_and_the_grant_matches(spec: pipeline.Result) -> None:
    assert len(spec.gen.allow) == 53 and not spec.gen.skipped
    assert grant_drift(spec, GRANTS, PROFILE) == []


def test_every_call_is_one_the_github_fake_accepts(observed: Observed) -> None:
    log = observed.result.api_log
    assert log and all(200 <= req.status <= 299 or req.status == 304 for req in log)
    # The 304s are run 2's conditional re-reads, each carrying the ETag it was sent.
    not_modified = [i for i, req in enumerate(log) if req.status == 304]
    assert len(not_modified) == 3
    for i in not_modified:
        assert re.fullmatch(r'W/"[0-9a-f]{32}"', observed.headers[i]["if-none-match"])
    assert all(req.carried_token and req.operation_id for req in log)
    # What GitHub requires arrived on every request: a User-Agent, and the profile's headers.
    assert len(observed.headers) == len(log)
    for headers in observed.headers:
        assert headers["user-agent"].startswith("plimsoll-specgen/")
        assert headers["x-github-api-version"] == "2022-11-28"
        assert headers["accept"] == "application/vnd.github+json"


def test_the_creates_got_201_and_github_wrote_what_the_page_says(observed: Observed) -> None:
    posts = [r for r in observed.result.api_log if r.method == "POST"]
    comments = [r.status for r in posts if r.path.endswith("/comments")]
    assert comments == [201] * 5
    first = observed.result.runs[0]
    assert any(row.status == 201 for row in first.rows)


def _grants_with(tmp_path: Path, change: Any) -> Path:
    data = json.loads(GRANTS.read_text())
    change(data["profiles"][PROFILE])
    target = tmp_path / "grants.json"
    target.write_text(json.dumps(data))
    shutil.copy(HERE / "preamble.js", tmp_path / "preamble.js")
    return target


def test_without_link_the_walk_stops_at_page_one_and_the_claims_fail(tmp_path: Path) -> None:
    def no_link(profile: dict[str, Any]) -> None:
        profile["response_headers"] = ["ETag", "X-RateLimit-*"]

    narrowed = run_example(grants_path=_grants_with(tmp_path, no_link))
    first = narrowed.runs[0]
    pages = [r.path for r in first.requests if "/issues?" in r.path]
    assert pages == EXPECTED_PAGES[:1]  # the fake sent Link; the code could not read it
    assert "link" not in first.stdout
    failures = failed_claims(narrowed)
    assert any(f.startswith("run 1 listed") for f in failures)
    assert any(f.startswith("run 1 printed") for f in failures)


def test_without_if_none_match_the_re_reads_are_refused_and_the_claims_fail(
    tmp_path: Path,
) -> None:
    """The 304s come from the header the grant lists: an entry without it, and the
    broker refuses the conditional re-read before anything reaches GitHub."""

    def no_conditional(profile: dict[str, Any]) -> None:
        profile["allow"][0].pop("headers")

    narrowed = run_example(grants_path=_grants_with(tmp_path, no_conditional))
    again = narrowed.runs[1]
    assert [r.status for r in again.requests if "/issues?" in r.path] == [200, 200, 200]
    assert "304" not in again.stdout
    failures = failed_claims(narrowed)
    assert any(f.startswith("run 2's lists were answered") for f in failures)
    assert any(f.startswith("run 2 printed") for f in failures)


def test_the_walk_follows_link_to_the_last_page_whatever_its_number(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """More bugs than the page shows: the same code reaches every page, so it reads the
    Link header rather than counting on three pages."""
    extra = tuple((f"Bug number {i}", "open", ("bug",), "zoe", False) for i in range(9, 16))
    monkeypatch.setattr(github, "ISSUES", github.ISSUES + extra)
    result = run_example()
    pages = [r.path for r in result.runs[0].requests if "/issues?" in r.path]
    assert [p.rsplit("=", 1)[1] for p in pages] == [str(n) for n in range(1, 8)]
    assert "page 7: #1 " in result.runs[0].stdout


def test_without_the_profile_headers_github_refuses_and_the_claims_fail(tmp_path: Path) -> None:
    """The profile's X-GitHub-Api-Version is what the fake checks: a grant that names a
    version GitHub does not support gets GitHub's 400 on every call."""

    def wrong_version(profile: dict[str, Any]) -> None:
        profile["headers"]["X-GitHub-Api-Version"] = "2019-01-01"

    broken = run_example(grants_path=_grants_with(tmp_path, wrong_version))
    assert {req.status for req in broken.api_log} == {400}
    assert any("the API refused" in f for f in failed_claims(broken))


def test_another_repository_is_refused_by_the_broker_with_nothing_sent(observed: Observed) -> None:
    run3 = observed.result.runs[2]
    # the client's attempt and the raw one: both refused by the broker, both counted
    assert run3.denied == 2 and not run3.requests and not run3.rows
    assert "billing" not in run3.audit_line


def test_a_tampered_log_fails_the_claims(observed: Observed) -> None:
    result = observed.result
    tampered = replace(
        result, api_log=[replace(result.api_log[0], carried_token=False), *result.api_log[1:]]
    )
    assert any("lacked the key" in f for f in failed_claims(tampered))


def test_the_token_is_nowhere_on_the_guest_side(observed: Observed) -> None:
    assert key_leaks(observed.result) == []
    text = PAGE.read_text(encoding="utf-8")
    assert TOKEN not in text
    assert page_mod.CUT_SHA256 in text


def test_every_link_goes_somewhere_real() -> None:
    html = PAGE.read_text(encoding="utf-8")
    links = re.findall(r'href="([^"]*)"', html)
    local = [href for href in links if "://" not in href]
    assert local and all((HERE / href).is_file() for href in local), local
    assert all(href.startswith("https://") for href in links if "://" in href)


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
    for number in range(1, 4):
        assert browser.evaluate(f"!!document.getElementById('run-{number}')")


def _break(observed: Observed, change: Any) -> list[str]:
    result = copy.deepcopy(observed.result)
    change(result)
    return failed_claims(result)


def test_a_write_in_the_second_run_fails_its_claim(observed: Observed) -> None:
    def write(result: Any) -> None:
        run = result.runs[1]
        run.requests.append(replace(run.requests[0], method="POST"))

    assert any(f.startswith("run 2 wrote") for f in _break(observed, write))


def test_a_comment_on_the_triaged_issue_fails_its_claim(observed: Observed) -> None:
    def comment_on_3(result: Any) -> None:
        run = result.runs[0]
        post = next(r for r in run.requests if r.method == "POST")
        run.requests.append(replace(post, path="/repos/acme/widgets/issues/3/comments"))

    assert any(f.startswith("run 1 posted comments") for f in _break(observed, comment_on_3))


def test_a_refused_request_fails_its_claim(observed: Observed) -> None:
    def refuse(result: Any) -> None:
        result.api_log[0] = replace(result.api_log[0], status=403)

    assert any("the API refused 1" in f for f in _break(observed, refuse))
