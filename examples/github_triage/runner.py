"""The runs of the GitHub triage example, through the real grant, broker and sandbox.

How a run is done and recorded is every example's (`examples.kit.runs`); this says what
is this example's: the GitHub fake, and a grant for one repository whose profile sends
GitHub's version and media-type headers and lets the code read `Link`, `ETag` and the
rate-limit headers.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from examples.github_triage.fake import FakeGitHub
from examples.kit.runs import Example, ExampleResult

HERE = Path(__file__).resolve().parent
GRANTS = HERE / "grants.json"
RUNS = HERE / "runs"
PROFILE = "github-triage"
CALLER = "triage-agent"
TOKEN_ENV = "GITHUB_TOKEN"
#: The token the broker holds for the fake; the claims look for exactly this string.
TOKEN = "ghp_fakeTriageTokenHeldByTheBroker01"

EXAMPLE = Example(fake=FakeGitHub, runs=RUNS, profile=PROFILE, caller=CALLER, token_env=TOKEN_ENV)
#: The request headers the page reports, as the fake received them.
REPORTED_HEADERS = ("user-agent", "accept", "x-github-api-version")


@dataclass(frozen=True)
class Observed:
    """The runs, and the request headers the fake saw on each request (names lower-case;
    `Authorization` left out, so the token never leaves the fake)."""

    result: ExampleResult
    headers: list[dict[str, str]]


def run_observed(
    *, grants_path: Path = GRANTS, token: str = TOKEN, scan_memory: bool = False
) -> Observed:
    """The runs against a fresh fake (see `Example.run`); another `grants_path` exists for
    the tests that show a claim failing when the grant is changed."""
    fakes: list[FakeGitHub] = []

    def make(key: str) -> FakeGitHub:
        fakes.append(FakeGitHub(key))
        return fakes[-1]

    example = replace(EXAMPLE, fake=make)
    result = example.run(grants_path, token, scan_memory=scan_memory)
    seen = [{k: v for k, v in h.items() if k != "authorization"} for h in fakes[0].seen_headers]
    return Observed(result, seen)


def run_example(
    *, grants_path: Path = GRANTS, token: str = TOKEN, scan_memory: bool = False
) -> ExampleResult:
    """The runs alone (see `run_observed`)."""
    return run_observed(grants_path=grants_path, token=token, scan_memory=scan_memory).result
