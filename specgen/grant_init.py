"""`specgen grant init`: a first grants profile drafted from the document.

An operator otherwise copies the example and edits it by hand, which is how a catalog
from an older document or a misspelt field gets in. The draft takes everything the
document states (the route list, the origin, how the API wants its key) and leaves the
decisions to the operator: which routes to allow (none unless named), who may run it.

The runtime's loader is the authority on the format; specgen never imports it, so the
draft is plain data here and the tests prove the loader accepts it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from importlib.resources import files
from typing import Any
from urllib.parse import urlsplit

import orjson

from specgen.errors import SpecError
from specgen.quoting import go_quote
from specgen.routes import Route, RouteError, parse_route_line, route_error
from specgen.security import propose_one

#: Where the published schema lives inside the installed package.
SCHEMA_NAME = "grants.schema.json"


def schema_text() -> str:
    """The grants file's JSON Schema, exactly as published (docs/grants.md links it)."""
    return files("specgen").joinpath(SCHEMA_NAME).read_text(encoding="utf-8")


@dataclass
class Draft:
    """The drafted grants file and what the operator must still look at."""

    doc: dict[str, Any]
    notes: list[str] = field(default_factory=list)

    def text(self) -> str:
        return orjson.dumps(self.doc, option=orjson.OPT_INDENT_2).decode() + "\n"


def env_name(profile: str) -> str:
    """An environment variable name for the profile's key: `github-api` -> GITHUB_API_TOKEN."""
    stem = re.sub(r"[^A-Za-z0-9]+", "_", profile).strip("_").upper() or "API"
    if stem[0].isdigit():
        stem = "API_" + stem
    return f"{stem}_TOKEN"


def _origin(doc: dict[str, Any], server: str | None) -> tuple[str, list[str]]:
    """The grant's base_url from --server or the first absolute server URL."""
    urls = [server] if server is not None else []
    servers = doc.get("servers")
    if server is None and isinstance(servers, list):
        urls = [s["url"] for s in servers if isinstance(s, dict) and isinstance(s.get("url"), str)]
    for url in urls:
        try:
            parts = urlsplit(url)
        except ValueError:
            continue
        if parts.scheme in ("http", "https") and parts.hostname and "{" not in parts.netloc:
            origin = f"{parts.scheme}://{parts.netloc.rsplit('@', 1)[-1]}"
            notes = []
            if parts.scheme == "http" and parts.hostname not in ("localhost", "127.0.0.1", "::1"):
                notes.append(
                    f"base_url {go_quote(origin)} is plain http; the loader accepts http only for "
                    "a loopback host, so change it to the API's https origin"
                )
            return origin, notes
    return "", [
        "the document names no absolute http(s) server; set base_url to the API's origin "
        "(https://host) before loading the grant"
    ]


def _schemes(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    components = doc.get("components")
    found = components.get("securitySchemes") if isinstance(components, dict) else None
    if not isinstance(found, dict):
        return {}
    return {k: v for k, v in found.items() if isinstance(k, str) and isinstance(v, dict)}


def _describe(scheme: dict[str, Any]) -> str:
    kind = scheme.get("type")
    if kind == "http":
        return f"http {scheme.get('scheme', '?')}"
    if kind == "apiKey":
        return f"apiKey in {scheme.get('in', '?')} {go_quote(str(scheme.get('name', '?')))}"
    return str(kind)


def _instead(name: str, scheme: dict[str, Any], env: str) -> str:
    """What token block would send this scheme (specgen/security.py), or why none can."""
    proposal = propose_one(name, scheme, env)
    if proposal.token is None:
        return proposal.note
    block = json.dumps(proposal.token, ensure_ascii=True, separators=(", ", ": "))
    return f"use the token block {block}" + (f" ({proposal.note})" if proposal.note else "")


def _token(doc: dict[str, Any], profile: str) -> tuple[dict[str, str] | None, list[str]]:
    """The draft's token block (a static bearer token from an env variable), proposed
    when the document declares a scheme a bearer token can satisfy, with a note for
    every other scheme naming the token block that would send it (or why none can)."""
    schemes = _schemes(doc)
    token = {"type": "static", "env": env_name(profile)}
    if not schemes:
        return token, [
            "the document declares no securitySchemes; the draft still proposes a bearer "
            f"token from ${token['env']}: delete the token block if the API needs no key"
        ]
    bearer_like = [
        name
        for name, s in schemes.items()
        if (s.get("type") == "http" and str(s.get("scheme", "")).lower() == "bearer")
        or s.get("type") in ("oauth2", "openIdConnect")
    ]
    notes = [
        f"securityScheme {go_quote(name)} is {_describe(s)}; the draft's bearer token "
        f"does not send it as the document asks: {_instead(name, s, token['env'])}"
        for name, s in sorted(schemes.items())
        if name not in bearer_like
    ]
    if bearer_like:
        notes.append(
            f"token: a bearer token from ${token['env']} (the document declares "
            f"{', '.join(f'{n} ({_describe(schemes[n])})' for n in sorted(bearer_like))})"
        )
    return token, notes


def draft(
    doc: dict[str, Any],
    catalog: list[Route],
    *,
    profile: str,
    callers: list[str],
    allow: list[str],
    global_name: str,
    server: str | None,
    preamble_file: str | None,
    base_url: str | None = None,
) -> Draft:
    """The grants file `{"profiles": {profile: ...}}` for `doc`'s routes.

    Every --allow entry must be an instance of a catalog route (the same test `check
    --grants` applies), so a draft never grants a route the document lacks.
    """
    allowed: list[Route] = []
    for line in allow:
        try:
            route = parse_route_line(line, "--allow")
        except RouteError as exc:
            raise SpecError(f"specgen: {exc}") from None
        err = route_error(route.method, route.path)
        if err is not None:
            raise SpecError(f"specgen: --allow {go_quote(line)}: {err}")
        if not any(c.covers(route) for c in catalog):
            raise SpecError(
                f"specgen: --allow {go_quote(line)} is not an instance of any route in the document"
            )
        if route in allowed:
            raise SpecError(f"specgen: --allow {go_quote(line)} is given twice")
        allowed.append(route)
    if base_url is not None:
        notes: list[str] = []
    else:
        base_url, notes = _origin(doc, server)
    token, token_notes = _token(doc, profile)
    notes += token_notes
    if not callers:
        notes.append(
            "allowed_callers is empty, so the loader refuses the profile until you name who "
            "may run it (--caller ID, or edit the file)"
        )
    if not allowed:
        notes.append(
            "allow is empty, so the loader refuses the profile until you add the routes "
            "the agent needs "
            "(--allow 'METHOD /path', an instance of a catalog route)"
        )
    body: dict[str, Any] = {
        "base_url": base_url,
        "global": global_name,
        "allowed_callers": callers,
    }
    if token is not None:
        body["token"] = token
    body["allow"] = [str(r) for r in allowed]
    body["catalog"] = [str(r) for r in catalog]
    if preamble_file is not None:
        body["preamble_file"] = preamble_file
    else:
        notes.append(
            "no preamble: write it with `specgen build SPEC -o DIR` and point "
            '"preamble_file" at DIR/preamble.js (relative to the grants file)'
        )
    return Draft(doc={"profiles": {profile: body}}, notes=notes)


#: A profile name the loader accepts (runtime/grants.py's rule, restated).
PROFILE_NAME = re.compile(r"[A-Za-z0-9._-]{1,128}\Z")
