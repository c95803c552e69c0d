"""The golden cases: which document and options produce each committed golden/ folder.

`python -m tests.golden` rewrites every folder with `specgen build` (review the diff);
the tests run `specgen check` on each, so a change in output is always a visible diff.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from click.testing import CliRunner

from specgen.cli import cli

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "golden"


def cases() -> dict[str, dict[str, object]]:
    return json.loads((GOLDEN / "cases.json").read_text())


def argv(command: str, name: str, case: dict[str, object]) -> list[str]:
    spec = str(ROOT / str(case["spec"]))
    out = str(GOLDEN / name)
    extra = [str(a) for a in case.get("args", [])]  # type: ignore[union-attr]
    if command == "build":
        return ["build", spec, "-o", out, *extra]
    return ["check", spec, out, *extra]


#: Per-grant descriptions (`specgen emit description --grants F --profile P`), one file each.
GRANT_GOLDEN = GOLDEN / "grant-descriptions"
GRANT_CASES: dict[str, list[str]] = {
    "agent-memory.txt": [
        "examples/memory_grant/agent-memory.openapi.json",
        "--global",
        "memory",
        "--grants",
        "examples/memory_grant/grants.json",
        "--profile",
        "agent-memory",
    ],
}


def grant_argv(args: list[str]) -> list[str]:
    spec, *rest = args
    return ["emit", "description", str(ROOT / spec)] + [
        str(ROOT / a) if a.endswith(".json") else a for a in rest
    ]


def main() -> int:
    runner = CliRunner()
    for name, case in cases().items():
        result = runner.invoke(cli, argv("build", name, case))
        sys.stderr.write(result.output)
        if result.exit_code != 0:
            return result.exit_code
    GRANT_GOLDEN.mkdir(exist_ok=True)
    for name, args in GRANT_CASES.items():
        result = runner.invoke(cli, grant_argv(args))
        if result.exit_code != 0:
            sys.stderr.write(result.output)
            return result.exit_code
        (GRANT_GOLDEN / name).write_text(result.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
