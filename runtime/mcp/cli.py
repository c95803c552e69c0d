"""`specgen mcp`: the click command, plugged into specgen through `specgen.commands`.

Everything that can be refused (the grants file, the profile, the caller, the token
variable, the document, the address, the auth file) is refused before the server starts, as one
`specgen: ...` line and exit 1, so an MCP client's log shows why it could not connect.
"""

from __future__ import annotations

import ipaddress
import os
import re
import sys
from pathlib import Path
from typing import NoReturn

import click

from runtime import RunPool
from runtime.cli import isolation_option, quota_store_option, workers_option
from specgen.errors import SpecError


def _refuse(message: str) -> NoReturn:
    line = message.splitlines()[0] if message else message
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


@click.command("mcp")
@click.option(
    "--grants",
    "grants_file",
    required=True,
    type=click.Path(path_type=Path),
    help="The operator's grants file.",
)
@click.option("--profile", "profile_name", required=True, help="The grant profile every run uses.")
@click.option(
    "--caller",
    default=None,
    help="Who runs code; must be in the profile's allowed_callers. Required without"
    " --auth; with --auth each request's token names its caller.",
)
@click.option("--spec", required=True, help="The profile's OpenAPI document (types, search).")
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
    grants_file: Path,
    profile_name: str,
    caller: str | None,
    spec: str,
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
    """Serve agent code execution through one grant as an MCP server (stdio by default)."""
    if quota_store is not None:
        from runtime import QUOTA_STORE_ENV, QuotaStoreUrlError, check_quota_store

        try:
            check_quota_store(quota_store)
        except QuotaStoreUrlError as exc:
            _refuse(f"--quota-store: {exc}")
        os.environ[QUOTA_STORE_ENV] = quota_store
    if not 0 < timeout_s <= 30:
        _refuse(f"--timeout {timeout_s:g} must be more than 0 and at most 30 seconds")
    if not 1 <= memory_mb <= 4096:
        _refuse(f"--memory-mb {memory_mb} must be between 1 and 4096")
    if auth_file is not None and http is None:
        _refuse("--auth applies to --http only (stdio has one client, the one that started it)")
    if auth_file is not None and caller is not None:
        _refuse("--caller and --auth exclude each other: with --auth each token names its caller")
    if auth_file is None and caller is None:
        _refuse("--caller is required (or --auth with --http, where each token names it)")
    address = _address(http, auth_file is not None) if http is not None else None
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
    from runtime.mcp.auth import AuthFileError, load_auth
    from runtime.mcp.runner import GrantError, open_grant
    from runtime.mcp.server import build_server, prepare, serve_http, serve_stdio

    try:
        auth = load_auth(auth_file) if auth_file is not None else None
        grant = open_grant(
            grants_file,
            profile_name,
            caller,
            base_url=base_url,
            timeout_s=timeout_s,
            memory_mb=memory_mb,
            workers=RunPool.default_workers() if workers is None else workers,
            isolation=isolation,
        )
        prepared = prepare(spec, grant, server_url)
        audit = AuditLog(audit_file)
    except (GrantError, SpecError, AuditFileError, AuthFileError) as exc:
        _refuse(str(exc))
    server = build_server(prepared, audit, auth)
    import anyio

    if address is None:
        anyio.run(serve_stdio, server)
        return
    try:
        anyio.run(serve_http, server, *address, origins, hosts)
    except OSError as exc:
        _refuse(f"--http {http!r}: {exc.strerror or exc}")
