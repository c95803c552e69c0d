"""Drift checks for CI: committed files, and a grant's catalog, against the document.

Generated files that are edited by hand, or a grant whose catalog was pasted from an
older document, silently stop describing the API; these checks make that a red build
with a diff and the command that fixes it.
"""

from __future__ import annotations

import difflib
import errno
import os
import shlex
import stat
from pathlib import Path
from typing import Any

import orjson

from specgen.allow import (
    AllowEntry,
    AllowError,
    declaration_problems,
    parse_entry,
    profile_header_error,
    response_header_patterns,
)
from specgen.build import Options, Result
from specgen.errors import SpecError
from specgen.files import read_regular
from specgen.operations import style_of
from specgen.params import Parameter
from specgen.preamble import preamble_problems
from specgen.quoting import go_quote, visible
from specgen.render import FILES
from specgen.routes import Route, RouteError, parse_route_line


def regenerate_command(spec: str, outdir: str, options: Options) -> str:
    words = ["specgen", "build", spec, "-o", outdir]
    if options.global_name != "host":
        words += ["--global", options.global_name]
    if options.server is not None:
        words += ["--server", options.server]
    if options.strict:
        words.append("--strict")
    if not options.validate:
        words.append("--no-validate")
    if options.compat:
        words += ["--compat", options.compat]
    return " ".join(shlex.quote(w) for w in words)


def compare(result: Result, outdir: Path) -> dict[str, str]:
    """File name -> unified diff, for every file `build` would write differently."""
    stale: dict[str, str] = {}
    for name in FILES:
        path = outdir / name
        want = result.files.get(name)
        have = _committed(path, len((want or "").encode()))
        if have == want:
            continue
        diff = difflib.unified_diff(
            _text_lines(have or ""),
            _text_lines(want or ""),
            fromfile=f"{path} (committed)" if have is not None else f"{path} (missing)",
            tofile=f"{path} (from the document)"
            if want is not None
            else f"{path} (should not exist)",
        )
        stale[name] = "".join(_shown(line) for line in diff)
    return stale


#: How much larger than what `build` writes a committed file may be and still be read
#: and diffed: past it, the file cannot be the build's and a diff of it would cost time
#: and memory in its size (a link to /dev/zero grew to gigabytes), so it is refused.
_SLACK_BYTES = 1 << 20


def _committed(path: Path, want_bytes: int) -> str | None:
    """The committed file's text, or None when there is none.

    Only a regular file is read, bounded by twice what build writes plus a megabyte;
    anything else is refused in one line without being opened for reading: a FIFO
    would wait forever for a writer, a device (/dev/zero) never ends, and a symbolic
    link is never what build writes (it may point at a secret the diff would print
    into a CI log).
    """
    try:
        kind = _kind(os.lstat(path).st_mode)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise SpecError(f"specgen: cannot read {path}: {exc.strerror or exc}") from None
    if kind:
        raise SpecError(f"specgen: cannot read {path}: {kind}, not the regular file build writes")
    limit = 2 * want_bytes + _SLACK_BYTES
    try:
        return read_regular(path, limit, follow_links=False).decode("utf-8")
    except OSError as exc:
        why = exc.strerror or str(exc)
        if exc.errno == errno.EFBIG:
            why = f"larger than {limit} bytes (build writes {want_bytes}), so not compared"
        raise SpecError(f"specgen: cannot read {path}: {why}") from None
    except UnicodeDecodeError as exc:
        raise SpecError(f"specgen: cannot read {path}: {exc}") from None


_KINDS = (
    (stat.S_ISLNK, "a symbolic link"),
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _kind(mode: int) -> str:
    """What a file that is not a regular file is, for a message; "" for a regular one."""
    if stat.S_ISREG(mode):
        return ""
    return next((what for test, what in _KINDS if test(mode)), "not a regular file")


def _text_lines(text: str) -> list[str]:
    """`text` cut after each newline only: a carriage return, form feed or U+2028 is
    part of its line, where it shows escaped, not a line break of the diff."""
    lines = [line + "\n" for line in text.split("\n")]
    lines[-1] = lines[-1][:-1]
    return lines if lines[-1] else lines[:-1]


def _shown(line: str) -> str:
    """One line of the diff as a terminal may show it: the committed file is anyone's
    text, so a control or invisible character in it (an escape that retitles the
    terminal, a NUL) is written as a visible escape; ordinary text is unchanged. A last
    line without a newline is marked as diff(1) marks it."""
    if line.endswith("\n"):
        return visible(line[:-1]) + "\n"
    return visible(line) + "\n\\ No newline at end of file\n"


def diff_dir(result: Result, outdir: Path) -> list[str]:
    """A unified diff for every file in `outdir` that `build` would write differently."""
    return list(compare(result, outdir).values())


def _profile(grants: Path, name: str) -> dict[str, Any]:
    try:
        data = orjson.loads(read_regular(grants))
    except OSError as exc:
        raise SpecError(f"specgen: grants {grants}: cannot read: {exc.strerror or exc}") from None
    except orjson.JSONDecodeError as exc:
        raise SpecError(f"specgen: grants {grants}: invalid JSON: {exc}") from None
    profiles = data.get("profiles") if isinstance(data, dict) else None
    profile = profiles.get(name) if isinstance(profiles, dict) else None
    if not isinstance(profile, dict):
        raise SpecError(f'specgen: grants {grants}: no profile "{name}"')
    return profile


def _lines(profile: dict[str, Any], key: str, name: str, what: str) -> list[Route]:
    raw = profile.get(key) or []
    if not isinstance(raw, list) or not all(isinstance(x, str) for x in raw):
        raise SpecError(
            f'specgen: profile "{name}": {key} must be a list of "METHOD /path" strings'
        )
    try:
        return [parse_route_line(line, what) for line in raw]
    except RouteError as exc:
        raise SpecError(f'specgen: profile "{name}": {exc}') from None


def _entries(profile: dict[str, Any], key: str, name: str) -> list[AllowEntry]:
    """A profile's list in the allow-entry language (strings, or objects naming headers)."""
    raw = profile.get(key) or []
    if not isinstance(raw, list):
        raise SpecError(f'specgen: profile "{name}": {key} must be a list of allow entries')
    try:
        return [parse_entry(item) for item in raw]
    except AllowError as exc:
        raise SpecError(f'specgen: profile "{name}": {key}: {exc}') from None


def _parameter_drift(result: Result, allow: list[AllowEntry], name: str) -> list[str]:
    """Allow entries naming a query or header parameter the document does not declare,
    pinning one to a value its schema refuses, or serialising one in another style."""
    problems: list[str] = []
    for entry in allow:
        query: list[Parameter] = []
        headers: list[Parameter] = []
        for route, q, h in result.gen.declared:
            if route.covers(entry.route):
                query += q
                headers += h
        found = declaration_problems(entry, query, headers) + _style_drift(entry, query, headers)
        found += _encoding_drift(entry, result.gen.catalog)
        problems += [f'profile "{name}": {p}' for p in found]
    return problems


def _encoding_drift(entry: AllowEntry, catalog: tuple[AllowEntry, ...]) -> list[str]:
    """Form fields whose written `encoding` is not the document's: the broker would send
    `metadata[plan]=pro` to an API that reads `metadata=plan,pro`, or the reverse. A field
    the entry does not name travels in the default `form` style, so only a written
    encoding is compared (the document's default for a field it names none for: form)."""
    if not entry.encoding:
        return []
    declared: dict[str, str] = {}
    for record in catalog:
        if record.route.covers(entry.route):
            for field_name, style in record.encoding:
                declared.setdefault(field_name, style)
    return [
        f'allow entry "{entry.route}" encodes form field {go_quote(field_name)} as '
        f"{go_quote(style)}; the document declares {go_quote(declared.get(field_name, 'form'))}"
        for field_name, style in entry.encoding
        if style != declared.get(field_name, "form")
    ]


def _style_drift(entry: AllowEntry, query: list[Parameter], headers: list[Parameter]) -> list[str]:
    """Permits whose `style` is not how the document serialises the parameter: the broker
    would send `ids=1&ids=2` to an API that reads `ids=1,2`. A permit without a style
    sends one value, which any declared style reads, so only a written style is compared."""
    q = {p.name: p for p in query}
    h = {p.name.lower(): p for p in headers}
    problems: list[str] = []
    for permit, declared, kind in (
        *((pm, q.get(pm.name), "query parameter") for pm in entry.query),
        *((pm, h.get(pm.name.lower()), "header") for pm in entry.headers),
    ):
        if declared is None or not permit.style:
            continue  # an undeclared name is declaration_problems' line
        want = style_of(declared)
        if permit.style != want:
            says = go_quote(want) if want else "one value"
            problems.append(
                f'allow entry "{entry.route}" sends {kind} {go_quote(permit.name)} in style '
                f"{go_quote(permit.style)}; the document declares {says}"
            )
    return problems


def grant_drift(result: Result, grants: Path, name: str) -> list[str]:
    """What makes the profile disagree with the document, one line per route; empty when
    it agrees.

    The catalog, when the profile has one, must be the document's route list exactly
    (same entries, same order): `+` a route the document has and the catalog lacks, `-`
    one the catalog has and the document does not, `~` a catalog entry that is only an
    instance of a document route (the catalog should hold the route itself). Every allow
    entry must be an instance of one of the document's routes: a grant may narrow a `*`
    to a literal, never reach a route the document does not have.
    """
    profile = _profile(grants, name)
    problems: list[str] = []
    allow_entries: list[AllowEntry] = []
    catalog: list[Route] | None = None
    has_catalog = profile.get("catalog") is not None
    if result.gen.declared:  # the default build: entries may name parameters
        allow_entries = _entries(profile, "allow", name)
        allow = [e.route for e in allow_entries]
        if has_catalog:
            catalog_entries = _entries(profile, "catalog", name)
            catalog = [e.route for e in catalog_entries]
            if catalog == list(result.gen.allow) and catalog_entries != list(result.gen.catalog):
                problems.append(
                    "catalog: names other query or header parameters than the document "
                    "declares (paste allow.json again)"
                )
    else:
        allow = _lines(profile, "allow", name, "allow entry")
        if has_catalog:
            catalog = _lines(profile, "catalog", name, "catalog allow entry")
    routes = list(result.gen.allow)
    if catalog is not None:
        problems += catalog_drift(catalog, routes)
    for entry in allow:
        if not any(route.covers(entry) for route in routes):
            problems.append(f"allow: {entry} is not an instance of any route in the document")
    return (
        problems
        + _parameter_drift(result, allow_entries, name)
        + _header_problems(profile)
        + preamble_problems(profile, grants)
    )


def _header_problems(profile: dict[str, Any]) -> list[str]:
    """The profile's own `headers` and `response_headers`, by the rules the runtime's
    loader applies (specgen/allow.py holds them for both). They are the operator's, not
    the document's: a profile header is never compared with the declared parameters, so
    a header every call needs (`X-GitHub-Api-Version`) is no drift."""
    problems: list[str] = []
    headers = profile.get("headers")
    if headers is not None and not isinstance(headers, dict):
        problems.append('headers must be an object of "Name": "value" pairs')
    for header, value in (headers or {}).items() if isinstance(headers, dict) else ():
        err = profile_header_error(header, value)
        if err is not None:
            problems.append(err)
    try:
        response_header_patterns(profile.get("response_headers"))
    except AllowError as exc:
        problems.append(str(exc))
    return problems


def catalog_drift(catalog: list[Route], routes: list[Route]) -> list[str]:
    """One line per catalog entry that differs from the document's route list."""
    if catalog == routes:
        return []
    in_doc, in_catalog = set(routes), set(catalog)
    lines: list[str] = []
    changed: set[Route] = set()
    for entry in catalog:
        if entry in in_doc:
            continue
        wider = [r for r in routes if r not in in_catalog and r.covers(entry)]
        if wider:
            changed.update(wider)
            lines.append(f"catalog: ~ {entry} (the document has {wider[0]})")
        else:
            lines.append(f"catalog: - {entry} (not in the document)")
    lines += [
        f"catalog: + {r} (in the document, not in the catalog)"
        for r in routes
        if r not in in_catalog and r not in changed
    ]
    if not lines:
        dups = len(catalog) - len(in_catalog)
        what = f"with {dups} duplicate(s)" if dups else "in another order"
        lines.append(f"catalog: lists the document's routes {what} (emit catalog writes it)")
    return lines
