"""`python -m examples.memory_grant`: regenerate, check, or re-extract the example.

python -m examples.memory_grant              rewrite the generated files and index.html
python -m examples.memory_grant --check      write nothing; exit 1 naming stale files
python -m examples.memory_grant --extract F  cut agent-memory.openapi.json from F,
                                             refusing any file but the pinned one
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import NoReturn

import click

from examples.memory_grant.page import UPSTREAM_SHA256, render_page
from examples.memory_grant.runner import GRANTS, HERE, PROFILE, run_example
from runtime import GrantsError
from specgen import build as pipeline
from specgen.check import compare, grant_drift
from specgen.errors import SpecError
from specgen.files import write_atomic
from specgen.load import read_bytes

DOCUMENT = HERE / "agent-memory.openapi.json"
PAGE = HERE / "index.html"
OPTIONS = pipeline.Options(global_name="memory", compat="reference")
#: Every Agent Memory path starts here in Cloudflare's whole document.
EXTRACT_PREFIX = "/accounts/{account_id}/agent-memory/"


def _fail(message: str) -> NoReturn:
    click.echo(message, err=True)
    sys.exit(1)


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
    try:
        if whole is not None:
            _extract(whole)
            return
        spec = pipeline.run(str(DOCUMENT), OPTIONS)
        drift = grant_drift(spec, GRANTS, PROFILE)
        if drift:
            _fail("memory_grant: " + "; ".join(drift))
        if check:
            _check(spec)
        else:
            _write(spec)
    except (SpecError, GrantsError) as exc:
        _fail(str(exc))
    except OSError as exc:  # writing the files or the page: say which, not a traceback
        _fail(f"memory_grant: write {exc.filename or ''}: {exc.strerror or exc}")


def _write(spec: pipeline.Result) -> None:
    pipeline.write(spec, HERE)  # the grant's preamble_file is read after this, fresh
    page = render_page(run_example(), spec)
    write_atomic(PAGE, page.encode())
    click.echo(f"memory_grant: wrote {', '.join(spec.files)} and the page: {PAGE}")


def _check(spec: pipeline.Result) -> None:
    stale = list(compare(spec, HERE))
    page = render_page(run_example(), spec)
    if not PAGE.exists() or PAGE.read_text(encoding="utf-8") != page:
        stale.append(PAGE.name)
    if stale:
        _fail(
            f"memory_grant: stale: {', '.join(stale)}; regenerate with: python -m examples.memory_grant"
        )
    click.echo("memory_grant: the generated files and the page are current")


def _extract(whole: str, output: Path = DOCUMENT, pin: str = UPSTREAM_SHA256) -> None:
    """Cut the Agent Memory part from Cloudflare's whole document, pinned by SHA-256."""
    from specgen.extract import extract

    name, raw = read_bytes(whole)
    cut = extract(raw, sha256=pin, path_prefixes=[EXTRACT_PREFIX], tags=[], source_name=name)
    write_atomic(output, cut)
    click.echo(f"memory_grant: wrote {output}")


if __name__ == "__main__":
    main(prog_name="python -m examples.memory_grant")
