"""The page's claims, as checks over what the runs observed.

Each function returns the claims that do NOT hold (empty = all true). The tests run
them on the real example, and again on deliberately broken variants (a wider grant, a
key planted in the preamble, and in tests/examples/test_claims.py one copy of the
result per check, broken so that exactly that check fails) to show each check can
fail: a claim nobody can falsify is not worth printing.
"""

from __future__ import annotations

from examples.kit import claims as every_page
from examples.kit.runs import ExampleResult

#: What each run must print, line for line, as the page states it.
EXPECTED_PRINTED: dict[int, list[str]] = {
    1: [
        "stored 01JFAKEMEM0000000000000001",
        "recalled: The customer wants replies in Spanish.",
        "read back by ID: The customer wants replies in Spanish.",
    ],
    2: [
        "left over from the first run: undefined",
        "1 memory found: The customer wants replies in Spanish.",
    ],
    3: [
        "client refused: host api call not permitted by sandbox capability: POST /client/v4/accounts/00000000000000000000000000000042/agent-memory/namespaces/support-agent/profiles/customer-43/recall",
        "broker answered: 403 forbidden by sandbox capability allowlist",
    ],
    4: [
        "client refused: host api call not permitted by sandbox capability: DELETE /client/v4/accounts/00000000000000000000000000000042/agent-memory/namespaces/support-agent",
        "broker answered: 403 forbidden by sandbox capability allowlist",
    ],
    5: [
        "functions on memory: 20",
        "globals holding the key: none",
        "client functions holding the key: none",
    ],
}
#: Bytes the broker forwarded per call: compact JSON bodies, nothing added.
EXPECTED_BYTES_SENT: dict[int, list[int]] = {1: [73, 50, 0], 2: [45]}
#: Runs whose one call lies outside the grant.
REFUSAL_RUNS = (3, 4)


def failed_claims(result: ExampleResult) -> list[str]:
    """Every claim of the page that this result contradicts."""
    failures = every_page.printed_claims(result, EXPECTED_PRINTED)
    runs = {run.number: run for run in result.runs}
    for number, want in EXPECTED_BYTES_SENT.items():
        run = runs.get(number)
        got = [row.bytes_sent for row in run.rows] if run else []
        if got != want:
            failures.append(f"run {number} sent {got} bytes per call, the page says {want}")
    failures += every_page.refusal_claims(result, REFUSAL_RUNS, trace_empty=True, denied=2)
    return failures + every_page.trace_claims(result) + every_page.key_claims(result)
