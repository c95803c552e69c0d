"""`python -m examples.mem0_grant`: regenerate or check the Mem0 example.

python -m examples.mem0_grant           rewrite the generated files and index.html
python -m examples.mem0_grant --check   write nothing; exit 1 naming stale files
"""

from __future__ import annotations

import click

from examples.kit.command import Generated
from examples.mem0_grant.page import render_page
from examples.mem0_grant.runner import GRANTS, HERE, PROFILE, run_example
from specgen import build as pipeline

DOCUMENT = HERE / "mem0.openapi.json"
PAGE = HERE / "index.html"
#: The default build: trailing slashes kept, every entry naming its query parameters.
OPTIONS = pipeline.Options(global_name="mem0")

EXAMPLE = Generated(
    name="mem0_grant",
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
def main(check: bool) -> None:
    """Run the Mem0 example and write its page."""
    EXAMPLE.regenerate(PAGE, check=check)


if __name__ == "__main__":
    main(prog_name="python -m examples.mem0_grant")
