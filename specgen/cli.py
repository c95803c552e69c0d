"""The `specgen` command line.

Exit codes are a contract for CI: 0 ok, 1 refused input or a failed check, 2 a usage
error. Refusals are one line on stderr, never a traceback. Commands that live in other
packages (the runtime's `run`) plug in through the `specgen.commands` entry-point group,
so the generator never imports the runtime.

The pipeline (YAML, `referencing`, Jinja2) is imported inside the commands that use it,
so `specgen --help`, `--version` and `specgen run` do not pay for it at start-up.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from importlib.metadata import entry_points
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from specgen.errors import SpecError

if TYPE_CHECKING:
    from specgen import build as pipeline

F = TypeVar("F", bound=Callable[..., Any])


def refusals(func: F) -> F:
    """Turn a SpecError into its one line on stderr and exit 1."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except SpecError as exc:
            for note in exc.notes:
                click.echo(note, err=True)
            click.echo(str(exc), err=True)
            sys.exit(1)

    return wrapper  # type: ignore[return-value]


def generator_options(func: F) -> F:
    """The options that change generated output; shared so build and check agree."""
    func = click.option(
        "--compat",
        type=click.Choice(["reference"]),
        default=None,
        expose_value=False,
        # kept in the context, not passed on, so each command's signature stays as it was
        callback=lambda ctx, _param, value: ctx.meta.__setitem__("specgen.compat", value or ""),
        help="Write exactly what the Go reference writes: path-only routes, its skips and warnings.",
    )(func)
    func = click.option(
        "--no-validate",
        is_flag=True,
        help="Skip the OpenAPI schema check (the generator's own rules still apply).",
    )(func)
    func = click.option(
        "--strict",
        is_flag=True,
        help="Refuse the document instead of skipping an operation that cannot be generated.",
    )(func)
    func = click.option(
        "--server",
        metavar="URL",
        help="Take the route prefix from this server URL instead of the document's servers.",
    )(func)
    func = click.option(
        "--global",
        "global_name",
        default="host",
        show_default=True,
        help="The JS global the client is installed under.",
    )(func)
    return func


def _options(
    global_name: str, server: str | None, strict: bool, no_validate: bool
) -> pipeline.Options:
    from specgen import build as pipeline

    ctx = click.get_current_context(silent=True)
    compat = ctx.meta.get("specgen.compat", "") if ctx is not None else ""
    return pipeline.Options(
        global_name=global_name,
        server=server,
        strict=strict,
        validate=not no_validate,
        compat=compat,
    )


def _print_notes(result: pipeline.Result) -> None:
    for line in result.notes():
        click.echo(line, err=True)


class SpecgenGroup(click.Group):
    """A group that also lists the commands other installed packages register."""

    def _plugins(self) -> dict[str, Any]:
        return {ep.name: ep for ep in entry_points(group="specgen.commands")}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self._plugins()})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = super().get_command(ctx, cmd_name)
        if command is None and cmd_name in self._plugins():
            command = self._plugins()[cmd_name].load()
        return command


@click.group(cls=SpecgenGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="plimsoll-specgen")
def cli() -> None:
    """Generate a brokered client, its allow list and a model description from OpenAPI."""


@cli.command()
@click.argument("spec")
@click.option(
    "-o",
    "--outdir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Write the files here (atomically) instead of printing them.",
)
@generator_options
@refusals
def build(
    spec: str,
    outdir: Path | None,
    global_name: str,
    server: str | None,
    strict: bool,
    no_validate: bool,
) -> None:
    """Write allow.json, preamble.js, description.txt (and health_check.txt) for SPEC.

    SPEC is a path or - for stdin, JSON or YAML.
    """
    from specgen import build as pipeline
    from specgen.render import all_sections

    result = pipeline.run(spec, _options(global_name, server, strict, no_validate))
    _print_notes(result)
    if outdir is None:
        click.echo(all_sections(result.gen, result.files), nl=False)
        return
    names = pipeline.write(result, outdir)
    click.echo(f"specgen: wrote {', '.join(names)} to {outdir}", err=True)


EMIT_KINDS = ("allow", "catalog", "preamble", "description", "health", "json")


@cli.command()
@click.argument("kind", type=click.Choice(EMIT_KINDS))
@click.argument("spec")
@generator_options
@refusals
def emit(
    kind: str, spec: str, global_name: str, server: str | None, strict: bool, no_validate: bool
) -> None:
    """Print one artifact of SPEC on stdout.

    allow and catalog are the same route list (catalog is for the profile's "catalog",
    allow the starting point an operator trims); json bundles everything.
    """
    from specgen import build as pipeline
    from specgen.render import bundle

    result = pipeline.run(spec, _options(global_name, server, strict, no_validate))
    _print_notes(result)
    files = result.files
    text = {
        "allow": files["allow.json"],
        "catalog": files["allow.json"],
        "preamble": files["preamble.js"],
        "description": files["description.txt"],
        "health": files.get("health_check.txt", ""),
    }.get(kind)
    click.echo(bundle(result.gen, files) if text is None else text, nl=False)


@cli.command()
@click.argument("spec")
@refusals
def validate(spec: str) -> None:
    """Full OpenAPI validation of SPEC: every problem, plus examples and defaults that
    contradict their schemas. Exit 1 when anything is wrong."""
    from specgen import build as pipeline
    from specgen.load import load
    from specgen.validate import full_report

    source = load(spec)
    pipeline.check_version(source)
    problems = full_report(source.doc, source.name)
    for line in problems:
        click.echo(line)
    if problems:
        click.echo(f"specgen: {source.name}: {len(problems)} problem(s)", err=True)
        sys.exit(1)
    click.echo(f"specgen: {source.name}: valid", err=True)


@cli.command()
@click.argument("spec")
@click.argument("outdir", required=False, type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--grants",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also check this grants file's profile against SPEC.",
)
@click.option("--profile", help="The profile of --grants to check.")
@generator_options
@refusals
def check(
    spec: str,
    outdir: Path | None,
    grants: Path | None,
    profile: str | None,
    global_name: str,
    server: str | None,
    strict: bool,
    no_validate: bool,
) -> None:
    """Exit 0 when OUTDIR holds exactly what build would write for SPEC (and, with
    --grants, when the profile's catalog is SPEC's route list and every allow entry is
    an instance of one of its routes); else print what differs and exit 1."""
    if outdir is None and grants is None:
        raise click.UsageError("give OUTDIR, --grants FILE --profile NAME, or both")
    if (grants is None) != (profile is None):
        raise click.UsageError("--grants and --profile go together")
    from specgen import build as pipeline
    from specgen.check import diff_dir, grant_drift, regenerate_command

    options = _options(global_name, server, strict, no_validate)
    result = pipeline.run(spec, options)
    failed = False
    if outdir is not None:
        diffs = diff_dir(result, outdir)
        for diff in diffs:
            click.echo(diff, nl=False)
        if diffs:
            failed = True
            click.echo(
                f"specgen: {outdir} is stale; regenerate it with: {regenerate_command(spec, str(outdir), options)}",
                err=True,
            )
    if grants is not None and profile is not None:
        for problem in grant_drift(result, grants, profile):
            failed = True
            click.echo(f"specgen: {grants}: {problem}", err=True)
    if failed:
        sys.exit(1)
    click.echo("specgen: up to date", err=True)


@cli.command()
@click.argument("whole")
@click.option(
    "--sha256",
    "pin",
    required=True,
    metavar="HEX",
    help="The SHA-256 the whole document must have.",
)
@click.option(
    "--path-prefix",
    "prefixes",
    multiple=True,
    metavar="P",
    help="Keep path items whose path starts with P (repeatable).",
)
@click.option(
    "--tag",
    "tags",
    multiple=True,
    metavar="T",
    help="Keep path items with an operation tagged T (repeatable).",
)
@click.option(
    "-o",
    "--output",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="Where to write the cut document.",
)
@refusals
def extract(
    whole: str, pin: str, prefixes: tuple[str, ...], tags: tuple[str, ...], output: Path
) -> None:
    """Cut one API's part out of a provider's whole document, refusing any file but the
    pinned one."""
    from specgen.extract import extract as cut
    from specgen.files import write_atomic
    from specgen.load import read_bytes

    if not prefixes and not tags:
        raise click.UsageError("give at least one --path-prefix or --tag")
    name, raw = read_bytes(whole)
    data = cut(raw, sha256=pin, path_prefixes=list(prefixes), tags=list(tags), source_name=name)
    try:
        write_atomic(output, data)
    except OSError as exc:
        raise SpecError(f"specgen: write {output}: {exc.strerror or exc}") from None
    click.echo(f"specgen: wrote {output}", err=True)


def main() -> None:
    """Console entry point: a last guard so even a bug prints one line, not a traceback.

    Set SPECGEN_DEBUG=1 to see the traceback instead.
    """
    try:
        cli.main(prog_name="specgen")
    except SystemExit:
        raise
    except Exception as exc:
        if os.environ.get("SPECGEN_DEBUG"):
            raise
        click.echo(f"specgen: internal error: {type(exc).__name__}: {exc}", err=True)
        sys.exit(1)


__all__ = ["cli", "main"]
