"""The operator's grants file: which API a run may call, where, and with which key.

The file is the operator's statement of authority, so the loader is strict on purpose:
an unknown field, a duplicate key, trailing data or a wrong type is a refusal, never a
silent default, because a misspelt `alow` that loaded as "no field" would change what a
run may do without anyone noticing. Every refusal is one line starting
`grants: profile "NAME": ` (or `grants: read/parse PATH: ` for the file as a whole).

The key itself is read from the environment variable the profile names, once, at load;
it is held in a `Secret` whose repr and str never show it, so a grant printed in a log,
a traceback or a test failure does not leak it.
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from runtime.broker.approval import DEFAULT_APPROVAL_TIMEOUT_S, MAX_APPROVAL_TIMEOUT_S
from runtime.broker.caps import CapsError, RouteCaps, check_caps, parse_cap_lines
from runtime.broker.quotas import MAX_QUOTA_CALLS, SCOPES, WINDOWS, Quota
from runtime.broker.token_block import (
    BasicKey,
    HeaderKey,
    QueryKey,
    Secret,
    TokenBlock,
    TokenBlockError,
    parse_token,
)
from runtime.errors import GrantsError
from runtime.messages import MSG_NOT_AVAILABLE
from specgen.allow import (
    AllowEntry,
    AllowError,
    parse_entry,
    profile_header_error,
    response_header_patterns,
)
from specgen.files import read_input
from specgen.origins import ANY_PORT, OriginFault, encodable, origin_fault
from specgen.preamble import PreambleError, global_error, read_preamble
from specgen.quoting import json_quoted
from specgen.route_index import RouteIndex
from specgen.routes import (
    GRANT_METHODS,
    METHODS,
    Route,
    RouteError,
    parse_route_line,
    pattern_error,
    route_error,
)

#: Calls a run may make when the profile sets no max_calls.
DEFAULT_MAX_CALLS = 256
#: The highest max_calls an operator may set.
MAX_CALLS_CEILING = 100_000
#: Longest profile name (bytes); also the longest name a run may ask for.
MAX_PROFILE_NAME = 128
#: The most digits a number in the file may have. Every number the file holds is a
#: count far below 10**18; a longer literal is refused while parsing, before Python's
#: int conversion (which refuses past 4,300 digits with a ValueError of its own, and
#: takes time quadratic in the length below that) sees it.
MAX_NUMBER_DIGITS = 18

_PROFILE_NAME = re.compile(r"[A-Za-z0-9._-]+\Z")
_PROFILE_FIELDS = frozenset(
    {
        "base_url",
        "global",
        "allowed_callers",
        "token",
        "allow",
        "catalog",
        "preamble",
        "preamble_file",
        "health_check",
        "max_calls",
        "base_url_overrides",
        "route_max_calls",
        "scopes",
        "headers",
        "response_headers",
        "approve",
        "approval_timeout_s",
        "quotas",
    }
)


@dataclass(frozen=True)
class Profile:
    """One validated, immutable grant profile.

    Frozen and built from tuples so that nothing a run does after selecting it can
    widen it; there is no need for the reference's defensive deep copies.
    """

    name: str
    base_url: str
    global_name: str
    allowed_callers: tuple[str, ...]
    #: The allow entries' routes, in grant order (what caps, the client gate and the
    #: trace key on); `entries` holds the same entries with the parameters they permit.
    allow: tuple[Route, ...]
    catalog: tuple[Route, ...] = ()
    preamble: str = ""
    health_check: Route | None = None
    max_calls: int = DEFAULT_MAX_CALLS
    token_env: str | None = None
    token: Secret | None = field(default=None, repr=False, compare=False)
    #: Origins `--base-url` may aim this grant at instead of base_url (the operator's
    #: own list; `http://127.0.0.1:*` admits any port of a loopback host).
    base_url_overrides: tuple[str, ...] = ()
    #: One per `allow` route, same order: the query and header parameters, pins,
    #: styles and body media types it permits. Empty means bare routes (tests that
    #: build a Profile by hand): each then permits no parameter and a JSON body only.
    entries: tuple[AllowEntry, ...] = ()
    #: The whole token block (header, query, basic or jwt); None means `token`, if set,
    #: is sent the reference's way, `Authorization: Bearer <key>`.
    credential: TokenBlock | None = None
    scopes: tuple[str, ...] = ()
    route_caps: RouteCaps = field(default_factory=RouteCaps)
    #: Headers sent on every call of the profile, as the operator wrote them (name,
    #: value); agent code can neither change nor remove them.
    headers: tuple[tuple[str, str], ...] = ()
    #: Response header names (lower-case, a trailing `*` a prefix) agent code may read
    #: on every route, besides Content-Type and the matched entry's own list.
    response_headers: tuple[str, ...] = ()
    #: Methods whose every call needs a person's approval (the profile's `approve`);
    #: an entry's own `approve` adds its route (see `needs_approval`).
    approve_methods: frozenset[str] = frozenset()
    #: How long a held call waits for the answer (seconds); no answer is a no.
    approval_timeout_s: float = DEFAULT_APPROVAL_TIMEOUT_S
    #: Limits over time, counted across runs and processes (runtime/broker/quotas.py).
    quotas: tuple[Quota, ...] = ()

    def needs_approval(self, route: Route) -> bool:
        """Must a person approve a call that matched `route` before it is sent? Decided
        from the grant alone: nothing the guest sends is consulted."""
        return route.method.upper() in self.approve_methods or route in self._approved_routes

    @functools.cached_property
    def _approved_routes(self) -> frozenset[Route]:
        """The routes of entries marked `approve`, looked up once per call (a grant may
        list a thousand entries; `entry_for` scans them)."""
        return frozenset(e.route for e in self.entries if e.approve)

    @cached_property
    def route_index(self) -> RouteIndex:
        """`allow` indexed once per profile: a call's match costs the same for any
        grant size (specgen/route_index.py)."""
        return RouteIndex(self.allow)

    @cached_property
    def _entries_by_route(self) -> dict[Route, AllowEntry]:
        by_route: dict[Route, AllowEntry] = {}
        for entry in self.entries:
            by_route.setdefault(entry.route, entry)
        return by_route

    def entry_for(self, route: Route) -> AllowEntry:
        """The first allow entry whose route is `route` (a bare entry when none was loaded)."""
        entry = self._entries_by_route.get(route)
        return entry if entry is not None else AllowEntry(route)

    def allows(self, caller: str) -> bool:
        """May `caller` run with this profile? `*` in the list admits any caller id."""
        if not caller or caller == "*":
            return False
        return "*" in self.allowed_callers or caller in self.allowed_callers

    def with_base_url(self, base_url: str) -> Profile:
        """The same grant aimed at another origin (the example's loopback fake).

        The key goes wherever the grant points, so the override must be an origin the
        operator listed in the profile's `base_url_overrides` (or base_url itself), and
        it passes the same origin rules as the file's value.
        """
        err = base_url_error(base_url)
        if err is not None:
            raise GrantsError(f"--base-url: {err}")
        if _origin(base_url) != _origin(self.base_url) and not any(
            _admits(entry, base_url) for entry in self.base_url_overrides
        ):
            raise GrantsError(
                f"--base-url: {json_quoted(base_url)} is not in the base_url_overrides of "
                f"profile {json_quoted(self.name)}"
            )
        return replace(self, base_url=base_url)

    def with_preamble(self, preamble: str) -> Profile:
        """The same grant with another preamble (tests plant a key here to prove the
        confinement checks would find one)."""
        if not encodable(preamble):
            raise GrantsError("host-api grant: Global and Preamble must be valid UTF-8")
        return replace(self, preamble=preamble)


@dataclass(frozen=True)
class Grants:
    """Every profile of one grants file, by name."""

    path: str
    profiles: tuple[Profile, ...]

    def names(self) -> list[str]:
        return sorted(p.name for p in self.profiles)

    def select(self, name: str, caller: str) -> Profile:
        """The profile `name` if `caller` may use it.

        An unknown name and a refused caller get the same message, so a caller cannot
        learn which profile names exist by asking for them.
        """
        if len(name.encode("utf-8", "surrogatepass")) > MAX_PROFILE_NAME:
            raise GrantsError(f"grant_profile exceeds {MAX_PROFILE_NAME} bytes")
        for profile in self.profiles:
            if profile.name == name and profile.allows(caller):
                return profile
        raise GrantsError(MSG_NOT_AVAILABLE.format(name=json_quoted(name)))


# ---------------------------------------------------------------------------------------
# loading


def load(path: str | os.PathLike[str], *, environ: Mapping[str, str] | None = None) -> Grants:
    """Read, parse and validate a grants file; raise GrantsError with one line on any fault.

    `environ` is where token variables are read from (default os.environ); tests pass a
    dict so they never depend on the developer's shell.
    """
    env = os.environ if environ is None else environ
    p = Path(path)
    try:
        raw = read_input(p)  # a FIFO no one writes reads empty, at once: never a hang
    except OSError as e:
        raise GrantsError(f"grants: read {p}: {e.strerror or e}") from None
    if not raw.strip():
        raise GrantsError(f"grants: parse {p}: the file is empty")
    doc = _parse(raw, p)
    if not isinstance(doc, dict):
        raise GrantsError(f"grants: parse {p}: the top level must be an object")
    for key in doc:
        if key != "profiles":
            raise GrantsError(f"grants: parse {p}: unknown field {json_quoted(key)}")
    profiles = doc.get("profiles")
    if not isinstance(profiles, dict):
        raise GrantsError(f'grants: parse {p}: "profiles" must be an object')
    base_dir = Path(os.path.abspath(p)).parent
    loaded = tuple(
        _load_profile(name, body, base_dir, env) for name, body in sorted(profiles.items())
    )
    return Grants(path=str(p), profiles=loaded)


def _parse(raw: bytes, p: Path) -> Any:
    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k, v in items:
            if k in out:
                raise _ParseFault(f"duplicate key {json_quoted(k)}")
            out[k] = v
        return out

    def no_constant(name: str) -> Any:
        raise _ParseFault(f"{name} is not JSON")

    def bounded_int(literal: str) -> int:
        if len(literal.lstrip("-")) > MAX_NUMBER_DIGITS:
            raise _ParseFault(f"a number has more than {MAX_NUMBER_DIGITS} digits")
        return int(literal)

    def bounded_float(literal: str) -> float:
        if len(literal) > MAX_NUMBER_DIGITS + 8:
            raise _ParseFault(f"a number is longer than {MAX_NUMBER_DIGITS + 8} characters")
        return float(literal)

    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise GrantsError(f"grants: parse {p}: not valid UTF-8 at byte {e.start}") from None
    if text.startswith("\ufeff"):
        raise GrantsError(f"grants: parse {p}: the file starts with a byte-order mark")
    try:
        return json.loads(
            text,
            object_pairs_hook=pairs,
            parse_constant=no_constant,
            parse_int=bounded_int,
            parse_float=bounded_float,
        )
    except _ParseFault as e:
        raise GrantsError(f"grants: parse {p}: {e}") from None
    except json.JSONDecodeError as e:
        what = "trailing data after the JSON value" if e.msg == "Extra data" else e.msg
        raise GrantsError(f"grants: parse {p}: {what} (line {e.lineno} column {e.colno})") from None
    except RecursionError:
        raise GrantsError(f"grants: parse {p}: nested too deeply") from None


class _ParseFault(ValueError):
    pass


class _ProfileFault(ValueError):
    """Raised inside one profile; the loader adds the `grants: profile "NAME": ` prefix."""


def _load_profile(name: str, body: Any, base_dir: Path, env: Mapping[str, str]) -> Profile:
    try:
        return _build_profile(name, body, base_dir, env)
    except (_ProfileFault, RouteError, CapsError) as e:
        raise GrantsError(f"grants: profile {json_quoted(name)}: {e}") from None


def _build_profile(name: str, body: Any, base_dir: Path, env: Mapping[str, str]) -> Profile:
    _check_name(name)
    if not isinstance(body, dict):
        raise _ProfileFault("must be an object")
    for key in body:
        if key not in _PROFILE_FIELDS:
            raise _ProfileFault(f"unknown field {json_quoted(key)}")
    # JSON null counts as absent, as in the reference's decoder.
    body = {k: v for k, v in body.items() if v is not None}

    entries = _allow_entries(body)
    allow = tuple(e.route for e in entries)
    catalog = tuple(e.route for e in _allow_entries(body, "catalog"))
    _check_routes(catalog, "catalog ")
    callers = _callers(body)
    preamble = _preamble(body, base_dir)
    credential = _token(body, env)
    health = _health_check(body)
    overrides = _overrides(body)
    cap_lines = parse_cap_lines(body.get("route_max_calls", {}))
    scopes = _string_list(body, "scopes")
    fixed_headers = _fixed_headers(body, credential)
    _check_entry_headers(entries, fixed_headers)
    try:
        readable = response_header_patterns(body.get("response_headers"))
    except AllowError as e:
        raise _ProfileFault(str(e)) from None
    approve_methods = _approve_methods(body.get("approve"))
    approval_timeout_s = _approval_timeout(body.get("approval_timeout_s"))
    quotas = _quotas(body.get("quotas"), allow)
    base_url = _string(body, "base_url")
    global_name = _string(body, "global") or "host"
    max_calls = body.get("max_calls", 0)
    if not isinstance(max_calls, int) or isinstance(max_calls, bool):
        raise _ProfileFault("max_calls must be an integer")

    # Whole-grant validation, in the reference's order.
    if not base_url:
        raise _ProfileFault("host-api grant: BaseURL is required")
    if not (encodable(global_name) and encodable(preamble)):
        raise _ProfileFault("host-api grant: Global and Preamble must be valid UTF-8")
    if not (max_calls == 0 or 1 <= max_calls <= MAX_CALLS_CEILING):
        raise _ProfileFault(
            "host-api grant: MaxCalls must be 0 (the default, 256) or between 1 and 100000"
        )
    err = base_url_error(base_url)
    if err is not None:
        raise _ProfileFault(err)
    for scope in scopes:
        if not scope or any(ch.isspace() for ch in scope):
            raise _ProfileFault(
                f"host-api grant: scope {json_quoted(scope)} must be one non-empty token "
                "without whitespace"
            )
        if scope in ("code:run", "*"):
            raise _ProfileFault(
                f"host-api grant: forbidden scope {json_quoted(scope)} "
                '(a capability token must never carry code:run or "*")'
            )
    if not allow:
        raise _ProfileFault(
            'allow lists no route, so every call would be refused; list at least one "METHOD /path"'
        )
    _check_routes(allow, "host-api grant: ")
    why = global_error(global_name, preamble)
    if why is not None:
        raise _ProfileFault(why)
    route_caps = check_caps(cap_lines, allow)
    if health is not None:
        _check_health(health)

    return Profile(
        name=name,
        base_url=base_url,
        global_name=global_name,
        allowed_callers=callers,
        allow=allow,
        entries=entries,
        catalog=catalog,
        preamble=preamble,
        health_check=health,
        max_calls=max_calls or DEFAULT_MAX_CALLS,
        token_env=credential.env if isinstance(credential, HeaderKey | QueryKey) else None,
        token=credential.secret if isinstance(credential, HeaderKey | QueryKey) else None,
        credential=credential,
        scopes=tuple(scopes),
        route_caps=route_caps,
        base_url_overrides=overrides,
        headers=fixed_headers,
        response_headers=readable,
        approve_methods=approve_methods,
        approval_timeout_s=approval_timeout_s,
        quotas=quotas,
    )


_QUOTA_KEYS = frozenset({"calls", "per", "by", "route"})


def _quotas(raw: Any, allow: tuple[Route, ...]) -> tuple[Quota, ...]:
    """The profile's `quotas`: `{"calls": N, "per": "minute"|"hour"|"day", "by":
    "profile"|"caller", "route": "METHOD /path"}` each, route optional (then every call
    of the profile counts) and, when given, an entry of allow as written there."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise _ProfileFault("quotas must be a list of limits")
    out: list[Quota] = []
    for i, item in enumerate(raw):
        where = f"quotas[{i}]"
        if not isinstance(item, dict):
            raise _ProfileFault(f'{where} must be an object like {{"calls": 20, "per": "minute"}}')
        for key in item:
            if key not in _QUOTA_KEYS:
                raise _ProfileFault(f"{where}: unknown field {json_quoted(key)}")
        calls = item.get("calls")
        if isinstance(calls, bool) or not isinstance(calls, int):
            raise _ProfileFault(f"{where}: calls must be a whole number")
        if not 1 <= calls <= MAX_QUOTA_CALLS:
            raise _ProfileFault(f"{where}: calls must be between 1 and {MAX_QUOTA_CALLS}")
        per = item.get("per")
        if per not in WINDOWS:
            raise _ProfileFault(f"{where}: per must be one of {', '.join(WINDOWS)}")
        by = item.get("by", "profile")
        if by not in SCOPES:
            raise _ProfileFault(f"{where}: by must be one of {', '.join(SCOPES)}")
        route: Route | None = None
        if "route" in item:
            text = item["route"]
            if not isinstance(text, str):
                raise _ProfileFault(f'{where}: route must be a string "METHOD /path"')
            method, _, path = text.strip().partition(" ")
            route = Route(path.strip(), method.upper())
            if route not in allow:
                raise _ProfileFault(f"{where}: route {json_quoted(text)} is not an entry of allow")
        quota = Quota(calls, per, by, route)
        if quota in out:
            raise _ProfileFault(f"{where} repeats an earlier limit")
        out.append(quota)
    return tuple(out)


def _approve_methods(raw: Any) -> frozenset[str]:
    """The profile's `approve`: true (every method), false, or a list of methods."""
    if raw is None or raw is False:
        return frozenset()
    if raw is True:
        return frozenset(GRANT_METHODS)
    if not isinstance(raw, list) or not all(isinstance(m, str) for m in raw):
        raise _ProfileFault('approve must be true, false or a list of methods ("POST")')
    methods = [m.upper() for m in raw]
    for method in methods:
        if method not in GRANT_METHODS:
            raise _ProfileFault(f"approve: {json_quoted(method)} is not a method a grant permits")
    if len(set(methods)) != len(methods):
        raise _ProfileFault("approve lists a method twice")
    return frozenset(methods)


def _approval_timeout(raw: Any) -> float:
    if raw is None:
        return DEFAULT_APPROVAL_TIMEOUT_S
    if isinstance(raw, bool) or not isinstance(raw, int | float):
        raise _ProfileFault("approval_timeout_s must be a number of seconds")
    if not 1 <= raw <= MAX_APPROVAL_TIMEOUT_S:
        raise _ProfileFault(
            f"approval_timeout_s must be between 1 and {MAX_APPROVAL_TIMEOUT_S:g} seconds"
        )
    return float(raw)


def _fixed_headers(
    body: dict[str, Any], credential: TokenBlock | None
) -> tuple[tuple[str, str], ...]:
    """The profile's `headers`: an object of name -> value, checked against the one
    reserved-header list (specgen/allow.py) plus the token block's own header."""
    raw = body.get("headers", {})
    if not isinstance(raw, dict):
        raise _ProfileFault('headers must be an object of "Name": "value" pairs')
    reserved = _credential_header(credential)
    out: list[tuple[str, str]] = []
    seen: set[str] = set()
    for name, value in raw.items():
        err = profile_header_error(name, value, reserved)
        if err is not None:
            raise _ProfileFault(err)
        if name.lower() in seen:
            raise _ProfileFault(
                f"headers {json_quoted(name)} is given twice (names are case-insensitive)"
            )
        seen.add(name.lower())
        out.append((name, value))
    return tuple(out)


def _credential_header(credential: TokenBlock | None) -> tuple[str, ...]:
    """The header the token block sends the key in ((): none, or a query key)."""
    header = getattr(credential, "header", None)
    if isinstance(credential, BasicKey):
        return ("Authorization",)
    return (header,) if isinstance(header, str) else ()


def _check_entry_headers(
    entries: tuple[AllowEntry, ...], fixed: tuple[tuple[str, str], ...]
) -> None:
    """An allow entry may not let agent code send a header the profile fixes."""
    taken = {name.lower(): name for name, _ in fixed}
    for entry in entries:
        for permit in entry.headers:
            if permit.name.lower() in taken:
                raise _ProfileFault(
                    f"allow entry {json_quoted(str(entry.route))} lists header {json_quoted(permit.name)}, "
                    "which the profile's headers set for every call"
                )


def _overrides(body: dict[str, Any]) -> tuple[str, ...]:
    """The profile's base_url_overrides: each an origin like base_url, or a loopback
    origin with port `*` (the example's fake listens on an ephemeral port)."""
    out: list[str] = []
    for entry in _string_list(body, "base_url_overrides"):
        fault = origin_fault(entry, any_port=True)
        if fault is OriginFault.ANY_PORT_NOT_LOOPBACK:
            raise _ProfileFault(
                f"base_url_overrides {json_quoted(entry)}: port {ANY_PORT} is allowed only "
                "for a loopback host"
            )
        if fault is not None:
            said = _BASE_URL_SAYS[fault].format(url=json_quoted(entry))
            raise _ProfileFault(
                f"base_url_overrides {json_quoted(entry)}: {said.split(': ', 1)[1]}"
            )
        if entry in out:
            raise _ProfileFault(f"base_url_overrides contains duplicate {json_quoted(entry)}")
        out.append(entry)
    return tuple(out)


def _origin(url: str) -> tuple[str, str, int | None]:
    """(scheme, host, port) with defaults filled in, for comparing origins."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    port = parts.port or {"http": 80, "https": 443}.get(scheme)
    return scheme, (parts.hostname or "").lower(), port


def _admits(entry: str, url: str) -> bool:
    """Does the override entry (an origin, or a loopback origin with port `*`) admit url?"""
    if entry.endswith(":" + ANY_PORT):
        scheme, host, _ = _origin(entry[: -len(ANY_PORT)] + "1")
        want_scheme, want_host, _ = _origin(url)
        return (scheme, host) == (want_scheme, want_host)
    return _origin(entry) == _origin(url)


def _check_name(name: str) -> None:
    if not name:
        raise _ProfileFault("name must be non-empty")
    if name != name.strip():
        raise _ProfileFault("name must not have surrounding whitespace")
    if len(name.encode("utf-8", "surrogatepass")) > MAX_PROFILE_NAME:
        raise _ProfileFault(f"name exceeds {MAX_PROFILE_NAME} bytes")
    if not _PROFILE_NAME.match(name):
        raise _ProfileFault("name may contain only letters, digits, '.', '_' and '-'")


def _string(body: dict[str, Any], key: str) -> str:
    value = body.get(key, "")
    if not isinstance(value, str):
        raise _ProfileFault(f"{key} must be a string")
    return value


def _string_list(body: dict[str, Any], key: str) -> list[str]:
    value = body.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _ProfileFault(f"{key} must be a list of strings")
    return value


def _allow_entries(body: dict[str, Any], key: str = "allow") -> tuple[AllowEntry, ...]:
    """A list in the allow-entry language (specgen/allow.py, the one parser the
    generator and the checker use too): strings or objects. `catalog` is the same
    language, so allow.json can be pasted in as it is written."""
    raw = body.get(key, [])
    if not isinstance(raw, list) or not all(isinstance(v, str | dict) for v in raw):
        raise _ProfileFault(f'{key} must be a list of "METHOD /path" strings or entry objects')
    out: list[AllowEntry] = []
    for item in raw:
        try:
            entry = parse_entry(item)
        except AllowError as e:
            what = "catalog " if key == "catalog" else ""
            raise _ProfileFault(what + str(e)) from None
        out.append(entry)
    return tuple(out)


def _check_routes(routes: tuple[Route, ...], prefix: str) -> None:
    seen: set[tuple[str, str]] = set()
    for route in routes:
        if not (encodable(route.method) and encodable(route.path)):
            raise _ProfileFault(f"{prefix}route method and path must be valid UTF-8")
        err = route_error(route.method, route.path, methods=GRANT_METHODS, partial=True)
        if err is not None:
            raise _ProfileFault(f"{prefix}{err}")
        key = (route.method, route.path)
        if key in seen:
            raise _ProfileFault(f"{prefix}duplicate route {route.method} {route.path}")
        seen.add(key)


def _callers(body: dict[str, Any]) -> tuple[str, ...]:
    raw = _string_list(body, "allowed_callers")
    if not raw:
        raise _ProfileFault("allowed_callers must name at least one authenticated principal")
    out: list[str] = []
    for entry in raw:
        caller = entry.strip()
        if not caller:
            raise _ProfileFault("allowed_callers contains an empty principal")
        if caller in out:
            raise _ProfileFault(
                f"allowed_callers contains duplicate principal {json_quoted(caller)}"
            )
        out.append(caller)
    return tuple(out)


def _preamble(body: dict[str, Any], base_dir: Path) -> str:
    """The profile's preamble, by the rule specgen/preamble.py keeps for the loader and
    for `check --grants` alike."""
    try:
        return read_preamble(body, base_dir)
    except PreambleError as exc:
        raise _ProfileFault(str(exc)) from None


def _token(body: dict[str, Any], env: Mapping[str, str]) -> TokenBlock | None:
    if "token" not in body:
        return None
    try:
        return parse_token(body["token"], env)
    except TokenBlockError as e:
        raise _ProfileFault(str(e)) from None


def _health_check(body: dict[str, Any]) -> Route | None:
    line = _string(body, "health_check")
    if not line.strip():
        return None
    return parse_route_line(line, "health_check")


def _check_health(route: Route) -> None:
    if not (encodable(route.method) and encodable(route.path)):
        raise _ProfileFault("host-api grant: health_check method and path must be valid UTF-8")
    if route.method != "GET":
        raise _ProfileFault(
            f"host-api grant: health_check must be a GET route, got {json_quoted(route.method)}"
        )
    if "*" in route.path:
        raise _ProfileFault(
            "host-api grant: health_check path must be concrete (no wildcard); "
            "the broker probes an exact URL"
        )
    reason = pattern_error(route.path)
    if reason is not None:
        raise _ProfileFault(f"host-api grant: health_check {json_quoted(route.path)}: {reason}")


#: The loader's words for each origin fault (the reference's texts); `{url}` is quoted.
_BASE_URL_SAYS = {
    OriginFault.EMPTY: "host-api grant: BaseURL is required",
    OriginFault.NOT_A_URL: "host-api grant: BaseURL {url} is not a valid URL with a host",
    OriginFault.SCHEME: "host-api grant: BaseURL scheme must be http or https",
    OriginFault.PLAIN_HTTP: "host-api grant: non-loopback BaseURL must use https",
    OriginFault.NOT_AN_ORIGIN: (
        "host-api grant: BaseURL must be an origin only (scheme and host, with optional port)"
    ),
}


def base_url_error(url: str) -> str | None:
    """Why `url` cannot be a grant's base_url (origin only; https unless loopback)."""
    fault = origin_fault(url)
    return None if fault is None else _BASE_URL_SAYS[fault].format(url=json_quoted(url))


__all__ = [
    "DEFAULT_MAX_CALLS",
    "GRANT_METHODS",
    "MAX_CALLS_CEILING",
    "METHODS",
    "Grants",
    "GrantsError",
    "Profile",
    "Secret",
    "base_url_error",
    "load",
]
