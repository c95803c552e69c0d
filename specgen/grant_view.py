"""What one grant profile lets a model do with a document, for the text a model is shown.

The whole-document description lists every operation; a model working under a grant
should see only what the grant permits (the rest would be refused), with the types, the
path values the grant fixes, and a true sentence about the credential. The generator
never imports the runtime, so the profile's allow list and token are read here from the
grants file's JSON; the runtime's loader remains the authority that validates a grant
before anything runs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import orjson

from specgen.allow import AllowError, parse_entry, response_header_patterns
from specgen.errors import SpecError
from specgen.quoting import go_quote
from specgen.routes import Route

if TYPE_CHECKING:
    from specgen.build import Result
    from specgen.typescript import OperationTypes

_PARAM = re.compile(r"\{([^{}]*)\}")
#: The token block types the runtime's broker reads (runtime/broker/token_block.py).
TOKEN_KINDS = ("static", "basic", "jwt")

#: Operations the description lists in full; the rest are named only (search finds them).
MAX_LISTED = 400


@dataclass(frozen=True)
class GrantView:
    """The parts of a profile the model-facing text depends on."""

    profile: str
    allow: tuple[Route, ...]
    #: The token block's type ("static", "basic" or "jwt"); "" when the grant sends no
    #: credential. The description's sentence about the key depends on it.
    token: str
    global_name: str = ""
    #: Response headers (lower-case, `*` a prefix) the `$response` form reads on every
    #: route, besides content-type; None when not known (a view not read from a file).
    response_headers: tuple[str, ...] | None = None
    #: Those only some routes' allow entries add.
    route_response_headers: tuple[str, ...] = ()


def read_grant(grants: Path, name: str) -> GrantView:
    """The profile `name` of a grants file, as far as the description needs it."""
    try:
        data = orjson.loads(grants.read_bytes())
    except OSError as exc:
        raise SpecError(f"specgen: grants {grants}: cannot read: {exc.strerror or exc}") from None
    except orjson.JSONDecodeError as exc:
        raise SpecError(f"specgen: grants {grants}: invalid JSON: {exc}") from None
    profiles = data.get("profiles") if isinstance(data, dict) else None
    body = profiles.get(name) if isinstance(profiles, dict) else None
    if not isinstance(body, dict):
        raise SpecError(f"specgen: grants {grants}: no profile {go_quote(name)}")
    raw = body.get("allow") or []
    if not isinstance(raw, list):
        raise SpecError(f"specgen: profile {go_quote(name)}: allow must be a list of entries")
    try:
        entries = [parse_entry(item) for item in raw]
        readable = response_header_patterns(body.get("response_headers"))
    except AllowError as exc:
        raise SpecError(f"specgen: profile {go_quote(name)}: {exc}") from None
    allow = tuple(e.route for e in entries)
    per_route = tuple(
        dict.fromkeys(h for e in entries for h in e.response_headers if h not in readable)
    )
    token = body.get("token")
    kind = ""
    if isinstance(token, dict):
        kind = str(token.get("type") or "static")
        if kind not in TOKEN_KINDS:
            raise SpecError(
                f"specgen: profile {go_quote(name)}: token type {go_quote(kind)} is not one the "
                f"runtime supports ({'|'.join(TOKEN_KINDS)})"
            )
    global_name = body.get("global")
    return GrantView(
        name,
        allow,
        kind,
        global_name if isinstance(global_name, str) else "",
        readable,
        per_route,
    )


@dataclass(frozen=True)
class Allowed:
    """One operation the grant permits, with the path values its allow entries fix."""

    types: OperationTypes
    entries: tuple[Route, ...]

    @property
    def fixed(self) -> list[tuple[str, list[str]]]:
        """(argument, the literal values the grant allows) for each pinned path argument."""
        template = self.types.op.template.split("/")[1:]
        args = iter(self.types.op.args)
        out: list[tuple[str, list[str]]] = []
        for i, seg in enumerate(template):
            if not _PARAM.fullmatch(seg):
                continue
            arg = next(args, seg)
            values = [e.segments[i] for e in self.entries]
            if "*" not in values:
                out.append((arg, list(dict.fromkeys(values))))
        return out


def allowed(result: Result, allow: tuple[Route, ...]) -> list[Allowed]:
    """The document's operations that some allow entry is an instance of, in document order."""
    out = []
    for types in result.types.operations:
        route = Route(path=types.op.route, method=types.op.method)
        entries = tuple(a for a in allow if route.covers(a))
        if entries:
            out.append(Allowed(types, entries))
    return out


def grant_description(result: Result, view: GrantView) -> str:
    """The model-facing text for one grant: only what it permits, with the types."""
    from specgen.render import render

    ops = allowed(result, view.allow)
    refs = tuple(r for a in ops[:MAX_LISTED] for r in a.types.refs)
    declarations, cut = result.types.closure(refs)
    return render(
        "description.grant.txt.j2",
        gen=result.gen,
        view=view,
        global_name=view.global_name or result.gen.global_name,
        ops=ops[:MAX_LISTED],
        more=ops[MAX_LISTED:],
        declarations=declarations,
        cut=cut,
    )
