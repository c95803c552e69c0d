"""`python -m examples.mem0_grant`: regenerate or check the Mem0 example.

python -m examples.mem0_grant           rewrite the generated files and index.html
python -m examples.mem0_grant --check   write nothing; exit 1 naming stale files
"""

from __future__ import annotations

import sys
from typing import NoReturn

import click

from examples.mem0_grant.page import render_page
from examples.mem0_grant.runner import GRANTS, HERE, PROFILE, run_example
from runtime import GrantsError
from specgen import build as pipeline
from specgen.check import compare, grant_drift
from specgen.errors import SpecError
from specgen.files import write_atomic

DOCUMENT = HERE / "mem0.openapi.json"
PAGE = HERE / "index.html"
#: The default build: trailing slashes kept, every entry naming its query parameters.
OPTIONS = pipeline.Options(global_name="mem0")


def _fail(message: str) -> NoReturn:
    click.echo(message, err=True)
    sys.exit(1)


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--check",
    is_flag=True,
    help="Write nothing; fail unless the generated files and the page are current.",
)
def main(check: bool) -> None:
    """Run the Mem0 example and write its page."""
    try:
        spec = pipeline.run(str(DOCUMENT), OPTIONS)
        drift = grant_drift(spec, GRANTS, PROFILE)
        if drift:
            _fail("mem0_grant: " + "; ".join(drift))
        if check:
            _check(spec)
        else:
            _write(spec)
    except (SpecError, GrantsError) as exc:
        _fail(str(exc))
    except ValueError as exc:  # the document is not the pinned upstream blob
        _fail(f"mem0_grant: {exc}")
    except OSError as exc:
        _fail(f"mem0_grant: write {exc.filename or ''}: {exc.strerror or exc}")


def _write(spec: pipeline.Result) -> None:
    pipeline.write(spec, HERE)  # the grant's preamble_file is read after this, fresh
    page = render_page(run_example(), spec)
    write_atomic(PAGE, page.encode())
    click.echo(f"mem0_grant: wrote {', '.join(spec.files)} and the page: {PAGE}")


def _check(spec: pipeline.Result) -> None:
    stale = list(compare(spec, HERE))
    page = render_page(run_example(), spec)
    if not PAGE.exists() or PAGE.read_text(encoding="utf-8") != page:
        stale.append(PAGE.name)
    if stale:
        _fail(
            f"mem0_grant: stale: {', '.join(stale)}; regenerate with: python -m examples.mem0_grant"
        )
    click.echo("mem0_grant: the generated files and the page are current")


if __name__ == "__main__":
    main(prog_name="python -m examples.mem0_grant")
