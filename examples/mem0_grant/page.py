"""The Mem0 example's page, computed from the runs and rendered from templates/mem0_grant.

Every figure is counted from what the fake, the broker and the guest reported, and
`--check` fails when the committed page no longer matches, as for the memory-grant page.
Nothing that varies between runs is shown: the audit lines lose their latency.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from examples.kit.claims import key_leaks
from examples.kit.page import Figures, page_environment, run_view
from examples.kit.page import figures as counted
from examples.kit.runs import ExampleResult, RunRecord
from examples.mem0_grant.runner import HERE
from specgen.build import Result as SpecResult

#: The upstream blob the document is (see PROVENANCE.md); checked by the tests.
UPSTREAM_BLOB = "4b8cf037896a470332a43412b11e90cf51a39842"
UPSTREAM_COMMIT = "8d5b7865bd0521e75fe9ab1b260eeccc83f8a378"
UPSTREAM_SHA256 = "45f6cfb56ba0425511b1a26277d6e21fd2efec371e8a67260a8324cabc3c0885"

#: Titles and introductions of the runs, in our words; code and results are read in.
RUN_TEXT: dict[int, tuple[str, list[str]]] = {
    1: (
        "Add memories for Alice",
        [
            "Two adds, each a conversation with Alice's user_id and a metadata topic. Mem0 answers an add with a queued event, not the memories; the fake processes it at once, keeping each user message as one memory.",
            "The user_id travels in the JSON body. The grant cannot pin a body field, so this route would take any user_id the code wrote: see what the grant cannot confine, above.",
        ],
    ),
    2: (
        "Search with filters",
        [
            "A search in a fresh sandbox, filtered to Alice and to the food topic. The Lisbon memory is left out by the metadata filter; the two food memories come back ranked by the fake's word match.",
        ],
    ),
    3: (
        "List, a page at a time",
        [
            "The code asks for pages of two and follows next until it is null. It never names a user: the grant pins user_id=alice on this route, so the broker adds it to every request (see the paths the API received).",
            "The trace keeps the names of the parameters each call sent, never their values.",
        ],
    ),
    4: (
        "Another user's memories",
        [
            "The same list with user_id=bob. The client in the sandbox passes it on (its copy of the grant checks routes, not parameters), and the broker refuses it, naming the parameter but not the value: the pinned value is alice, and any other value is refused, not replaced. No request reached the API.",
        ],
    ),
}


def figures(result: ExampleResult, spec: SpecResult) -> Figures:
    """The page's headline numbers (`examples.kit.page.figures`), the key counted as
    this page counts it."""
    return counted(result, spec, len(key_leaks(result)))


def audit_without_latency(line: str) -> str:
    """The run's audit line as the page shows it: the same JSON without latency_ms,
    the one field that differs from run to run."""
    record = json.loads(line)
    for call in record.get("calls", []):
        call.pop("latency_ms", None)
    return json.dumps(record, separators=(",", ":"))


def _run_view(run: RunRecord) -> dict[str, Any]:
    return {**run_view(run, RUN_TEXT), "audit": audit_without_latency(run.audit_line)}


def _document_digest() -> dict[str, str]:
    raw = (HERE / "mem0.openapi.json").read_bytes()
    return {
        "sha256": hashlib.sha256(raw).hexdigest(),
        "blob": hashlib.sha1(b"blob %d\0" % len(raw) + raw).hexdigest(),
    }


def render_page(result: ExampleResult, spec: SpecResult) -> str:
    digest = _document_digest()
    if digest != {"sha256": UPSTREAM_SHA256, "blob": UPSTREAM_BLOB}:
        raise ValueError("mem0.openapi.json is not the upstream blob PROVENANCE.md names")
    return (
        page_environment()
        .get_template("mem0_grant/index.html.j2")
        .render(
            figures=figures(result, spec),
            routes=catalog_lines(spec),
            list_others=len(declared_query(spec, "GET /v1/memories/")) - len(LIST_GRANTED),
            trailing=sum(1 for r in spec.gen.allow if r.path.endswith("/")),
            skipped=len(spec.gen.skipped),
            grants_json=(HERE / "grants.json").read_text(encoding="utf-8").rstrip("\n"),
            provenance={"commit": UPSTREAM_COMMIT, **digest},
            runs=[_run_view(run) for run in result.runs],
            api_log=result.api_log,
        )
    )


#: The query parameters the grant's list entry names (the page explains each).
LIST_GRANTED = ("user_id", "page", "page_size")


def declared_query(spec: SpecResult, route: str) -> list[str]:
    """The query parameters allow.json names for `route` (either spelling of an entry)."""
    for entry in json.loads(spec.files["allow.json"]):
        if isinstance(entry, dict) and entry.get("route") == route:
            return [item.split("=", 1)[0] for item in entry.get("query", [])]
        if isinstance(entry, str) and entry.split("?", 1)[0] == route:
            query = entry.partition("?")[2]
            return [item.split("=", 1)[0] for item in query.split("&")] if query else []
    raise ValueError(f"allow.json has no entry for {route}")


def catalog_lines(spec: SpecResult) -> list[str]:
    """allow.json as specgen wrote it, one entry a line (parameters included)."""
    return [json.dumps(entry, ensure_ascii=False) for entry in json.loads(spec.files["allow.json"])]
