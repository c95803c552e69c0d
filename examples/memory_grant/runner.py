"""The five runs of the memory-grant example, through the real grant, broker and sandbox.

How a run is done and recorded is every example's (`examples.kit.runs`); this says what
is this example's: its fake, its grant and profile, the key the broker holds, and that
run 5 spells the key out itself in order to search for it.
"""

from __future__ import annotations

from pathlib import Path

from examples.kit.runs import Example, ExampleResult
from examples.memory_grant.fake import FakeAgentMemory

HERE = Path(__file__).resolve().parent
GRANTS = HERE / "grants.json"
RUNS = HERE / "runs"
PROFILE = "agent-memory"
CALLER = "support-agent"
TOKEN_ENV = "CLOUDFLARE_API_TOKEN"
#: The key the broker holds for the fake. Run 5 looks for exactly this string.
TOKEN = "fake-agent-memory-token-held-by-the-broker"

EXAMPLE = Example(
    fake=FakeAgentMemory,
    runs=RUNS,
    profile=PROFILE,
    caller=CALLER,
    token_env=TOKEN_ENV,
    unscanned=("look-for-the-key",),
)


def run_example(
    *,
    grants_path: Path = GRANTS,
    token: str = TOKEN,
    preamble_override: str | None = None,
    scan_memory: bool = False,
) -> ExampleResult:
    """The five runs against a fresh fake (see `Example.run`)."""
    return EXAMPLE.run(
        grants_path, token, preamble_override=preamble_override, scan_memory=scan_memory
    )
