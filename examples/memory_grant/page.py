"""The example's page, computed from the runs and rendered from templates/memory_grant.

Every figure on the page is counted from what the fake API, the broker and the guest
reported, so a regression in any layer changes the page, and `--check` turns that into
a failing build instead of a page that quietly keeps making an old claim.
"""

from __future__ import annotations

from typing import Any

from examples.kit.claims import key_leaks
from examples.kit.page import Figures, page_environment, run_view
from examples.kit.page import figures as counted
from examples.kit.runs import ExampleResult
from examples.memory_grant.runner import HERE
from specgen.build import Result as SpecResult

PREFIX = "/client/v4"
TABLE_PREFIX = "/client/v4/accounts/"
#: The pin of the upstream file the extract is cut from (see PROVENANCE.md).
UPSTREAM_SHA256 = "29f54710427f411f81c6738c735f3586580f089648f20ca05212d94f4f52bdf0"
UPSTREAM_COMMIT = "2d7642070d549e2e36be64d7ded20b4ac748f53a"

#: Titles and introductions of the runs, in our words; the code and results are read in.
RUN_TEXT: dict[int, tuple[str, list[str]]] = {
    1: (
        "Store a memory, recall it, read it back by its ID",
        [
            "The first run stores a memory, asks the API what it holds about the customer's language, and reads the memory back by the ID the recall returned. All three are routes the grant lists.",
            "The third call shows what the trace does with a wildcard: the request named the memory's ID, and the trace keeps only the allow entry, memories/*.",
        ],
    ),
    2: (
        "A later run, in a fresh sandbox, recalls it",
        [
            "A new run starts a new JavaScript engine, so nothing the first run left in its sandbox is there. The memory is, because it never lived in the sandbox: the API holds it, and this run recalls it.",
        ],
    ),
    3: (
        "Another customer's memory, through the client and around it",
        [
            "The same recall, for customer-43. The client in the sandbox finds no route for that profile in its copy of the allow list, yet sends the call to the broker all the same: the broker refuses it and counts it, so even a refusal the client saw coming is on the record, and the client reports its own refusal text.",
            "That check is the guest's own JavaScript, which hostile code can simply skip, so the code then calls the raw host function underneath the client. The broker, outside the sandbox, refuses that too: two denied calls, each counted with its rule. No request reached the API.",
        ],
    ),
    4: (
        "A route the key could reach and the grant does not list",
        [
            "The generated client has a function for every operation in the document, deleting a namespace among them. Whether the key itself may delete one depends on its Cloudflare permissions, which the broker cannot see; the grant does not list the route, so the client and the broker refuse it, as in the third run.",
        ],
    ),
    5: (
        "The guest looking for the key",
        [
            "The code searches every global of the engine and every function of the client for the key. One global, execArgv, holds all the source the engine was given, the injected client and the generated one included, so a key anywhere in that source would be found: the example's tests plant one in the preamble and this same search names it.",
            "Here it finds nothing, because the key never leaves the host process: the broker sets it on the request to the API after deciding the call is allowed.",
        ],
    ),
}


def figures(result: ExampleResult, spec: SpecResult) -> Figures:
    """The page's headline numbers (`examples.kit.page.figures`), the key counted as
    this page counts it."""
    return counted(result, spec, key_sightings(result))


def key_sightings(result: ExampleResult) -> int:
    """Places the key showed up on the guest's side: outputs, audit lines, guest memory,
    and what the guest's own search in run 5 reported."""
    hits = len(key_leaks(result))
    for run in result.runs:
        for line in run.stdout.splitlines():
            if line.startswith(("globals holding the key: ", "client functions holding the key: ")):
                found = line.split(": ", 1)[1]
                hits += 0 if found == "none" else len(found.split(","))
    return hits


def _provenance() -> dict[str, Any]:
    text = (HERE / "PROVENANCE.md").read_text(encoding="utf-8")
    verbatim = rebuilt = 0
    for line in text.splitlines():
        if line.startswith("| ") and line.count("|") >= 5:
            cells = [c.strip() for c in line.strip("|").split("|")]
            origin = cells[-1] if cells else ""
            if origin.startswith("verbatim"):
                verbatim += 1
            elif "rebuilt" in origin:
                rebuilt += 1
    return {
        "sha256": UPSTREAM_SHA256,
        "commit": UPSTREAM_COMMIT,
        "verbatim": verbatim,
        "rebuilt": rebuilt,
    }


def render_page(result: ExampleResult, spec: SpecResult) -> str:
    first = result.runs[0]
    content = "The customer wants replies in Spanish."
    sent = first.rows[0].bytes_sent if first.rows else 0
    id_route = first.rows[2].route.rsplit("/", 1)[-1] if len(first.rows) > 2 else ""
    return (
        page_environment()
        .get_template("memory_grant/index.html.j2")
        .render(
            figures=figures(result, spec),
            routes=[str(r) for r in spec.gen.allow],
            warnings=list(spec.gen.warnings),
            grants_json=(HERE / "grants.json").read_text(encoding="utf-8").rstrip("\n"),
            provenance=_provenance(),
            prefix=PREFIX,
            server_url=spec.source.doc["servers"][0]["url"],
            table_prefix=TABLE_PREFIX,
            runs=[run_view(run, RUN_TEXT) for run in result.runs],
            api_log=result.api_log,
            api_runs=[run.number for run in result.runs if run.requests],
            keeps={
                "content": content,
                "content_bytes": sent,
                "id_route": f"memories/{id_route}" if id_route else "memories/*",
            },
        )
    )
