"""`specgen grant init`: a first grants profile drafted from the document.

An operator otherwise copies the example and edits it by hand, which is how a catalog
from an older document or a misspelt field gets in. The draft takes everything the
document states (the route list with its parameters, exactly as `emit catalog` prints
it, the origin, how the API wants its key, the header values it fixes) and leaves the
decisions to the operator: which routes and parameters to allow (none unless named), who
may run it, where else the key may go (`base_url_overrides`). A draft passes `check
--grants` as written: an --allow entry the check would refuse is refused here.

The runtime's loader is the authority on the format; specgen never imports it, so the
draft is plain data here and the tests prove the loader accepts it.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import orjson

from specgen.allow import AllowEntry, AllowError, entry_json, header_forbidden, parse_entry
from specgen.errors import SpecError
from specgen.files import read_input
from specgen.origins import ANY_PORT, OriginFault, is_loopback, origin_fault
from specgen.params import Parameter
from specgen.preamble import escapes
from specgen.quoting import go_quote
from specgen.routes import Route, route_error
from specgen.security import propose, propose_one

if TYPE_CHECKING:
    from specgen.build import Result

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
            if parts.scheme == "http" and not is_loopback(parts.hostname):
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
    """The draft's token block: a static bearer token from an env variable when the
    document declares a scheme a bearer token can satisfy (or states none it can send
    exactly), else the exact block of the first scheme it requires that has one; with a
    note for every other scheme naming the token block that would send it (or why none can)."""
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
    if not bearer_like:
        # No scheme a bearer token satisfies: the first one the document requires whose
        # block can be stated exactly (an apiKey header, basic) is what the API wants.
        exact = next((p for p in propose(doc, token["env"]) if p.token is not None), None)
        if exact is not None and exact.token is not None:
            notes = [
                f"token: {_describe(schemes[exact.scheme])} from ${token['env']}, as "
                f"securityScheme {go_quote(exact.scheme)} asks"
                + (f" ({exact.note})" if exact.note else "")
            ]
            notes += [
                f"securityScheme {go_quote(name)} is {_describe(s)}; the draft does not send "
                f"it: {_instead(name, s, token['env'])}"
                for name, s in sorted(schemes.items())
                if name != exact.scheme
            ]
            return exact.token, notes
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


def read_allow_option(text: str) -> list[Any]:
    """One --allow value as allow entries: `METHOD /path?q&name=pin` in the string form,
    a JSON object (`{"route": ..., "headers": [...]}`) or array of entries, or `@FILE`
    holding that JSON, so every form the grant's `allow` takes can be drafted."""
    if text.startswith("@"):
        path = Path(text[1:])
        try:
            raw = read_input(path)  # a FIFO no one writes to reads empty, never waits
        except OSError as exc:
            raise SpecError(
                f"specgen: --allow {go_quote(text)}: cannot read: {exc.strerror or exc}"
            ) from None
        return _json_entries(raw, text)
    if text.lstrip().startswith(("{", "[")):
        return _json_entries(text.encode(), text)
    return [text]


def _json_entries(raw: bytes, given: str) -> list[Any]:
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise SpecError(f"specgen: --allow {go_quote(given[:200])}: invalid JSON: {exc}") from None
    return value if isinstance(value, list) else [value]


def _shown(raw: Any) -> str:
    """An --allow entry as the operator wrote it, quoted for a one-line message."""
    text = raw if isinstance(raw, str) else json.dumps(raw, ensure_ascii=True)
    return go_quote(text if len(text) <= 200 else text[:199] + "…")


def _declared(result: Result, route: Route) -> tuple[list[Parameter], list[Parameter]]:
    """The query and header parameters the document declares for the route(s) `route`
    is an instance of."""
    query: list[Parameter] = []
    headers: list[Parameter] = []
    for declared, q, h in result.gen.declared:
        if declared.covers(route):
            query += q
            headers += h
    return query, headers


def _fixed_value(parameter: Parameter) -> str | None:
    """The one value a required parameter's schema admits, as it is sent, or None."""
    enum = parameter.schema.enum  # already the text a header carries
    if not parameter.required or enum is None or len(enum) != 1:
        return None
    return enum[0]


def profile_headers(result: Result, routes: list[Route]) -> tuple[dict[str, str], list[str]]:
    """The profile `headers` the document fixes: a header parameter that is required and
    has exactly one enum value (`X-GitHub-Api-Version: 2022-11-28`) on the routes the
    grant reaches (every route when it allows none yet). A header the broker or the
    credential sets is never drafted; two routes fixing different values get a note."""
    values: dict[str, dict[str, str]] = {}
    for declared, _query, headers in result.gen.declared:
        if routes and not any(declared.covers(r) for r in routes):
            continue
        for parameter in headers:
            value = _fixed_value(parameter)
            if value is not None and not header_forbidden(parameter.name):
                values.setdefault(parameter.name.lower(), {}).setdefault(value, parameter.name)
    out: dict[str, str] = {}
    notes: list[str] = []
    for _low, by_value in sorted(values.items()):
        if len(by_value) > 1:
            notes.append(
                f"header {go_quote(next(iter(by_value.values())))} is fixed to different values "
                f"on different routes ({', '.join(go_quote(v) for v in sorted(by_value))}); "
                "profile headers go on every call, so the draft sets none: allow it per entry"
            )
            continue
        value, name = next(iter(by_value.items()))
        out[name] = value
    if out:
        notes.append(
            "headers: every call carries "
            + ", ".join(f"{name}: {value}" for name, value in out.items())
            + " (the document requires each with that one value); code cannot change them"
        )
    return out, notes


def _unlisted_note(result: Result, entry: AllowEntry) -> str | None:
    """Which declared parameters an allow entry does not permit (the call may send none
    of them), and the form that would permit them."""
    query, headers = _declared(result, entry.route)
    listed = {p.name for p in entry.query} | {p.name.lower() for p in entry.headers}
    declared = list(dict.fromkeys([p.name for p in query] + [p.name for p in headers]))
    missing = [n for n in dict.fromkeys(p.name for p in query) if n not in listed]
    names = [n for n in declared if n not in listed and n.lower() not in listed]
    if not names:
        return None
    shown = ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
    items = [str(p) for p in entry.query] + missing
    example = f"{entry.route}?{'&'.join(items)}" if missing else ""
    headers_too = len(missing) < len(names)
    how = (
        f" (every query parameter: --allow {go_quote(example)}"
        + ("; headers in the object form)" if headers_too else ")")
        if example
        else ' (the object form: {"route": ..., "headers": [...]})'
    )
    return (
        f"allow entry {go_quote(str(entry.route))} permits {len(declared) - len(names)} of the "
        f"{len(declared)} query and header parameters the document declares for it; a call "
        f"sending {shown} is refused until the entry lists them{how}"
    )


def _allowed_entries(result: Result, allow: list[str]) -> list[AllowEntry]:
    """The --allow values as checked allow entries: each an instance of a catalog route,
    naming only parameters the document declares, with pins its schema admits (the
    tests `check --grants` applies), so the draft never fails its own check."""
    from specgen.check import _parameter_drift

    catalog = [e.route for e in result.gen.catalog]
    entries: list[tuple[Any, AllowEntry]] = []
    for text in allow:
        for raw in read_allow_option(text):
            shown = _shown(raw)
            try:
                entry = parse_entry(raw)
            except AllowError as exc:
                why = str(exc)
                if why.startswith("allow entry "):  # it names the entry itself
                    raise SpecError(
                        f"specgen: --allow {why.removeprefix('allow entry ')}"
                    ) from None
                raise SpecError(f"specgen: --allow {shown}: {why}") from None
            route = entry.route
            err = route_error(route.method, route.path)
            if err is not None:
                raise SpecError(f"specgen: --allow {shown}: {err}")
            if not any(c.covers(route) for c in catalog):
                raise SpecError(
                    f"specgen: --allow {shown} is not an instance of any route in the document"
                )
            if not result.gen.declared and (entry.query or entry.headers or entry.body is not None):
                raise SpecError(
                    f"specgen: --allow {shown}: --compat reference grants hold path-only routes"
                )
            if any(route == e.route for _, e in entries):
                raise SpecError(f"specgen: --allow {shown} is given twice")
            problems = _parameter_drift(result, [entry], "")
            if problems:
                why = problems[0].removeprefix('profile "": ')
                more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
                raise SpecError(f"specgen: --allow {shown}: {why}{more}")
            entries.append((raw, entry))
    return [e for _, e in entries]


def _overrides(origins: list[str]) -> list[str]:
    """--base-url-override values: origins (a loopback one may end in `:*`); the loader
    applies base_url's full rules, this refuses what is plainly not an origin."""
    out: list[str] = []
    for origin in origins:
        _check_origin("--base-url-override", origin, any_port=True)
        if origin not in out:
            out.append(origin)
    return out


def _check_origin(flag: str, origin: str, *, any_port: bool = False) -> None:
    """Refuse, in the words of `flag`, an origin the loader would refuse
    (`specgen.origins.origin_fault`, the loader's own rule): a draft that passed `check`
    must not fail at the first run."""
    fault = origin_fault(origin, any_port=any_port)
    if fault is None:
        return
    if fault is OriginFault.ANY_PORT_NOT_LOOPBACK:
        why = f"port {ANY_PORT} is allowed only for a loopback host"
    elif fault is OriginFault.PLAIN_HTTP:
        why = "plain http is allowed only for a loopback host; use the API's https origin"
    else:
        why = "an origin (http(s)://host[:port]" + (
            ", or http://127.0.0.1:* for any port of a loopback host)" if any_port else ")"
        )
    raise SpecError(f"specgen: {flag} {go_quote(origin)}: {why}")


def _user_agent_note(base_url: str) -> str | None:
    """GitHub refuses a call without a User-Agent naming the application; the broker's
    default names plimsoll-specgen, which works but identifies no one."""
    host = (urlsplit(base_url).hostname or "") if base_url else ""
    if "github" not in host:
        return None
    return (
        "User-Agent: the broker sends `User-Agent: plimsoll-specgen/VERSION` on every call; "
        f"{host} asks for one naming your application or user, so set it in the profile's "
        '"headers" ({"User-Agent": "your-app"}), which replaces the default'
    )


def draft(
    result: Result,
    *,
    profile: str,
    callers: list[str],
    allow: list[str],
    global_name: str,
    server: str | None,
    preamble_file: str | None,
    base_url: str | None = None,
    base_url_overrides: list[str] | None = None,
) -> Draft:
    """The grants file `{"profiles": {profile: ...}}` for the document `result` built.

    The catalog is exactly what `emit catalog` prints, and every --allow entry passes the
    tests `check --grants` applies, so a draft never grants a route or a parameter the
    document lacks and passes its own check.
    """
    doc = result.source.doc
    allowed = _allowed_entries(result, allow)
    headers, header_notes = profile_headers(result, [e.route for e in allowed])
    fixed = {name.lower() for name in headers}
    for entry in allowed:
        clash = sorted(fixed & entry.header_names())
        if clash:
            raise SpecError(
                f"specgen: --allow {go_quote(str(entry.route))} lists header {go_quote(clash[0])}, "
                "which the draft sets on every call as a profile header (the document fixes its "
                "value); leave it out of the entry"
            )
    overrides = _overrides(base_url_overrides or [])
    if base_url is not None:
        _check_origin("--base-url", base_url)
        notes: list[str] = []
    else:
        base_url, notes = _origin(doc, server)
    token, token_notes = _token(doc, profile)
    notes += token_notes
    notes += header_notes
    agent = _user_agent_note(base_url)
    if agent is not None:
        notes.append(agent)
    if not callers:
        notes.append(
            "allowed_callers is empty, so the loader refuses the profile until you name who "
            "may run it (--caller ID, or edit the file)"
        )
    if not allowed:
        notes.append(
            "allow is empty, so the loader refuses the profile until you add the routes "
            "the agent needs "
            "(--allow 'METHOD /path?query&name=pin', an instance of a catalog route)"
        )
    notes += [n for n in (_unlisted_note(result, e) for e in allowed) if n is not None]
    if not overrides:
        notes.append(
            "base_url_overrides is empty, so `specgen run --base-url URL` (a local fake, say) "
            'is refused: list its origin, e.g. "base_url_overrides": ["http://127.0.0.1:*"] '
            "for any port of a loopback host (--base-url-override ORIGIN); the key goes "
            "wherever the grant points"
        )
    body: dict[str, Any] = {
        "base_url": base_url,
        "global": global_name,
        "allowed_callers": callers,
    }
    if token is not None:
        body["token"] = token
    if headers:
        body["headers"] = headers
    body["allow"] = [entry_json(e) for e in allowed]
    body["catalog"] = [entry_json(e) for e in result.gen.catalog]
    if overrides:
        body["base_url_overrides"] = overrides
    if preamble_file is not None:
        body["preamble_file"] = preamble_file
    else:
        notes.append(
            "no preamble: write it with `specgen build SPEC -o DIR` and point "
            '"preamble_file" at DIR/preamble.js (relative to the grants file)'
        )
    return Draft(doc={"profiles": {profile: body}}, notes=notes)


def check_preamble_file(rel: str, grants_file: Path | None) -> None:
    """Refuse a --preamble-file the runtime's loader would refuse as escaping the grants
    directory, so a draft never names a file its first run cannot read.

    The loader's rule (`specgen.preamble.escapes`): no NUL, not absolute, and the path
    joined to the grants file's folder and normalised must stay inside that folder. With
    -o that folder is known and the rule is applied as the loader applies it; on stdout
    it is not, so a path whose `..` leaves its own starting point is refused (where it
    lands depends on the folder). Where the file resolves through links, and whether it
    is there at all, `preamble_problems` notes once the draft is written.
    """
    shown = go_quote(rel)
    if not rel:
        raise SpecError("specgen: --preamble-file is empty; name the preamble.js to load")
    if "\x00" in rel:
        raise SpecError(f"specgen: --preamble-file {shown}: the name contains a NUL byte")
    base = Path(os.path.abspath(grants_file)).parent if grants_file is not None else None
    if escapes(rel, base):
        raise SpecError(
            f"specgen: --preamble-file {shown} escapes the folder of the grants file, which "
            "the loader refuses; give a path inside it, relative to the grants file"
        )


#: A profile name the loader accepts (runtime/grants.py's rule, restated).
PROFILE_NAME = re.compile(r"[A-Za-z0-9._-]{1,128}\Z")
