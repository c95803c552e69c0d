"""The GitHub triage page's claims, as checks over what the runs observed.

Each function returns the claims that do NOT hold (empty = all true). The tests run them
on the real example and on deliberately broken variants (a grant that does not let the
code read `Link`, a tampered log), so each check is shown able to fail.
"""

from __future__ import annotations

from examples.kit import claims as every_page
from examples.kit.runs import ExampleResult

#: What each run must print, line for line, as the page states it.
EXPECTED_PRINTED: dict[int, list[str]] = {
    1: [
        "page 1: #8 #7 (4999 calls left this hour)",
        "headers the code can read: content-type, etag, link, x-ratelimit-limit, "
        "x-ratelimit-remaining, x-ratelimit-reset, x-ratelimit-resource, x-ratelimit-used",
        "page 2: #6 #5 (4998 calls left this hour)",
        "page 3: #3 #1 (4997 calls left this hour)",
        "#8 Progress bar stuck at 99%: commented (201), labels bug, triaged",
        "#7 Login loop on Safari: commented (201), labels bug, triaged",
        "#6 Support YAML configs: commented (201), labels enhancement, bug, triaged",
        "#5 Export fails for names with spaces: commented (201), labels bug, triaged",
        "#3 Timeout on large uploads: already triaged",
        "#1 Crash when the config file is empty: commented (201), labels bug, triaged",
    ],
    2: [
        "3 pages, 6 bugs already triaged, 0 new",
        "page 1 again: 304 Not Modified (4972 calls left)",
        "page 2 again: 304 Not Modified (4972 calls left)",
        "page 3 again: 304 Not Modified (4972 calls left)",
    ],
    3: [
        "client: host api call not permitted by sandbox capability: POST /repos/acme/billing/issues/1/comments",
        "broker: 403 forbidden by sandbox capability allowlist",
    ],
}
#: The pages the walk asked for, in order: page 1, then each page Link named as next.
EXPECTED_PAGES = [
    f"/repos/acme/widgets/issues?state=open&labels=bug&per_page=2&page={n}" for n in (1, 2, 3)
]
#: The issues the first run commented on: the open bugs without the bot's comment.
EXPECTED_COMMENTED = [8, 7, 6, 5, 1]
#: The run whose one call lies outside the grant (another repository).
REFUSAL_RUN = 3


def _posted(requests: list, suffix: str) -> list[int]:
    return [
        int(req.path.split("/")[5])
        for req in requests
        if req.method == "POST" and req.path.endswith(suffix)
    ]


def failed_claims(result: ExampleResult) -> list[str]:
    """Every claim of the page that this result contradicts."""
    failures = every_page.printed_claims(result, EXPECTED_PRINTED)
    runs = {run.number: run for run in result.runs}
    for number, expected in ((1, EXPECTED_PAGES), (2, EXPECTED_PAGES * 2)):
        run = runs.get(number)
        pages = [r.path for r in run.requests if "/issues?" in r.path] if run else []
        if run is not None and pages != expected:
            failures.append(f"run {number} listed {pages!r}, the page says {expected!r}")
    first = runs.get(1)
    if first is not None:
        for suffix in ("/comments", "/labels"):
            posted = _posted(first.requests, suffix)
            if posted != EXPECTED_COMMENTED:
                failures.append(
                    f"run 1 posted {suffix[1:]} on {posted!r}, the page says {EXPECTED_COMMENTED!r}"
                )
    again = runs.get(2)
    if again is not None and any(req.method != "GET" for req in again.requests):
        failures.append("run 2 wrote to the repository, the page says it only read")
    if again is not None:
        listed = [r.status for r in again.requests if "/issues?" in r.path]
        if listed != [200] * len(EXPECTED_PAGES) + [304] * len(EXPECTED_PAGES):
            failures.append(
                f"run 2's lists were answered {listed!r}, the page says each page 200 and "
                "then 304 Not Modified"
            )
    # A 304 is GitHub accepting a conditional request, not refusing it.
    refused = [req for req in result.api_log if not 200 <= req.status <= 299 and req.status != 304]
    if refused:
        failures.append(
            f"the API refused {len(refused)} request(s), the page says it accepted every one"
        )
    failures += every_page.refusal_claims(result, [REFUSAL_RUN], trace_empty=True, denied=2)
    failures += every_page.trace_claims(result)
    return failures + every_page.key_claims(result)
