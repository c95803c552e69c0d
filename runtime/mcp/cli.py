"""`specgen mcp`: the click command, plugged into specgen through `specgen.commands`.

Everything that can be refused (the grants file, the profile, the caller, the token
variable, the document, the address, the auth file) is refused before the server starts, as one
`specgen: ...` line and exit 1, so an MCP client's log shows why it could not connect.
"""

from __future__ import annotations

import contextlib
import functools
import ipaddress
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import click

from runtime import RunPool
from runtime.cli import isolation_option, limits_error, quota_store_option, workers_option
from specgen import streams
from specgen.errors import SpecError
from specgen.quoting import capped

#: How long leaving after Ctrl-C waits for parked runs' records, and for the exporters.
_LEAVE_WAIT_S = 5.0
#: The standard descriptors an MCP server on stdio needs, by name.
_STD_NAMES = {0: "stdin", 1: "stdout"}

if TYPE_CHECKING:
    from runtime.mcp.audit import AuditLog
    from runtime.mcp.auth import AuthConfig
    from runtime.mcp.config import ServerConfig


def _leave(status: int, line: str, audit: AuditLog) -> NoReturn:
    """Exit now, after the parked runs' audit lines and the exporters are out (each wait
    bounded): the thread the SDK reads stdin on cannot be stopped, and would keep the
    process until the client closed stdin. Another Ctrl-C meanwhile leaves at once."""
    import signal
    import threading

    from runtime import telemetry
    from runtime.mcp.round_trips import end_parked

    signal.signal(signal.SIGINT, lambda *_: os._exit(status))
    with contextlib.suppress(Exception):
        end_parked(_LEAVE_WAIT_S)
    with contextlib.suppress(Exception):
        audit.close()
    with contextlib.suppress(Exception):  # a closed stderr must not keep the process
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
    exporters = threading.Thread(target=telemetry.shutdown, daemon=True)
    exporters.start()
    exporters.join(_LEAVE_WAIT_S)  # a collector that never answers must not hold it
    with contextlib.suppress(Exception):
        sys.stdout.flush()
    os._exit(status)


def _check_fit(profile: str, entries: int, strays: tuple[str, ...], spec: str) -> None:
    """A grant whose allow entries are none of --spec's routes was made for another
    document: served, its model would be told nothing is permitted while the broker
    sends every call, so it is refused. Some strays are served, with a note saying so."""
    if not strays:
        return
    from runtime.mcp.runner import GrantError
    from runtime.selection import quoted

    where = f"profile {quoted(profile)}"
    if len(strays) >= entries:
        raise GrantError(
            f"--spec {quoted(spec)}: none of {where}'s {entries} allow entries is a route of "
            f"this document (e.g. {quoted(strays[0])}); serve the document the grant was "
            "made from"
        )
    click.echo(
        f"specgen: note: {len(strays)} of {where}'s {entries} allow entries are no route of "
        f"--spec {quoted(spec)} (e.g. {quoted(strays[0])}): the broker admits their calls "
        "and the model is told nothing of them; `specgen check SPEC --grants FILE --profile "
        "NAME` lists them",
        err=True,
    )


def _refuse(message: str) -> NoReturn:
    line = capped(message.splitlines()[0]) if message else message
    click.echo(line if line.startswith("specgen:") else f"specgen: {line}", err=True)
    sys.exit(1)


def _address(text: str, authenticated: bool) -> tuple[str, int]:
    """HOST:PORT; a loopback address only without client authentication (--auth), since
    anyone who can reach the server can then run code through the grant."""
    host, sep, port = text.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        _refuse(f"--http {text!r} must be HOST:PORT (PORT 0 picks a free one)")
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback and not authenticated:
        _refuse(
            f"--http {text!r}: serve on a loopback address (127.0.0.1, ::1, localhost); "
            "without --auth the server does not authenticate its clients"
        )
    return host, int(port)


_ORIGIN = re.compile(
    r"https?://[A-Za-z0-9.\-]+(?::[0-9]{1,5})?|https?://\[[0-9A-Fa-f:.]+\](?::[0-9]{1,5})?"
)


def _origin(text: str) -> str:
    """An Origin header value as a browser sends it: scheme://host[:port], nothing else."""
    if not _ORIGIN.fullmatch(text):
        _refuse(f"--allow-origin {text!r} must be scheme://host[:port] (http or https)")
    return text


def _wildcard(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_unspecified
    except ValueError:
        return False


_HOST = re.compile(r"(?:[A-Za-z0-9.\-]+|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?")


def _host(text: str) -> str:
    """A Host header value: host[:port], compared as given."""
    if not _HOST.fullmatch(text):
        _refuse(f"--allow-host {text!r} must be HOST or HOST:PORT, as clients send it")
    return text


@click.group("mcp", invoke_without_command=True)
@click.option(
    "--config",
    "config_file",
    default=None,
    type=click.Path(path_type=Path, dir_okay=False),
    metavar="FILE",
    help="Serve what this server config (TOML or JSON; `specgen mcp schema` prints its"
    " JSON Schema) describes: the grants file, several profiles with their documents,"
    " the listen address, client authentication, quotas, audit sinks and telemetry."
    " Excludes every other option.",
)
@click.option(
    "--grants",
    "grants_file",
    default=None,
    type=click.Path(path_type=Path),
    help="The operator's grants file (required without --config).",
)
@click.option(
    "--profile",
    "profile_name",
    default=None,
    help="The grant profile every run uses (required without --config).",
)
@click.option(
    "--caller",
    default=None,
    help="Who runs code; must be in the profile's allowed_callers. Required without"
    " --auth; with --auth each request's token names its caller.",
)
@click.option(
    "--spec",
    default=None,
    help="The profile's OpenAPI document (types, search; required without --config).",
)
@click.option(
    "--server",
    "server_url",
    default=None,
    metavar="URL",
    help="As for build: the document's server URL to take the route prefix from.",
)
@click.option(
    "--base-url",
    default=None,
    help="Send the grant's calls to this origin instead (e.g. a loopback fake).",
)
@click.option(
    "--http",
    "http",
    default=None,
    metavar="HOST:PORT",
    help="Serve streamable HTTP here instead of stdio.",
)
@click.option(
    "--timeout",
    "timeout_s",
    type=float,
    default=5.0,
    show_default=True,
    help="Wall-clock limit of one run in seconds (at most 30).",
)
@click.option(
    "--memory-mb",
    type=int,
    default=256,
    show_default=True,
    help="Guest memory limit of one run in MiB (at most 4096).",
)
@click.option(
    "--audit",
    "audit_file",
    default=None,
    type=click.Path(path_type=Path, dir_okay=False),
    metavar="FILE",
    help="Also append every execute's audit line to FILE (JSON Lines; never truncated).",
)
@click.option(
    "--allow-origin",
    "origins",
    multiple=True,
    metavar="ORIGIN",
    help="With --http: a browser origin (scheme://host:port) whose requests are admitted;"
    " repeatable. By default a request with an Origin header is refused.",
)
@click.option(
    "--auth",
    "auth_file",
    default=None,
    type=click.Path(path_type=Path, dir_okay=False),
    metavar="FILE",
    help="With --http: authenticate every client by bearer token (static tokens by SHA-256,"
    " or JWTs checked against a JWKS file); the token names the caller. Any address may"
    " then be bound.",
)
@click.option(
    "--allow-host",
    "hosts",
    multiple=True,
    metavar="HOST[:PORT]",
    help="With --http: a Host header value admitted besides the bound address and port"
    " (the name clients use through a proxy); repeatable.",
)
@workers_option(
    "Worker processes for the runs (default: one per core); 0 runs them on threads "
    "of the server's own process."
)
@isolation_option(
    "Where agent code runs relative to the key (default worker: engine processes with no"
    " key, network, grants file or writable file; gvisor: those inside gVisor; process:"
    " with the key, as --workers 0 always does)."
)
@quota_store_option
def mcp(
    config_file: Path | None,
    grants_file: Path | None,
    profile_name: str | None,
    caller: str | None,
    spec: str | None,
    server_url: str | None,
    base_url: str | None,
    http: str | None,
    timeout_s: float,
    memory_mb: int,
    audit_file: Path | None,
    origins: tuple[str, ...],
    auth_file: Path | None,
    hosts: tuple[str, ...],
    workers: int | None,
    isolation: str | None,
    quota_store: str | None,
) -> None:
    """Serve agent code execution through grants as an MCP server (stdio by default).

    One profile by flags, or with --config FILE the several profiles, callers, quotas,
    audit sinks and telemetry of a server many agents share.
    """
    ctx = click.get_current_context()
    if ctx.invoked_subcommand is not None:
        return
    if config_file is not None:
        given = [
            max(param.opts, key=len)
            for param in ctx.command.params
            if param.name not in (None, "config_file")
            and ctx.get_parameter_source(param.name) is not click.core.ParameterSource.DEFAULT
        ]
        if given:
            _refuse(f"--config names everything the server needs; drop {given[0]}")
        _serve(_from_config(config_file))
        return
    for flag, value in (("--grants", grants_file), ("--profile", profile_name), ("--spec", spec)):
        if value is None:
            _refuse(f"{flag} is required (or --config FILE)")
    assert grants_file is not None and profile_name is not None and spec is not None
    if auth_file is not None and http is None:
        _refuse("--auth applies to --http only (stdio has one client, the one that started it)")
    if auth_file is not None and caller is not None:
        _refuse("--caller and --auth exclude each other: with --auth each token names its caller")
    if auth_file is None and caller is None:
        _refuse("--caller is required (or --auth with --http, where each token names it)")
    _serve(
        _Settings(
            grants=grants_file,
            profiles=((profile_name, spec, server_url, base_url),),
            caller=caller,
            http=http,
            auth=functools.partial(_auth_file, auth_file) if auth_file is not None else None,
            origins=origins,
            hosts=hosts,
            timeout_s=timeout_s,
            memory_mb=memory_mb,
            workers=workers,
            isolation=isolation,
            quota_store=quota_store,
            audit_file=audit_file,
        )
    )


@mcp.command("schema")
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the schema here instead of stdout.",
)
def mcp_schema(output: Path | None) -> None:
    """Print the JSON Schema of `specgen mcp --config` files (for an editor; the server
    checks more)."""
    from runtime.mcp.config import schema_text
    from specgen.files import write_atomic

    text = schema_text()
    if output is None:
        click.echo(text, nl=False)
        return
    if not output.parent.is_dir():
        _refuse(f"{output.parent} does not exist")
    try:
        write_atomic(output, text.encode())
    except OSError as exc:
        _refuse(f"write {output}: {exc.strerror or exc}")
    click.echo(f"specgen: wrote {output}", err=True)


@dataclass(frozen=True)
class _Settings:
    """What a server is started with, from flags or from a config file."""

    grants: Path
    #: (profile, document, server URL, base URL) of each profile served.
    profiles: tuple[tuple[str, str, str | None, str | None], ...]
    caller: str | None
    http: str | None
    #: Reads and checks the client authentication, once the address is known good.
    auth: Callable[[], AuthConfig] | None
    origins: tuple[str, ...]
    hosts: tuple[str, ...]
    timeout_s: float
    memory_mb: int
    workers: int | None
    isolation: str | None
    quota_store: str | None
    audit_file: Path | None
    audit_stderr: bool = True
    audit_stdout: bool = False
    audit_otel: bool = False


def _auth_file(path: Path) -> AuthConfig:
    """The --auth file's settings. The auth module (and with it the MCP SDK) is imported
    only here: a server without auth imports the SDK after its engine processes have
    started, which then start while it does."""
    from runtime.mcp.auth import load_auth

    return load_auth(path)


def _auth_block(block: dict, where: str, base: Path) -> AuthConfig:
    """A config file's `auth` block, read as `_auth_file` reads a file."""
    from runtime.mcp.auth import parse_auth

    return parse_auth(block, where, base)


def _from_config(path: Path) -> _Settings:
    """The settings a config file gives, checked as the flags are; one line if not."""
    from runtime.mcp.config import ConfigError, load_config

    try:
        config = load_config(path)
    except ConfigError as exc:
        _refuse(str(exc))
    where = f"--config {str(path)!r}"
    if config.auth is not None and config.listen is None:
        _refuse(f"{where}: auth applies to listen (HTTP) only")
    if config.auth is not None and config.caller is not None:
        _refuse(f"{where}: caller and auth exclude each other: with auth each token names it")
    if config.auth is None and config.caller is None:
        _refuse(f"{where}: caller is required (or auth with listen, where each token names it)")
    block, base = config.auth, config.path.resolve().parent
    auth = (
        functools.partial(_auth_block, block, f"{where}: auth", base) if block is not None else None
    )
    _telemetry(config, where)
    return _Settings(
        grants=config.grants,
        profiles=tuple((p.name, p.spec, p.server, p.base_url) for p in config.profiles),
        caller=config.caller,
        http=config.listen,
        auth=auth,
        origins=config.allow_origins,
        hosts=config.allow_hosts,
        timeout_s=config.timeout_s,
        memory_mb=config.memory_mb,
        workers=config.workers,
        isolation=config.isolation,
        quota_store=config.quota_store,
        audit_file=config.audit.file,
        audit_stderr=config.audit.stderr,
        audit_stdout=config.audit.stdout,
        audit_otel=config.audit.otel,
    )


def _telemetry(config: ServerConfig, where: str) -> None:
    """Turn telemetry on as the config says (before the server exists, so the SDK's
    tools/call spans reach the provider), the OTEL_* variables filling in the rest."""
    from runtime import telemetry

    wanted = config.telemetry
    if wanted.otlp_endpoint is not None:
        if not wanted.otlp_endpoint.startswith(("http://", "https://")):
            _refuse(f"{where}: telemetry: otlp_endpoint must be an http(s) URL")
        os.environ.setdefault("OTEL_EXPORTER_OTLP_ENDPOINT", wanted.otlp_endpoint)
    enabled = wanted.enabled
    if enabled is None and (wanted.otlp_endpoint is not None or config.audit.otel):
        enabled = True
    on = telemetry.configure(wanted.service_name, enabled)
    if config.audit.otel and not on:
        _refuse(f"{where}: audit: otel needs telemetry on (OTEL_SDK_DISABLED turns it off)")


def _serve(settings: _Settings) -> None:
    """Check what is left, open the grants and documents, and serve until stopped."""
    if settings.quota_store is not None:
        from runtime import QUOTA_STORE_ENV, QuotaStoreUrlError, check_quota_store

        try:
            check_quota_store(settings.quota_store)
        except QuotaStoreUrlError as exc:
            _refuse(f"--quota-store: {exc}")
        os.environ[QUOTA_STORE_ENV] = settings.quota_store
    refused = limits_error(settings.timeout_s, settings.memory_mb)
    if refused is not None:
        _refuse(refused)
    http, origins, hosts = settings.http, settings.origins, settings.hosts
    address = _address(http, settings.auth is not None) if http is not None else None
    if address is None and any(spec == "-" for _, spec, _, _ in settings.profiles):
        # Read to its end, stdin would take the client's messages as the document, and
        # wait for ever on a client that keeps it open, as every stdio client does.
        _refuse("--spec -: on stdio, stdin carries the client's messages; name the document's file")
    closed = sorted(_STD_NAMES[fd] for fd in streams.CLOSED & {0, 1})
    if address is None and closed:
        _refuse(
            f"{' and '.join(closed)} closed: on stdio the server reads its client's messages"
            " on stdin and answers on stdout (or serve --http)"
        )
    if origins and address is None:
        _refuse("--allow-origin applies to --http only")
    if hosts and address is None:
        _refuse("--allow-host applies to --http only")
    for origin in origins:
        _origin(origin)
    for host in hosts:
        _host(host)
    if address is not None and not hosts and _wildcard(address[0]):
        _refuse(
            f"--http {http!r}: no client sends a wildcard address as its Host; "
            "name the host clients use with --allow-host"
        )

    from runtime.mcp.audit import AuditFileError, AuditLog
    from runtime.mcp.log_lines import log_in_lines

    log_in_lines()  # before anything logs, and before the SDK would set up Rich's
    from runtime.mcp.runner import (
        GrantError,
        close_pool,
        interrupt_runs,
        open_grants,
        pool_started,
    )

    auth = None
    if settings.auth is not None:
        from runtime.mcp.auth import AuthFileError

        try:
            auth = settings.auth()
        except AuthFileError as exc:
            _refuse(str(exc))
    grants: tuple = ()
    try:
        # The engine processes start while this process imports the MCP SDK and builds
        # the catalog (each takes a few tenths of a second, the SDK more); a tier that
        # cannot start is still refused before the server answers anyone.
        grants = open_grants(
            settings.grants,
            [name for name, _, _, _ in settings.profiles],
            settings.caller,
            base_urls={name: url for name, _, _, url in settings.profiles if url is not None},
            timeout_s=settings.timeout_s,
            memory_mb=settings.memory_mb,
            workers=RunPool.default_workers() if settings.workers is None else settings.workers,
            isolation=settings.isolation,
            wait=False,
        )
        from runtime.mcp.server import build_server, prepare, serve_http, serve_stdio

        prepared = [
            prepare(spec, grant, server_url)
            for grant, (_, spec, server_url, _) in zip(grants, settings.profiles, strict=True)
        ]
        for ready, (_, spec, _, _) in zip(prepared, settings.profiles, strict=True):
            _check_fit(ready.grant.name, len(ready.grant.allow), ready.strays, spec)
        audit = AuditLog(
            settings.audit_file,
            stderr=settings.audit_stderr,
            stdout=settings.audit_stdout,
            otel=settings.audit_otel,
        )
        pool_started(grants)
    except (GrantError, SpecError, AuditFileError) as exc:
        close_pool(grants)
        _refuse(str(exc))
    server = build_server(prepared, audit, auth)
    import anyio

    if address is None:
        from runtime.mcp.approval import end_asking

        def interrupt() -> None:
            """Ctrl-C: the runs' clocks end, and so do questions waiting for the client."""
            interrupt_runs(grants)
            end_asking()

        try:
            interrupted = anyio.run(serve_stdio, server, interrupt)
        except (KeyboardInterrupt, SystemExit):  # Ctrl-C before serving, or a second one
            interrupt_runs(grants)
            _leave(130, "specgen: interrupted: leaving now", audit)
        if interrupted:
            _leave(
                130, "specgen: interrupted (Ctrl-C): the runs under way ended and audited", audit
            )
        return None
    try:
        anyio.run(serve_http, server, *address, origins, hosts)
    except OSError as exc:
        _refuse(f"--http {http!r}: {exc.strerror or exc}")
    return None
