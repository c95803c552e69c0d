"""`python -m examples.memory_grant`: regenerate, check, or re-extract the example.

python -m examples.memory_grant              rewrite the generated files and index.html
python -m examples.memory_grant --check      write nothing; exit 1 naming stale files
python -m examples.memory_grant --extract F  cut agent-memory.openapi.json from F,
                                             refusing any file but the pinned one
"""

from __future__ import annotations

from pathlib import Path

import click

from examples.kit.command import Generated
from examples.memory_grant.page import UPSTREAM_SHA256, render_page
from examples.memory_grant.runner import GRANTS, HERE, PROFILE, run_example
from specgen import build as pipeline
from specgen.files import write_atomic
from specgen.load import read_bytes

DOCUMENT = HERE / "agent-memory.openapi.json"
PAGE = HERE / "index.html"
OPTIONS = pipeline.Options(global_name="memory", compat="reference")
#: Every Agent Memory path starts here in Cloudflare's whole document.
EXTRACT_PREFIX = "/accounts/{account_id}/agent-memory/"


EXAMPLE = Generated(
    name="memory_grant",
    here=HERE,
    document=DOCUMENT,
    options=OPTIONS,
    grants=GRANTS,
    profile=PROFILE,
    render=lambda spec: render_page(run_example(), spec),
)


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--check",
    is_flag=True,
    help="Write nothing; fail unless the generated files and the page are current.",
)
@click.option(
    "--extract",
    "whole",
    metavar="FILE",
    help="Cut agent-memory.openapi.json from Cloudflare's whole document.",
)
def main(check: bool, whole: str | None) -> None:
    """Run the memory-grant example and write its page."""
    if check and whole is not None:
        # --check promises to write nothing, and --extract writes the document.
        raise click.UsageError("--check and --extract do not go together")
    if whole is not None:
        with EXAMPLE.refusals():
            _extract(whole)
        return
    EXAMPLE.regenerate(PAGE, check=check)


def _check(spec: pipeline.Result) -> None:
    EXAMPLE.check(spec, PAGE)


def _extract(whole: str, output: Path = DOCUMENT, pin: str = UPSTREAM_SHA256) -> None:
    """Cut the Agent Memory part from Cloudflare's whole document, pinned by SHA-256."""
    from specgen.extract import extract

    name, raw = read_bytes(whole)
    cut = extract(raw, sha256=pin, path_prefixes=[EXTRACT_PREFIX], tags=[], source_name=name)
    write_atomic(output, cut)
    click.echo(f"memory_grant: wrote {output}")


if __name__ == "__main__":
    main(prog_name="python -m examples.memory_grant")
