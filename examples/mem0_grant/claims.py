"""The Mem0 page's claims, as checks over what the runs observed.

Each function returns the claims that do NOT hold (empty = all true). The tests run them
on the real example and on deliberately broken variants (a grant without the pin, a
tampered log), so each check is shown able to fail.
"""

from __future__ import annotations

from examples.mem0_grant.runner import ExampleResult

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
        "refused: host api 403: forbidden by sandbox capability allowlist",
    ],
}
#: The query every list request carried: the pin, added by the broker, then the pages.
EXPECTED_LIST_TARGETS = [
    "/v1/memories/?user_id=alice&page=1&page_size=2",
    "/v1/memories/?user_id=alice&page=2&page_size=2",
]
#: The run whose one call lies outside the grant (another user_id than the pin).
REFUSAL_RUN = 4


def printed_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def failed_claims(result: ExampleResult) -> list[str]:
    """Every claim of the page that this result contradicts."""
    failures: list[str] = []
    runs = {run.number: run for run in result.runs}
    if sorted(runs) != sorted(EXPECTED_PRINTED):
        failures.append(f"the page shows runs {sorted(EXPECTED_PRINTED)}, got {sorted(runs)}")
    for number, want in EXPECTED_PRINTED.items():
        run = runs.get(number)
        if run is not None and printed_lines(run.stdout + run.stderr) != want:
            failures.append(f"run {number} printed {printed_lines(run.stdout + run.stderr)!r}")
    lists = [req.path for req in result.api_log if req.method == "GET"]
    if lists != EXPECTED_LIST_TARGETS:
        failures.append(
            f"the API received the lists {lists!r}, the page says {EXPECTED_LIST_TARGETS!r}"
        )
    refused = runs.get(REFUSAL_RUN)
    if refused is not None:
        if refused.denied != 1:
            failures.append(
                f"run {REFUSAL_RUN}: the broker denied {refused.denied} calls, the page says 1"
            )
        if refused.requests:
            failures.append(
                f"run {REFUSAL_RUN}: {len(refused.requests)} request(s) reached the API, the page says none"
            )
    allowed = {route.split("?", 1)[0] for route in result.profile_allow}
    for run in result.runs:
        for row in run.rows:
            if f"{row.method} {row.route}" not in allowed:
                failures.append(
                    f"run {run.number}: trace row {row.seq} holds {row.route!r}, not an allow entry"
                )
            if any("=" in name or "alice" in name for name in row.params):
                failures.append(f"run {run.number}: trace row {row.seq} holds a parameter value")
    without_key = [req for req in result.api_log if not req.carried_token]
    if without_key or not result.api_log:
        failures.append(
            f"{len(without_key)} of {len(result.api_log)} requests at the API lacked the key"
        )
    failures += key_leaks(result)
    return failures


def key_leaks(result: ExampleResult) -> list[str]:
    """Where the key showed up on the guest's side of the broker."""
    token = result.token
    leaks: list[str] = []
    for run in result.runs:
        for where, text in (
            ("stdout", run.stdout),
            ("stderr", run.stderr),
            ("audit line", run.audit_line),
        ):
            if token in text:
                leaks.append(f"run {run.number}: the key is in its {where}")
        if run.memory_hits:
            leaks.append(
                f"run {run.number}: the key is in the guest's memory ({run.memory_hits} hits)"
            )
    return leaks
