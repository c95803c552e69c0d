"""The GitHub triage example's page, computed from the runs and rendered from
templates/github_triage.

Every figure is counted from what the fake, the broker and the guest reported, and
`--check` fails when the committed page no longer matches, as for the other pages.
Nothing that varies between runs or releases is shown: audit lines lose their latency,
and the User-Agent's version is shown as VERSION.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from examples.github_triage.runner import HERE, REPORTED_HEADERS, Observed
from examples.kit.claims import key_leaks
from examples.kit.page import Figures, page_environment, run_view
from examples.kit.page import figures as counted
from examples.kit.runs import ExampleResult, RunRecord
from specgen.build import Result as SpecResult

#: The cut the page is about (see PROVENANCE.md); the page refuses any other bytes.
CUT_SHA256 = "e3c680ece945f640c43122c4cbdcd24301450dbf87f1b8b21717a9c3e7309445"
WHOLE_SHA256 = "829b4bebb19a53133289f7b0bc819f4f1118115821db2ca9f25e9ee995a7da2a"

#: Titles and introductions of the runs, in our words; code and results are read in.
RUN_TEXT: dict[int, tuple[str, list[str]]] = {
    1: (
        "Triage every open bug",
        [
            "The code lists the repository's open issues labelled bug, two a page, through gh.$response, which resolves to {status, headers, body}. It reads the next page's number from the Link header's rel=\"next\" and stops when there is none, so it reaches the last page however many there are.",
            "For each bug it reads the comments, skips the one that already has the bot's marker, and otherwise comments (GitHub answers 201) and adds the triaged label.",
            "Of the headers GitHub sent, the code can read only the ones the grant lists, and Content-Type: it prints their names.",
        ],
    ),
    2: (
        "The same walk again",
        [
            "A fresh sandbox, the same walk: every open bug now carries the bot's comment, so the run only reads.",
            "Then it asks whether any page changed, sending each page's ETag back as If-None-Match through gh.$response.call (the generated method's options hold only the parameters GitHub's document declares). GitHub answers 304 Not Modified with no body, and the count of calls left does not move.",
        ],
    ),
    3: (
        "Another repository",
        [
            "The same comment on acme/billing. The client in the sandbox sees that the grant has no route for it, but sends it all the same, so the broker decides it: the broker refuses it and counts it, and the client reports its own refusal text. Code that skips the client and hands the broker the call itself gets the broker's 403. Nothing reached GitHub, and the trace records only the two denials, each with its rule (route_not_granted).",
        ],
    ),
}


def figures(result: ExampleResult, spec: SpecResult) -> Figures:
    return counted(result, spec, len(key_leaks(result)))


def audit_without_latency(line: str) -> str:
    record = json.loads(line)
    for call in record.get("calls", []):
        call.pop("latency_ms", None)
    return json.dumps(record, separators=(",", ":"))


def _run_view(run: RunRecord) -> dict[str, Any]:
    return {**run_view(run, RUN_TEXT), "audit": audit_without_latency(run.audit_line)}


def shown_value(name: str, value: str) -> str:
    """A header value as the page shows it: the User-Agent's version as VERSION."""
    if name == "user-agent" and value.startswith("plimsoll-specgen/"):
        return "plimsoll-specgen/VERSION"
    return value


def request_headers(observed: Observed) -> list[dict[str, Any]]:
    """For each header the page reports: how many requests carried it, with which values."""
    rows = []
    total = len(observed.headers)
    for name in REPORTED_HEADERS:
        values = [shown_value(name, h[name]) for h in observed.headers if name in h]
        rows.append(
            {"name": name, "count": len(values), "total": total, "seen": sorted(set(values))}
        )
    return rows


def _digest() -> str:
    return hashlib.sha256((HERE / "github-issues.openapi.json").read_bytes()).hexdigest()


def render_page(observed: Observed, spec: SpecResult) -> str:
    if _digest() != CUT_SHA256:
        raise ValueError("github-issues.openapi.json is not the cut PROVENANCE.md names")
    result = observed.result
    return (
        page_environment()
        .get_template("github_triage/index.html.j2")
        .render(
            figures=figures(result, spec),
            routes=[
                json.dumps(e, ensure_ascii=False) for e in json.loads(spec.files["allow.json"])
            ],
            operations=len(spec.gen.allow),
            grants_json=(HERE / "grants.json").read_text(encoding="utf-8").rstrip("\n"),
            cut_sha256=CUT_SHA256,
            whole_sha256=WHOLE_SHA256,
            headers=request_headers(observed),
            pages=sum(1 for r in result.runs[0].requests if "/issues?" in r.path),
            not_modified=sum(1 for r in result.runs[1].requests if r.status == 304),
            runs=[_run_view(run) for run in result.runs],
            api_log=result.api_log,
        )
    )
