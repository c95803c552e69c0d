"""An example's runs, through the real grant, broker and sandbox, recorded layer by layer.

Nothing here re-implements a part of the product: the grants file goes through the
grants loader, every call through the broker, every run through a fresh sandbox. This
only starts the fake API, points the profile's base_url at it and records what each
layer saw (the guest's output, the trace, the audit line, the requests that reached the
API), so a page can be computed from observations instead of typed in.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path

from examples.kit.loopback import LoopbackServer, RecordedRequest
from runtime import load_grants, run_profile


@dataclass(frozen=True)
class Row:
    """One trace row as a page shows it (latency left out on purpose: it varies)."""

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


@dataclass(frozen=True)
class Example:
    """Where an example's pieces are and whom its runs run as."""

    fake: Callable[[str], LoopbackServer]  # the fake API, given the key it requires
    runs: Path  # the folder of runs/N-slug.js
    profile: str
    caller: str
    token_env: str  # the variable the grants file's token block reads
    #: Runs that spell the key out themselves (to search for it), so their memory holds
    #: it by construction; every other run's memory is scanned when asked.
    unscanned: Collection[str] = ()

    def scripts(self) -> list[tuple[int, str, str]]:
        """(number, slug, code) of every run, in order, from runs/N-slug.js."""
        out = []
        for path in sorted(self.runs.glob("*.js")):
            number, _, slug = path.stem.partition("-")
            out.append((int(number), slug, path.read_text(encoding="utf-8")))
        return out

    def run(
        self,
        grants_path: Path,
        token: str,
        *,
        preamble_override: str | None = None,
        scan_memory: bool = False,
    ) -> ExampleResult:
        """Start the fake, load the grant as any grants file is loaded, and do the runs.

        `preamble_override` and another `grants_path` exist for the tests that show a
        claim on the page failing when it is false (a key planted in the preamble, a
        grant made wider).
        """
        grants = load_grants(grants_path, environ={self.token_env: token})
        with self.fake(token) as fake:
            profile = grants.select(self.profile, self.caller).with_base_url(fake.url)
            if preamble_override is not None:
                profile = profile.with_preamble(preamble_override)
            records: list[RunRecord] = []
            for number, slug, code in self.scripts():
                before = len(fake.requests)
                scan = scan_memory and slug not in self.unscanned
                outcome = run_profile(
                    code,
                    profile,
                    caller=self.caller,
                    clock="fixed",
                    scan_memory_for=token if scan else None,
                )
                trace = outcome.trace
                rows = [
                    Row(r.seq, r.method, r.route, r.status, r.bytes_sent, r.bytes_back, r.params)
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
