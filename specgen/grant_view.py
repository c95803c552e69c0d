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
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import orjson

from specgen.allow import AllowEntry, AllowError, Permit, parse_entry, response_header_patterns
from specgen.errors import SpecError
from specgen.files import read_regular
from specgen.quoting import go_quote, js_string
from specgen.route_index import RouteIndex
from specgen.routes import Route, segment_covers
from specgen.typescript import member_key

if TYPE_CHECKING:
    from specgen.build import Result
    from specgen.typescript import OperationTypes, Param

_PARAM = re.compile(r"\{([^{}]*)\}")
#: The token block types the runtime's broker reads (runtime/broker/token_block.py).
TOKEN_KINDS = ("static", "basic", "jwt")

#: Operations the description lists in full; the rest are named only (search finds them).
MAX_LISTED = 400


@dataclass(frozen=True)
class GrantView:
    """The parts of a profile the model-facing text depends on."""

    profile: str
    #: The allow entries with the parameters, pins and bodies each permits (a bare Route
    #: is read as an entry permitting no parameter).
    allow: tuple[AllowEntry | Route, ...]
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
        data = orjson.loads(read_regular(grants))  # bounded; never a FIFO or a device
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
    allow = tuple(entries)
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


def literal(value: str, ts: str) -> str:
    """A pinned value as the code would write it: a number or boolean pin of a parameter
    typed so is that literal (`7`, `true`), anything else a JS string (`"7"`)."""
    if ts == "number" and _NUMBER.fullmatch(value):
        return value
    if ts == "boolean" and value in ("true", "false"):
        return value
    return js_string(value)


_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")


@dataclass(frozen=True)
class Allowed:
    """One operation the grant permits: its types cut to what the grant lets the code
    send (only the permitted query and header parameters, pins typed as their literal),
    and the values its allow entries fix."""

    types: OperationTypes
    entries: tuple[AllowEntry, ...]
    #: (what the code writes, the literals the grant allows) for every pinned path
    #: argument and option.
    fixed: tuple[tuple[str, tuple[str, ...]], ...] = ()
    #: The body media types the entries permit, when other than JSON alone.
    body_types: tuple[str, ...] = ()
    #: "PATH: option, ..." per entry, when the entries permit different options.
    options_by_path: tuple[str, ...] = ()

    def signature(self, global_name: str) -> str:
        return signature(self.types, global_name)


def signature(types: OperationTypes, global_name: str, cut: Callable[[str], str] = str) -> str:
    """The method's signature as types.d.ts writes it, each type expression passed through
    `cut` (search shortens them; an option's name is never cut, only its type). `options`
    appears when some query or header parameter is permitted: offering an empty one
    would only invite a refused call."""
    args = [f"{p.name}: {cut(p.ts)}" for p in types.path_params]
    members = [
        f"{member_key(p.name)}{'' if p.required else '?'}: {cut(p.ts)}"
        for p in types.extra_params
        if p.sent
    ]
    required = any(p.required for p in types.extra_params if p.sent)
    if types.body is not None:
        optional = not types.body_required and not required
        args.append(f"body{'?' if optional else ''}: {cut(types.body)}")
    if members:
        args.append(f"options{'' if required else '?'}: {{ {'; '.join(members)} }}")
    return f"{global_name}.{types.op.name}({', '.join(args)}): Promise<{cut(types.response)}>"


def _as_entry(item: AllowEntry | Route) -> AllowEntry:
    return item if isinstance(item, AllowEntry) else AllowEntry(item)


def _path_pins(
    types: OperationTypes, entries: tuple[AllowEntry, ...]
) -> list[tuple[str, tuple[str, ...]]]:
    """(argument, literals) for each path argument every entry fixes to a literal."""
    template = types.op.template.split("/")[1:]
    args = iter(types.op.args)
    ts = {p.name: p.ts for p in types.path_params}
    out: list[tuple[str, tuple[str, ...]]] = []
    for i, seg in enumerate(template):
        if not _PARAM.fullmatch(seg):
            continue
        arg = next(args, seg)
        values = [e.route.segments[i] for e in entries]
        if "*" not in values:
            out.append((arg, tuple(literal(v, ts.get(arg, "")) for v in dict.fromkeys(values))))
    return out


def _permits(entries: tuple[AllowEntry, ...], param: Param) -> list[Permit] | None:
    """The permits of `param` in the entries that list it; None when none does."""
    found: list[Permit] = []
    for entry in entries:
        if param.location == "query":
            found += [p for p in entry.query if p.name == param.name]
        elif param.location == "header":
            found += [p for p in entry.headers if p.name.lower() == param.name.lower()]
    return found or None


def cut_to_grant(types: OperationTypes, entries: tuple[AllowEntry, ...]) -> Allowed:
    """`types` with only what `entries` permit: a query or header parameter no entry
    lists is dropped (the broker would refuse it), a pinned one is typed as its literal
    and optional (the broker sends the pin anyway), and a body no entry permits goes."""
    fixed = _path_pins(types, entries)
    params: list[Param] = []
    for param in types.extra_params:
        permits = _permits(entries, param) if param.sent else None
        if permits is None:
            continue
        pins = [p.value for p in permits]
        if all(v is not None for v in pins):
            literals = tuple(literal(v, param.ts) for v in dict.fromkeys(pins) if v is not None)
            param = param._replace(ts=" | ".join(literals), required=False)
            fixed.append((f"options.{member_key(param.name)}", literals))
        params.append(param)
    media = tuple(dict.fromkeys(m for e in entries for m in e.body_types()))
    cut = types._replace(extra_params=tuple(params))
    if types.body is not None and not media:
        cut = cut._replace(body=None, body_required=False)
    shown = media if media and media != ("application/json",) else ()
    return Allowed(cut, entries, tuple(fixed), shown, _options_by_path(params, entries))


def _options_by_path(params: list[Param], entries: tuple[AllowEntry, ...]) -> tuple[str, ...]:
    """When several entries permit the operation with different options, which path
    permits which: the signature shows their union, and a call that mixes one entry's
    path with another's option is refused."""
    if len(entries) < 2:
        return ()
    per_entry = [
        tuple(p.name for p in params if _permits((entry,), p) is not None) for entry in entries
    ]
    if len(set(per_entry)) < 2:
        return ()
    return tuple(
        f"{entry.route.path}: {', '.join(names) if names else 'none'}"
        for entry, names in zip(entries, per_entry, strict=True)
    )


def allowed(result: Result, allow: tuple[AllowEntry | Route, ...]) -> list[Allowed]:
    """The document's operations that some allow entry is an instance of, in document
    order, each cut to what its entries permit."""
    return matched(result, allow)[0]


def matched(
    result: Result, allow: tuple[AllowEntry | Route, ...]
) -> tuple[list[Allowed], list[AllowEntry]]:
    """`allowed`, and the allow entries that are an instance of none of the document's
    routes (in grant order): calls the broker would send that the model is told nothing
    of, as the grant was made for another document or another version of it."""
    operations = result.types.operations
    # The operations' routes are indexed and each entry looks up the ones covering it,
    # so the cost follows the grant's size, not the product of the two.
    index = RouteIndex(
        (Route(path=types.op.route, method=types.op.method) for types in operations),
        fold_case=False,
    )
    mine: dict[int, list[AllowEntry]] = {}
    strays: list[AllowEntry] = []
    for entry in (_as_entry(item) for item in allow):
        found = False
        for position in index.every(entry.route.method, entry.route.segments, _covers):
            mine.setdefault(position, []).append(entry)
            found = True
        if not found:
            strays.append(entry)
    permitted = [
        cut_to_grant(types, tuple(mine[i])) for i, types in enumerate(operations) if i in mine
    ]
    return permitted, strays


def _covers(want: str, got: str, index: int) -> bool:
    return segment_covers(want, got)


def grant_description(
    result: Result, view: GrantView, permitted: list[Allowed] | None = None
) -> str:
    """The model-facing text for one grant: only what it permits, with the types.
    `permitted` is `allowed(result, view.allow)` when the caller has it already."""
    from specgen.render import render

    ops = permitted if permitted is not None else allowed(result, view.allow)
    refs = tuple(r for a in ops[:MAX_LISTED] for r in a.types.refs)
    declarations, cut = result.types.closure(refs)

    def text(shown: int) -> str:
        return render(
            "description.grant.txt.j2",
            gen=result.gen,
            view=view,
            global_name=view.global_name or result.gen.global_name,
            ops=ops[:MAX_LISTED],
            more=ops[MAX_LISTED:],
            declarations=declarations[:shown],
            cut=cut + len(declarations) - shown,
        )

    # The named types go in while the text stays within TEXT_BUDGET, in the order the
    # signatures reach them, so the operations and their parameters are never what is
    # cut; the rest are counted (types.d.ts, or describe(), has each in full).
    room = TEXT_BUDGET - len(text(0)) - _CUT_LINE
    shown = 0
    for d in declarations:
        room -= len(d.name) + len(d.ts) + 10  # "type NAME = TS;\n"
        if room < 0:
            break
        shown += 1
    return text(shown)


#: The size the grant's text is kept to where it can be: the MCP server shows it as its
#: instructions up to this many characters (runtime/mcp/server.py, MAX_INSTRUCTIONS).
TEXT_BUDGET = 8000
#: Room kept for the "(N more type(s) not shown.)" line.
_CUT_LINE = 40
