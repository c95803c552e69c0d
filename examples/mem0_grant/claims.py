"""The Mem0 page's claims, as checks over what the runs observed.

Each function returns the claims that do NOT hold (empty = all true). The tests run them
on the real example and on deliberately broken variants (a grant without the pin, a
tampered log), so each check is shown able to fail.
"""

from __future__ import annotations

from examples.kit import claims as every_page
from examples.kit.runs import ExampleResult

#: What each run must print, line for line, as the page states it.
EXPECTED_PRINTED: dict[int, list[str]] = {
    1: [
        "food: PENDING event 6576656e-0000-4000-8000-000000000001",
        "travel: PENDING event 6576656e-0000-4000-8000-000000000002",
    ],
    2: [
        "2 memories about food:",
        "  0.667 Alice is allergic to nuts.",
        "  0.5 Alice is vegetarian.",
    ],
    3: [
        "page 1 of 3 memories: Alice is vegetarian. | Alice is allergic to nuts.",
        "page 2 of 3 memories: Alice moves to Lisbon in March.",
        "last page",
    ],
    4: [
        "refused: host api 403: pinned value differs: user_id",
    ],
}
#: The query every list request carried: the pin, added by the broker, then the pages.
EXPECTED_LIST_TARGETS = [
    "/v1/memories/?user_id=alice&page=1&page_size=2",
    "/v1/memories/?user_id=alice&page=2&page_size=2",
]
#: The run whose one call lies outside the grant (another user_id than the pin).
REFUSAL_RUN = 4


def failed_claims(result: ExampleResult) -> list[str]:
    """Every claim of the page that this result contradicts."""
    failures = every_page.printed_claims(result, EXPECTED_PRINTED)
    lists = [req.path for req in result.api_log if req.method == "GET"]
    if lists != EXPECTED_LIST_TARGETS:
        failures.append(
            f"the API received the lists {lists!r}, the page says {EXPECTED_LIST_TARGETS!r}"
        )
    failures += every_page.refusal_claims(result, [REFUSAL_RUN], trace_empty=False)
    failures += every_page.trace_claims(result)
    for run in result.runs:
        for row in run.rows:
            if any("=" in name or "alice" in name for name in row.params):
                failures.append(f"run {run.number}: trace row {row.seq} holds a parameter value")
    return failures + every_page.key_claims(result)
