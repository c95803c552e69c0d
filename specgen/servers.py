"""The path every route inherits from the document's `servers`.

OpenAPI appends each path to the server URL, and a grant's base_url is an origin only,
so a server path such as `/client/v4` must be part of every route, or a grant built from
the document would send every call to the wrong place.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

from specgen.errors import SpecError
from specgen.quoting import go_quote

_VARIABLE = re.compile(r"\{([^{}]*)\}")


def _expand(url: str, variables: Any) -> str:
    """Substitute server variables with their defaults, as a client would by default."""
    variables = variables if isinstance(variables, dict) else {}

    def sub(match: re.Match[str]) -> str:
        spec = variables.get(match.group(1))
        default = spec.get("default") if isinstance(spec, dict) else None
        if not isinstance(default, str):
            raise SpecError(
                f"specgen: server URL {go_quote(url)} uses variable "
                f"{{{match.group(1)}}} without a default"
            )
        return default

    return _VARIABLE.sub(sub, url)


def url_path(url: str) -> str:
    """The path part of a server URL; a relative URL is a path itself. No trailing `/`."""
    try:
        parts = urlsplit(url)
    except ValueError as exc:  # an unclosed "[" or a bad port: not a URL at all
        raise SpecError(f"specgen: server URL {go_quote(url)} is not a URL: {exc}") from None
    path = parts.path if (parts.scheme or parts.netloc) else url.split("?", 1)[0].split("#", 1)[0]
    if path in ("", "."):
        return ""
    if not path.startswith("/"):
        path = "/" + path.removeprefix("./")
    return path.rstrip("/")


def server_choice(
    doc: dict[str, Any], override: str | None = None, *, first_on_disagreement: bool = False
) -> tuple[str, str]:
    """(prefix, warning): like `server_prefix`, but servers that disagree need not refuse.

    With `first_on_disagreement` the first server wins, as OpenAPI says a client does by
    default, and the warning names the choice and how to make another.
    """
    if override is not None or not first_on_disagreement:
        return server_prefix(doc, override), ""
    try:
        return server_prefix(doc), ""
    except SpecError as exc:
        if "disagree" not in str(exc):
            raise
    paths = _paths(doc)
    listed = ", ".join(p or "/" for p in paths)
    return paths[0], (
        f"the document's servers disagree on the path ({listed}); routes use the first, "
        f"{paths[0] or '/'}, as OpenAPI clients do; choose another with --server URL"
    )


def _paths(doc: dict[str, Any]) -> list[str]:
    servers = doc.get("servers")
    paths: list[str] = []
    for server in servers if isinstance(servers, list) else []:
        if not isinstance(server, dict) or not isinstance(server.get("url"), str):
            continue
        path = url_path(_expand(server["url"], server.get("variables")))
        if path not in paths:
            paths.append(path)
    return paths


def server_prefix(doc: dict[str, Any], override: str | None = None) -> str:
    """The route prefix: the one path all servers agree on, or the chosen server's path.

    Servers that disagree are refused rather than guessed between, because picking the
    wrong one silently yields a grant that reaches nothing (or something else).
    """
    if override is not None:
        return url_path(override)
    servers = doc.get("servers")
    if not isinstance(servers, list) or not servers:
        return ""
    paths: list[str] = []
    for server in servers:
        if not isinstance(server, dict) or not isinstance(server.get("url"), str):
            continue
        path = url_path(_expand(server["url"], server.get("variables")))
        if path not in paths:
            paths.append(path)
    if len(paths) > 1:
        listed = ", ".join(p or "/" for p in paths)  # SpecError escapes controls
        raise SpecError(
            f"specgen: the document's servers disagree on the path ({listed}); "
            "choose one with --server URL"
        )
    return paths[0] if paths else ""
