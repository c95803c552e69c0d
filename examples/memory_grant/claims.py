"""The page's claims, as checks over what the runs observed.

Each function returns the claims that do NOT hold (empty = all true). The tests run
them on the real example, and again on deliberately broken variants (a wider grant, a
key planted in the preamble, and in tests/examples/test_claims.py one copy of the
result per check, broken so that exactly that check fails) to show each check can
fail: a claim nobody can falsify is not worth printing.
"""

from __future__ import annotations

from examples.memory_grant.runner import ExampleResult

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


def printed_lines(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if line.strip()]


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
    for number, want in EXPECTED_BYTES_SENT.items():
        run = runs.get(number)
        got = [row.bytes_sent for row in run.rows] if run else []
        if got != want:
            failures.append(f"run {number} sent {got} bytes per call, the page says {want}")
    for number in REFUSAL_RUNS:
        run = runs.get(number)
        if run is None:
            continue
        if run.denied != 1:
            failures.append(f"run {number}: the broker denied {run.denied} calls, the page says 1")
        if run.requests:
            failures.append(
                f"run {number}: {len(run.requests)} request(s) reached the API, the page says none"
            )
        if run.rows:
            failures.append(
                f"run {number}: the trace recorded {len(run.rows)} call(s), the page says none"
            )
    allowed = set(result.profile_allow)
    for run in result.runs:
        for row in run.rows:
            if f"{row.method} {row.route}" not in allowed:
                failures.append(
                    f"run {run.number}: trace row {row.seq} holds {row.route!r}, not an allow entry"
                )
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
