"""`python -m examples.github_triage`: regenerate or check the GitHub triage example.

python -m examples.github_triage           rewrite the generated files and index.html
python -m examples.github_triage --check   write nothing; exit 1 naming stale files
"""

from __future__ import annotations

import click

from examples.github_triage.page import render_page
from examples.github_triage.runner import GRANTS, HERE, PROFILE, run_observed
from examples.kit.command import Generated
from specgen import build as pipeline

DOCUMENT = HERE / "github-issues.openapi.json"
PAGE = HERE / "index.html"
OPTIONS = pipeline.Options(global_name="gh")

EXAMPLE = Generated(
    name="github_triage",
    here=HERE,
    document=DOCUMENT,
    options=OPTIONS,
    grants=GRANTS,
    profile=PROFILE,
    render=lambda spec: render_page(run_observed(), spec),
)


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--check",
    is_flag=True,
    help="Write nothing; fail unless the generated files and the page are current.",
)
def main(check: bool) -> None:
    """Run the GitHub triage example and write its page."""
    EXAMPLE.regenerate(PAGE, check=check)


if __name__ == "__main__":
    main(prog_name="python -m examples.github_triage")
