"""The runs of the Mem0 example, through the real grant, broker and sandbox.

As in `examples.memory_grant`, nothing here re-implements a part of the product: the
grants file goes through the grants loader (its token block sends `Authorization: Token
<key>`, its list entry pins `user_id=alice`), every call goes through the broker, every
run through a fresh sandbox. The runner starts the fake, points the profile's base_url
at it and records what each layer saw, so the page is computed from observations.

Needs the `creds` branch on main (the token block's `"header"`/`"value"`, which sends
`Token <key>`); until then the grants loader refuses grants.json and
`python -m examples.mem0_grant` says so in one line. Structured calls (`calls`) are on main.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from examples.mem0_grant.fake import FakeMem0, RecordedRequest
from runtime import load_grants, run_profile

HERE = Path(__file__).resolve().parent
GRANTS = HERE / "grants.json"
RUNS = HERE / "runs"
PROFILE = "mem0-alice"
CALLER = "support-agent"
TOKEN_ENV = "MEM0_API_KEY"
#: The key the broker holds for the fake; the claims look for exactly this string.
TOKEN = "m0-fake-mem0-key-held-by-the-broker"


@dataclass(frozen=True)
class Row:
    """One trace row as the page shows it (latency left out on purpose)."""

    seq: int
    method: str
    route: str
    status: int
    bytes_sent: int
    bytes_back: int
    params: tuple[str, ...]


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
    *, grants_path: Path = GRANTS, token: str = TOKEN, scan_memory: bool = False
) -> ExampleResult:
    """Start the fake, load the grant as any grants file is loaded, and do the runs.

    A different `grants_path` exists for the tests that show a claim failing when the
    grant is made wider.
    """
    grants = load_grants(grants_path, environ={TOKEN_ENV: token})
    with FakeMem0(token) as fake:
        profile = grants.select(PROFILE, CALLER).with_base_url(fake.url)
        records: list[RunRecord] = []
        for number, slug, code in run_scripts():
            before = len(fake.requests)
            outcome = run_profile(
                code,
                profile,
                caller=CALLER,
                clock="fixed",
                scan_memory_for=token if scan_memory else None,
            )
            trace = outcome.trace
            rows = [
                Row(
                    r.seq,
                    r.method,
                    r.route,
                    r.status,
                    r.bytes_sent,
                    r.bytes_back,
                    r.params,
                )
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
