"""The claims every example's page makes, as checks over what its runs observed.

Each function returns the claims that do NOT hold (empty = all true). An example's own
`claims.failed_claims` adds what only its page says; its tests run every check on the
real example and on a broken variant per check, so each is shown able to fail.
"""

from __future__ import annotations

from collections.abc import Iterable

from examples.kit.runs import ExampleResult


def printed_lines(text: str) -> list[str]:
    """What a run printed as a page shows it: no blank lines."""
    return [line for line in text.splitlines() if line.strip()]


def printed_claims(result: ExampleResult, expected: dict[int, list[str]]) -> list[str]:
    """The page shows these runs, and each printed these lines (stdout, then stderr)."""
    failures: list[str] = []
    runs = {run.number: run for run in result.runs}
    if sorted(runs) != sorted(expected):
        failures.append(f"the page shows runs {sorted(expected)}, got {sorted(runs)}")
    for number, want in expected.items():
        run = runs.get(number)
        if run is not None and printed_lines(run.stdout + run.stderr) != want:
            failures.append(f"run {number} printed {printed_lines(run.stdout + run.stderr)!r}")
    return failures


def refusal_claims(
    result: ExampleResult, numbers: Iterable[int], *, trace_empty: bool, denied: int = 1
) -> list[str]:
    """Each of these runs made `denied` calls outside the grant (through the client, and
    around it): the broker denied exactly those, no request reached the API, and
    (`trace_empty`) the trace recorded no call."""
    failures: list[str] = []
    runs = {run.number: run for run in result.runs}
    for number in numbers:
        run = runs.get(number)
        if run is None:
            continue
        if run.denied != denied:
            failures.append(
                f"run {number}: the broker denied {run.denied} calls, the page says {denied}"
            )
        if run.requests:
            failures.append(
                f"run {number}: {len(run.requests)} request(s) reached the API, the page says none"
            )
        if trace_empty and run.rows:
            failures.append(
                f"run {number}: the trace recorded {len(run.rows)} call(s), the page says none"
            )
    return failures


def trace_claims(result: ExampleResult) -> list[str]:
    """Every trace row names an allow entry of the profile (its route, never the path)."""
    allowed = {route.split("?", 1)[0] for route in result.profile_allow}
    return [
        f"run {run.number}: trace row {row.seq} holds {row.route!r}, not an allow entry"
        for run in result.runs
        for row in run.rows
        if f"{row.method} {row.route}" not in allowed
    ]


def key_claims(result: ExampleResult) -> list[str]:
    """Every request at the API carried the key, and the guest's side never saw it."""
    failures: list[str] = []
    without_key = [req for req in result.api_log if not req.carried_token]
    if without_key or not result.api_log:
        failures.append(
            f"{len(without_key)} of {len(result.api_log)} requests at the API lacked the key"
        )
    return failures + key_leaks(result)


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
