"""What every example's page computes the same way: its Jinja2 environment, its headline
figures and the view of one run.

Every figure is counted from what the fake API, the broker and the guest reported, so a
regression in any layer changes the page, and `--check` turns that into a failing build
instead of a page that quietly keeps making an old claim.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jinja2
from markupsafe import Markup, escape

from examples.kit.claims import printed_lines
from examples.kit.runs import ExampleResult, RunRecord
from specgen.build import Result as SpecResult
from specgen.render import environment


@dataclass(frozen=True)
class Figures:
    routes_granted: int
    routes_total: int
    runs: int
    api_requests: int
    key_requests: int
    refused: int
    refused_reached: int
    key_found: int


def figures(result: ExampleResult, spec: SpecResult, key_found: int) -> Figures:
    """The headline numbers, each counted from an observation (`key_found`: the places
    the key showed up on the guest's side, as the example counts them)."""
    refused_runs = [run for run in result.runs if run.denied]
    return Figures(
        routes_granted=len(result.profile_allow),
        routes_total=len(spec.gen.allow),
        runs=len(result.runs),
        api_requests=len(result.api_log),
        key_requests=sum(1 for req in result.api_log if req.carried_token),
        refused=sum(run.denied for run in result.runs),
        refused_reached=sum(len(run.requests) for run in refused_runs),
        key_found=key_found,
    )


def run_view(run: RunRecord, text: dict[int, tuple[str, list[str]]]) -> dict[str, Any]:
    """One run as a page shows it: our title and introduction, its code, what it printed
    (stdout, then stderr, no blank lines), its trace rows and the requests it caused."""
    title, intro = text[run.number]
    return {
        "number": run.number,
        "title": title,
        "intro": intro,
        "code": run.code.rstrip("\n"),
        "printed": "\n".join(printed_lines(run.stdout + run.stderr)),
        "rows": run.rows,
        "denied": run.denied,
        "requests": run.requests,
    }


def breakable(text: str) -> Markup:
    """Escape `text` and let it wrap after every "/": a route on a phone then breaks
    between its segments, never inside an ID or a word."""
    return Markup(str(escape(text)).replace("/", "/<wbr>"))


def page_environment() -> jinja2.Environment:
    """specgen's HTML environment plus the pages' own filter, without adding that
    filter to the environment specgen shares with its generated files."""
    env = environment(html=True).overlay()
    env.filters = {**env.filters, "breakable": breakable}
    return env
