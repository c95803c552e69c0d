"""The `specgen` command line.

Exit codes are a contract for CI: 0 ok, 1 refused input or a failed check, 2 a usage
error. Refusals are one line on stderr, never a traceback. Commands that live in other
packages (the runtime's `run`) plug in through the `specgen.commands` entry-point group,
so the generator never imports the runtime.

The pipeline (YAML, `referencing`, Jinja2) is imported inside the commands that use it,
so `specgen --help`, `--version` and `specgen run` do not pay for it at start-up.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click

from specgen import streams
from specgen.errors import SpecError
from specgen.oneshot import keep_until_exit, one_shot_without_gc, record_exit

if TYPE_CHECKING:
    from specgen import build as pipeline
    from specgen import report

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


def _check_global(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """The client is installed as `globalThis[NAME]` and agent code calls `NAME.x()`, so
    NAME must be a plain JS identifier that is not a reserved word."""
    from specgen.naming import global_name_error
    from specgen.quoting import go_quote

    why = global_name_error(value)
    if why is not None:
        raise click.BadParameter(f"{go_quote(value)} {why}")
    return value


def _check_server(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A server URL the routes take their path from: http or https with a host, or a
    path starting with `/` (OpenAPI allows relative server URLs)."""
    from urllib.parse import urlsplit

    from specgen.quoting import go_quote

    if value is None or value.startswith("/"):
        return value
    try:
        parts = urlsplit(value)
        _ = parts.port
    except ValueError:
        parts = None
    if parts is None or parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise click.BadParameter(
            f"{go_quote(value)} is not an http or https URL with a host (or a /path)"
        )
    return value


_FOLDER = "name the folder (. for the current one)"
_FILE = "name the file to write"


def _given_path(value: str | None, name: str, hint: str) -> Path | None:
    """`value` as a Path, None when not given; an empty one is refused in one line.

    Path("") is the current folder, so an empty -o (a shell variable that is unset,
    `-o "$OUT"`) would quietly write, or check, the files there; `.` says so on purpose.
    Options that take a path keep it a string until here, because click's Path type
    already turned "" into "." and the two could no longer be told apart.
    """
    if value is None:
        return None
    if not value:
        raise SpecError(f"specgen: {name} is empty; {hint}")
    return Path(value)


def output_options(func: F) -> F:
    """--quiet and --verbose: how much a build says on stderr besides errors."""
    func = click.option(
        "-v", "--verbose", is_flag=True, help="List every skipped operation and warning."
    )(func)
    func = click.option(
        "-q", "--quiet", is_flag=True, help="Print errors only (no summary, no warnings)."
    )(func)
    return func


def _verbosity(quiet: bool, verbose: bool) -> report.Verbosity:
    from specgen import report

    if quiet and verbose:
        raise click.UsageError("--quiet and --verbose go separately")
    if quiet:
        return report.Verbosity.QUIET
    return report.Verbosity.VERBOSE if verbose else report.Verbosity.NORMAL


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
        callback=_check_server,
        help="Take the route prefix from this server URL instead of the document's servers.",
    )(func)
    func = click.option(
        "--global",
        "global_name",
        default="host",
        show_default=True,
        callback=_check_global,
        help="The JS global the client is installed under (a JS identifier).",
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


def _print_notes(
    result: pipeline.Result, verbosity: report.Verbosity, *, details: bool = True
) -> None:
    from specgen.report import note_lines

    for line in note_lines(result, verbosity, details=details):
        click.echo(line, err=True)


#: The first sentence of each command this project's runtime plugs in (its `--help`
#: text starts with it): what `specgen --help` lists for them without importing the
#: runtime, which costs several times everything else `--help` does. A test holds each
#: to the loaded command's own help; a plugin of another package is loaded to be listed.
PLUGIN_SUMMARIES = {
    "mcp": "Serve agent code execution through grants as an MCP server (stdio by default).",
    "run": "Run CODE.js in a fresh sandbox with the profile's client and preamble.",
}


class CommandGroup(click.Group):
    """A group that names the subcommand in a usage error click raises without one."""

    #: Its subgroups (`grant`) are one too.
    group_class = type

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.UsageError as exc:
            # click's parser raises an option's missing value with no context, so the
            # line would name `specgen` and its help; the subcommand being parsed is known
            name = ctx.invoked_subcommand
            command = self.get_command(ctx, name) if exc.ctx is None and name else None
            if command is not None:
                exc.ctx = click.Context(command, info_name=name, parent=ctx)
            raise


class SpecgenGroup(CommandGroup):
    """The top group, which also lists the commands other installed packages register."""

    group_class = CommandGroup
    _listing = False

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        self._listing = True
        try:
            super().format_commands(ctx, formatter)
        finally:
            self._listing = False

    def _plugins(self) -> dict[str, Any]:
        # imported here: importlib.metadata scans every installed distribution, a third
        # of a small build's start-up, and built-in commands never need it; scanned once
        # per process (a listing asks for every plugin by name)
        plugins = self.__dict__.get("_found_plugins")
        if plugins is None:
            from importlib.metadata import entry_points

            plugins = {ep.name: ep for ep in entry_points(group="specgen.commands")}
            self.__dict__["_found_plugins"] = plugins
        return plugins

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self._plugins()})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = super().get_command(ctx, cmd_name)
        if command is None and cmd_name in self._plugins():
            if self._listing and cmd_name in PLUGIN_SUMMARIES:
                # the listing reads only the short help, which this stand-in gives
                return click.Command(cmd_name, help=PLUGIN_SUMMARIES[cmd_name])
            command = self._plugins()[cmd_name].load()
        return command


@click.group(cls=SpecgenGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="plimsoll-specgen")
def cli() -> None:
    """Generate a brokered client, its allow list and a model description from OpenAPI.

    The grants file `specgen run` reads is described in docs/grants.md; `specgen grant
    init` drafts one and `specgen grant schema` prints its JSON Schema.
    """


@cli.command()
@click.argument("spec")
@click.option(
    "-o",
    "--outdir",
    type=click.Path(file_okay=False),
    help="Write the files here (atomically, as one set) instead of printing them.",
)
@generator_options
@output_options
@refusals
def build(
    spec: str,
    outdir: str | None,
    global_name: str,
    server: str | None,
    strict: bool,
    no_validate: bool,
    quiet: bool,
    verbose: bool,
) -> None:
    """Write allow.json, preamble.js, description.txt, types.d.ts (and health_check.txt) for SPEC.

    SPEC is a path or - for stdin, JSON or YAML.
    """
    from specgen import build as pipeline
    from specgen.render import all_sections

    verbosity = _verbosity(quiet, verbose)
    folder = _given_path(outdir, "-o/--outdir", _FOLDER)
    result = pipeline.run(spec, _options(global_name, server, strict, no_validate))
    keep_until_exit(result)
    _print_notes(result, verbosity)
    if folder is None:
        click.echo(all_sections(result.gen, result.files), nl=False)
        return
    names = pipeline.write(result, folder)
    if verbosity:
        click.echo(f"specgen: wrote {', '.join(names)} to {folder}", err=True)


EMIT_KINDS = ("allow", "catalog", "preamble", "description", "health", "types", "json")


@cli.command()
@click.argument("kind", type=click.Choice(EMIT_KINDS))
@click.argument("spec")
@click.option(
    "--grants",
    type=click.Path(dir_okay=False, path_type=Path),
    help="description only: describe what this grants file's --profile permits.",
)
@click.option("--profile", help="The profile of --grants to describe.")
@generator_options
@output_options
@refusals
def emit(
    kind: str,
    spec: str,
    grants: Path | None,
    profile: str | None,
    global_name: str,
    server: str | None,
    strict: bool,
    no_validate: bool,
    quiet: bool,
    verbose: bool,
) -> None:
    """Print one artifact of SPEC on stdout.

    allow and catalog are the same route list (catalog is for the profile's "catalog",
    allow the starting point an operator trims); types is types.d.ts; json bundles
    everything. description with --grants/--profile lists only what that profile permits.
    """
    if (grants is None) != (profile is None):
        raise click.UsageError("--grants and --profile go together")
    if grants is not None and kind != "description":
        raise click.UsageError("--grants and --profile go with emit description only")
    from specgen import build as pipeline
    from specgen.grant_view import grant_description, read_grant
    from specgen.render import bundle

    verbosity = _verbosity(quiet, verbose)
    view = read_grant(grants, profile) if grants is not None and profile is not None else None
    result = pipeline.run(spec, _options(global_name, server, strict, no_validate))
    # json carries every skip and warning itself; stderr then only sums them up.
    _print_notes(result, verbosity, details=kind != "json")
    files = result.files
    if view is not None:
        click.echo(grant_description(result, view), nl=False)
        return
    text = {
        "allow": files["allow.json"],
        "catalog": files["allow.json"],
        "preamble": files["preamble.js"],
        "description": files["description.txt"],
        "health": files.get("health_check.txt", ""),
        "types": files["types.d.ts"],
    }.get(kind)
    click.echo(bundle(result.gen, files) if text is None else text, nl=False)


def _verdict(errors: list[str], warnings: list[str], strict: bool) -> str:
    if not errors and not warnings:
        return "valid"
    if errors or strict:
        return f"{len(errors) + strict * len(warnings):,} problem(s)" + (
            f", {len(warnings):,} of them examples or defaults (--strict)"
            if strict and warnings
            else ""
        )
    return (
        f"valid; {len(warnings):,} warning(s): examples or defaults that contradict their "
        "schemas (--strict counts them as errors)"
    )


@cli.command()
@click.argument("spec")
@click.option(
    "--strict",
    is_flag=True,
    help="Count examples and defaults that contradict their schemas as errors too.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of lines.")
@refusals
def validate(spec: str, strict: bool, as_json: bool) -> None:
    """Full OpenAPI validation of SPEC: every error, plus examples and defaults that
    contradict their schemas (warnings, unless --strict). Exit 1 on any error."""
    import orjson

    from specgen import build as pipeline
    from specgen.load import load
    from specgen.report import Progress, split_severities
    from specgen.validate import full_report

    source = load(spec)
    pipeline.check_version(source)
    with Progress(f"validating {source.name}"):
        errors, warnings = split_severities(full_report(source.doc, source.name))
    failed = bool(errors or (strict and warnings))
    if as_json:
        record = {
            "file": source.name,
            "valid": not failed,
            "strict": strict,
            "errors": errors,
            "warnings": warnings,
        }
        click.echo(orjson.dumps(record, option=orjson.OPT_INDENT_2).decode())
    else:
        for line in errors:
            click.echo(line)
        for line in warnings:
            click.echo(line if strict else line.replace(": nit: ", ": warning: ", 1))
        click.echo(f"specgen: {source.name}: {_verdict(errors, warnings, strict)}", err=True)
    if failed:
        sys.exit(1)


@cli.command()
@click.argument("spec")
@click.argument("outdir", required=False, type=click.Path(file_okay=False))
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
    outdir: str | None,
    grants: Path | None,
    profile: str | None,
    global_name: str,
    server: str | None,
    strict: bool,
    no_validate: bool,
) -> None:
    """Exit 0 when OUTDIR holds exactly what build would write for SPEC (and, with
    --grants, when every allow entry of the profile is an instance of one of SPEC's
    routes and its catalog, if it has one, is SPEC's route list); else print what
    differs (a unified diff per file, one line per allow entry or route) and exit 1."""
    if outdir is None and grants is None:
        raise click.UsageError("give OUTDIR, --grants FILE --profile NAME, or both")
    if (grants is None) != (profile is None):
        raise click.UsageError("--grants and --profile go together")
    from specgen import build as pipeline
    from specgen.check import diff_dir, grant_drift, regenerate_command
    from specgen.quoting import visible

    options = _options(global_name, server, strict, no_validate)
    folder = _given_path(outdir, "OUTDIR", _FOLDER)
    if folder is not None and not _is_dir(folder):
        what = "is not a directory" if folder.exists() else "does not exist"
        raise SpecError(
            f"specgen: {folder} {what}; write it with: {regenerate_command(spec, str(folder), options)}"
        )
    result = pipeline.run(spec, options)
    failed = False
    if folder is not None:
        diffs = diff_dir(result, folder)
        for diff in diffs:
            click.echo(diff, nl=False)
        if diffs:
            failed = True
            other = _global_built(folder)
            if other is not None and other != options.global_name:
                built = visible(other)
                click.echo(
                    f"specgen: {folder}/preamble.js was built with --global {built}, and this "
                    f"check builds with --global {options.global_name}: if {built} is meant, "
                    f"check with --global {built}",
                    err=True,
                )
            click.echo(
                f"specgen: {folder} is stale; regenerate it with: {regenerate_command(spec, str(folder), options)}",
                err=True,
            )
    if grants is not None and profile is not None:
        problems = grant_drift(result, grants, profile)
        if problems:
            failed = True
            click.echo(
                f'specgen: {grants}: profile "{profile}" disagrees with {spec} '
                f"({len(problems)} line(s)):",
                err=True,
            )
            for problem in problems:  # they quote the grants file and the document
                click.echo(f"  {visible(problem)}", err=True)
    if failed:
        sys.exit(1)
    click.echo("specgen: up to date", err=True)


def _global_built(folder: Path) -> str | None:
    """The global OUTDIR's preamble.js was generated for, if it is one specgen wrote: a
    check without that --global finds every file stale and its suggested build would
    put the client on another global than the grant's."""
    from specgen.files import read_regular
    from specgen.preamble import built_for

    try:
        return built_for(read_regular(folder / "preamble.js").decode("utf-8", "replace"))
    except OSError:
        return None


def _is_dir(folder: Path) -> bool:
    """Whether `folder` is a directory; a path the system cannot even look up (a name
    too long, a loop of links) is refused in one line, like any unreadable input."""
    try:
        return folder.is_dir()
    except OSError as exc:
        raise SpecError(f"specgen: {folder}: cannot read: {exc.strerror or exc}") from None


@cli.group()
def grant() -> None:
    """Draft and describe grants files (the operator's file `specgen run --grants` reads)."""


@grant.command("init")
@click.argument("spec")
@click.option("--profile", "profile_name", required=True, help="The new profile's name.")
@click.option(
    "--caller",
    "callers",
    multiple=True,
    metavar="ID",
    help="Who may run with the profile (repeatable); without one the loader refuses it.",
)
@click.option(
    "--allow",
    "allow",
    multiple=True,
    metavar="ENTRY",
    help="An allow entry, an instance of one of SPEC's routes (repeatable): "
    "'METHOD /path?query&name=pin', a JSON object or array of entries "
    '(\'{"route": ..., "headers": [...]}\'), or @FILE holding that JSON. '
    "Without any, allow is empty and the loader refuses the profile until you add one.",
)
@click.option(
    "--base-url",
    metavar="URL",
    help="The profile's base_url (the API's origin, https unless loopback) instead of the "
    "document's first server.",
)
@click.option(
    "--base-url-override",
    "overrides",
    multiple=True,
    metavar="ORIGIN",
    help="An origin `specgen run --base-url` may send to instead (repeatable), e.g. "
    "http://127.0.0.1:* for a local fake on any port.",
)
@click.option(
    "--preamble-file",
    metavar="PATH",
    help="The profile's preamble_file (specgen build's preamble.js), relative to the grants file.",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False),
    help="Write the grants file here (refused if it exists) instead of stdout.",
)
@generator_options
@output_options
@refusals
def grant_init(
    spec: str,
    profile_name: str,
    callers: tuple[str, ...],
    allow: tuple[str, ...],
    base_url: str | None,
    overrides: tuple[str, ...],
    preamble_file: str | None,
    output: str | None,
    global_name: str,
    server: str | None,
    strict: bool,
    no_validate: bool,
    quiet: bool,
    verbose: bool,
) -> None:
    """Draft a grants file for SPEC that `check --grants` accepts: its routes as the
    catalog (as `emit catalog` prints them), the allow entries you name, base_url, a token
    block and the header values the document fixes. Notes on what is left to decide go to
    stderr."""
    from specgen import build as pipeline
    from specgen.files import write_atomic
    from specgen.grant_init import PROFILE_NAME, check_preamble_file, draft
    from specgen.preamble import preamble_problems
    from specgen.quoting import go_quote

    if not PROFILE_NAME.match(profile_name):
        raise click.BadParameter(
            f"{go_quote(profile_name)}: 1 to 128 letters, digits, '.', '_' or '-'",
            param_hint="--profile",
        )
    verbosity = _verbosity(quiet, verbose)
    target = _given_path(output, "-o/--output", _FILE)
    if preamble_file is not None:
        check_preamble_file(preamble_file, target)
    result = pipeline.run(spec, _options(global_name, server, strict, no_validate))
    drafted = draft(
        result,
        profile=profile_name,
        callers=[c.strip() for c in callers],
        allow=list(allow),
        global_name=global_name,
        server=server,
        preamble_file=preamble_file,
        base_url=base_url,
        base_url_overrides=list(overrides),
    )
    _print_notes(result, verbosity)  # only now: a refused --allow stays one line
    notes = list(drafted.notes)
    if target is not None and preamble_file is not None:
        # the folder the loader reads it from is known: say now what check --grants would
        notes += preamble_problems(drafted.doc["profiles"][profile_name], target)
    for note in notes if verbosity else ():
        click.echo(f"specgen: note: {note}", err=True)
    if target is None:
        click.echo(drafted.text(), nl=False)
        return
    if target.exists():
        raise SpecError(
            f"specgen: {target} exists; refusing to overwrite a grants file (merge the profile by hand)"
        )
    if not target.parent.is_dir():
        raise SpecError(f"specgen: {target.parent} does not exist")
    try:
        write_atomic(target, drafted.text().encode())
    except OSError as exc:
        raise SpecError(f"specgen: write {target}: {exc.strerror or exc}") from None
    if verbosity:
        click.echo(f"specgen: wrote {target}", err=True)


@grant.command("schema")
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False),
    help="Write the schema here instead of stdout.",
)
@refusals
def grant_schema(output: str | None) -> None:
    """Print the grants file's JSON Schema (for an editor; the loader checks more)."""
    from specgen.files import write_atomic
    from specgen.grant_init import schema_text

    target = _given_path(output, "-o/--output", _FILE)
    text = schema_text()
    if target is None:
        click.echo(text, nl=False)
        return
    if not target.parent.is_dir():
        raise SpecError(f"specgen: {target.parent} does not exist")
    try:
        write_atomic(target, text.encode())
    except OSError as exc:
        raise SpecError(f"specgen: write {target}: {exc.strerror or exc}") from None
    click.echo(f"specgen: wrote {target}", err=True)


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
    type=click.Path(dir_okay=False),
    help="Where to write the cut document (a file; replaced if it exists, unless it is WHOLE).",
)
@refusals
def extract(
    whole: str, pin: str, prefixes: tuple[str, ...], tags: tuple[str, ...], output: str
) -> None:
    """Cut one API's part out of a provider's whole document, refusing any file but the
    pinned one."""
    from specgen.extract import extract as cut
    from specgen.files import write_atomic
    from specgen.load import read_bytes

    if not prefixes and not tags:
        raise click.UsageError("give at least one --path-prefix or --tag")
    target = _cut_target(whole, output)
    name, raw = read_bytes(whole)
    data = cut(raw, sha256=pin, path_prefixes=list(prefixes), tags=list(tags), source_name=name)
    try:
        write_atomic(target, data)
    except OSError as exc:
        raise SpecError(f"specgen: write {target}: {exc.strerror or exc}") from None
    click.echo(f"specgen: wrote {target}", err=True)


def _cut_target(whole: str, output: str) -> Path:
    """Where extract may write its cut, refused in one line when it may not.

    An existing file is replaced: the cut is derived data, remade from the pinned whole
    document at any time, and refreshing it after the pin moves is the usual run (a
    grants file, which holds an operator's decisions, is never overwritten by `grant
    init`). The one file that cannot be remade is the whole document itself, whose
    pinned bytes would be gone, so -o naming it (by any path, a link included) is
    refused. `-` is refused rather than taken for stdout: the cut is a file to pin and
    review, and a file named `-` is what nobody meant.
    """
    if output == "-":
        raise SpecError(
            "specgen: -o -: extract writes a file, not stdout; name the file (./- for one named -)"
        )
    target = _given_path(output, "-o/--output", _FILE)
    assert target is not None  # a required option
    if not target.parent.is_dir():
        raise SpecError(f"specgen: {target.parent} does not exist (extract creates no folders)")
    if _same_file(whole, target):
        raise SpecError(
            f"specgen: -o {target} is WHOLE itself; writing the cut there would replace the "
            "pinned document (write it to another file)"
        )
    return target


def _same_file(whole: str, target: Path) -> bool:
    """Whether `target` is the file `whole` names (stdin's file for `-`)."""
    try:
        if whole == "-":
            return os.path.samestat(os.fstat(sys.stdin.fileno()), os.stat(target))
        return os.path.samefile(whole, target)
    except (OSError, ValueError):  # no such file, or a stdin that is no file
        return False


def _interrupted(signum: int, frame: object) -> None:
    """Ctrl-C: one line and the shell's status for it (130), not click's "Aborted!" and 1.
    A command with runs to end and record (`specgen run`, `specgen mcp`) puts its own
    handler in place while they go on."""
    with contextlib.suppress(OSError):
        sys.stderr.write("specgen: interrupted\n")
    raise SystemExit(130)


#: What click (8.2 on) raises for a group given no command: a "usage error" whose text is
#: the group's help, which is shown as help, not folded into an error line.
_NO_ARGS_IS_HELP: Any = getattr(click.exceptions, "NoArgsIsHelpError", ())


def _usage_error(exc: click.UsageError) -> NoReturn:
    """A usage error in one line, naming the command and where its help is; exit 2.
    What the user typed is shown with its control characters escaped."""
    from specgen.quoting import capped, visible

    path = exc.ctx.command_path if exc.ctx is not None else "specgen"
    message = exc.format_message().rstrip(".")
    click.echo(capped(visible(f"{path}: {message} (see {path} -h)")), err=True)
    sys.exit(exc.exit_code)


def main() -> None:
    """Console entry point: a last guard so even a bug prints one line, not a traceback.

    Set SPECGEN_DEBUG=1 to see the traceback instead.
    """
    streams.guard()
    signal.signal(signal.SIGINT, _interrupted)
    one_shot = one_shot_without_gc(sys.argv[1:], cli.commands)
    try:
        # Not standalone: click's own report of a usage error is four lines.
        status = cli.main(prog_name="specgen", standalone_mode=False)
        sys.exit(status if isinstance(status, int) else 0)
    except _NO_ARGS_IS_HELP as exc:  # `specgen` or `specgen grant` alone: its help, whole
        exc.show()
        sys.exit(exc.exit_code)
    except click.UsageError as exc:
        _usage_error(exc)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.Abort:
        click.echo("specgen: aborted", err=True)
        sys.exit(1)
    except SystemExit as exc:
        if one_shot:
            record_exit(exc.code)
        raise
    except Exception as exc:
        if isinstance(exc, OSError) and exc.errno == errno.EBADF:  # started without a stream
            click.echo(f"specgen: {exc.strerror or exc}", err=True)
            sys.exit(1)
        if os.environ.get("SPECGEN_DEBUG"):
            raise
        from specgen.quoting import capped, visible

        line = visible(f"specgen: internal error: {type(exc).__name__}: {exc}".splitlines()[0])
        click.echo(capped(line), err=True)
        sys.exit(1)


__all__ = ["cli", "main"]
