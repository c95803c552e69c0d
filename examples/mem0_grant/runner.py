"""The runs of the Mem0 example, through the real grant, broker and sandbox.

How a run is done and recorded is every example's (`examples.kit.runs`); this says what
is this example's: its fake, and a grant whose token block sends `Authorization: Token
<key>` and whose list entry pins `user_id=alice`.
"""

from __future__ import annotations

from pathlib import Path

from examples.kit.runs import Example, ExampleResult
from examples.mem0_grant.fake import FakeMem0

HERE = Path(__file__).resolve().parent
GRANTS = HERE / "grants.json"
RUNS = HERE / "runs"
PROFILE = "mem0-alice"
CALLER = "support-agent"
TOKEN_ENV = "MEM0_API_KEY"
#: The key the broker holds for the fake; the claims look for exactly this string.
TOKEN = "m0-fake-mem0-key-held-by-the-broker"

EXAMPLE = Example(fake=FakeMem0, runs=RUNS, profile=PROFILE, caller=CALLER, token_env=TOKEN_ENV)


def run_example(
    *, grants_path: Path = GRANTS, token: str = TOKEN, scan_memory: bool = False
) -> ExampleResult:
    """The runs against a fresh fake (see `Example.run`); another `grants_path` exists for
    the tests that show a claim failing when the grant is made wider."""
    return EXAMPLE.run(grants_path, token, scan_memory=scan_memory)
