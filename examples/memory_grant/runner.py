"""The five runs of the memory-grant example, through the real grant, broker and sandbox.

Nothing here re-implements a part of the product: the grants file goes through the
grants loader, every call through the broker, every run through a fresh sandbox. The
runner only starts the fake API, points the profile's base_url at it and records what
each layer saw, so the page can be computed from observations instead of typed in.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from examples.memory_grant.fake import FakeAgentMemory, RecordedRequest
from runtime import load_grants, run_profile

HERE = Path(__file__).resolve().parent
GRANTS = HERE / "grants.json"
RUNS = HERE / "runs"
PROFILE = "agent-memory"
CALLER = "support-agent"
TOKEN_ENV = "CLOUDFLARE_API_TOKEN"
#: The key the broker holds for the fake. Run 5 looks for exactly this string.
TOKEN = "fake-agent-memory-token-held-by-the-broker"


@dataclass(frozen=True)
class Row:
    """One trace row as the page shows it (latency left out on purpose)."""

    seq: int
    method: str
    route: str
    status: int
    bytes_sent: int
    bytes_back: int


@dataclass
class RunRecord:
    number: int
    slug: str
    code: str
    stdout: str
    stderr: str
    exit_code: int
    rows: list[Row]
    denied: int
    requests: list[RecordedRequest]
    audit_line: str
    memory_hits: int = 0


@dataclass
class ExampleResult:
    runs: list[RunRecord]
    api_log: list[RecordedRequest]
    profile_allow: list[str]
    token: str


def run_scripts() -> list[tuple[int, str, str]]:
    """(number, slug, code) of every run, in order, from runs/N-slug.js."""
    out = []
    for path in sorted(RUNS.glob("*.js")):
        number, _, slug = path.stem.partition("-")
        out.append((int(number), slug, path.read_text(encoding="utf-8")))
    return out


def run_example(
    *,
    grants_path: Path = GRANTS,
    token: str = TOKEN,
    preamble_override: str | None = None,
    scan_memory: bool = False,
) -> ExampleResult:
    """Start the fake, load the grant as any grants file is loaded, and do the five runs.

    `preamble_override` and a different `grants_path` exist for the tests that must show
    a claim on the page failing when it is false (a key planted in the preamble, a grant
    made wider).
    """
    grants = load_grants(grants_path, environ={TOKEN_ENV: token})
    with FakeAgentMemory(token) as fake:
        profile = grants.select(PROFILE, CALLER).with_base_url(fake.url)
        if preamble_override is not None:
            profile = profile.with_preamble(preamble_override)
        records: list[RunRecord] = []
        for number, slug, code in run_scripts():
            before = len(fake.requests)
            # Run 5 spells the key out itself in order to search for it, so its memory
            # holds the key by construction; every other run's memory is scanned.
            scan = scan_memory and slug != "look-for-the-key"
            outcome = run_profile(
                code,
                profile,
                caller=CALLER,
                clock="fixed",
                scan_memory_for=token if scan else None,
            )
            trace = outcome.trace
            rows = [
                Row(r.seq, r.method, r.route, r.status, r.bytes_sent, r.bytes_back)
                for r in trace.rows
            ]
            records.append(
                RunRecord(
                    number=number,
                    slug=slug,
                    code=code,
                    stdout=outcome.result.stdout,
                    stderr=outcome.result.stderr,
                    exit_code=outcome.result.exit_code,
                    rows=rows,
                    denied=trace.denied,
                    requests=fake.requests[before:],
                    audit_line=outcome.audit,
                    memory_hits=outcome.memory_hits,
                )
            )
        log = fake.requests
    return ExampleResult(
        runs=records,
        api_log=log,
        profile_allow=[str(r) for r in profile.allow],
        token=token,
    )
