"""Drift checks for CI: committed files, and a grant's catalog, against the document.

Generated files that are edited by hand, or a grant whose catalog was pasted from an
older document, silently stop describing the API; these checks make that a red build
with a diff and the command that fixes it.
"""

from __future__ import annotations

import difflib
import shlex
from pathlib import Path
from typing import Any

import orjson

from specgen.allow import AllowEntry, AllowError, declaration_problems, parse_entry
from specgen.build import Options, Result
from specgen.errors import SpecError
from specgen.files import read_limited
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
        try:
            have = path.read_text(encoding="utf-8") if path.exists() else None
        except (OSError, UnicodeDecodeError) as exc:
            raise SpecError(f"specgen: cannot read {path}: {exc}") from None
        if have == want:
            continue
        diff = difflib.unified_diff(
            (have or "").splitlines(keepends=True),
            (want or "").splitlines(keepends=True),
            fromfile=f"{path} (committed)" if have is not None else f"{path} (missing)",
            tofile=f"{path} (from the document)"
            if want is not None
            else f"{path} (should not exist)",
        )
        stale[name] = "".join(line if line.endswith("\n") else line + "\n" for line in diff)
    return stale


def diff_dir(result: Result, outdir: Path) -> list[str]:
    """A unified diff for every file in `outdir` that `build` would write differently."""
    return list(compare(result, outdir).values())


def _profile(grants: Path, name: str) -> dict[str, Any]:
    try:
        data = orjson.loads(read_limited(grants))
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
    """Allow entries naming a query or header parameter the document does not declare."""
    problems: list[str] = []
    for entry in allow:
        query, headers = [], []
        for route, q, h in result.gen.declared:
            if route.covers(entry.route):
                query += q
                headers += h
        problems += [f'profile "{name}": {p}' for p in declaration_problems(entry, query, headers)]
    return problems


def grant_drift(result: Result, grants: Path, name: str) -> list[str]:
    """What makes the profile disagree with the document; empty when it agrees.

    The catalog must be the document's route list exactly (same entries, same order),
    and every allow entry must be an instance of one of those routes: a grant may narrow
    a `*` to a literal, never reach a route the document does not have.
    """
    profile = _profile(grants, name)
    problems: list[str] = []
    allow_entries: list[AllowEntry] = []
    if result.gen.declared:  # the default build: entries may name parameters
        catalog_entries = _entries(profile, "catalog", name)
        allow_entries = _entries(profile, "allow", name)
        catalog = [e.route for e in catalog_entries]
        allow = [e.route for e in allow_entries]
        if catalog == list(result.gen.allow) and catalog_entries != list(result.gen.catalog):
            problems.append(
                f'profile "{name}": catalog names other query or header parameters than the '
                "document declares (paste allow.json again)"
            )
    else:
        catalog = _lines(profile, "catalog", name, "catalog allow entry")
        allow = _lines(profile, "allow", name, "allow entry")
    routes = list(result.gen.allow)
    if catalog != routes:
        missing = [str(r) for r in routes if r not in catalog]
        extra = [str(r) for r in catalog if r not in routes]
        if missing:
            problems.append(f'profile "{name}": catalog lacks {", ".join(missing)}')
        if extra:
            problems.append(
                f'profile "{name}": catalog has routes the document does not: {", ".join(extra)}'
            )
        if not missing and not extra:
            problems.append(
                f'profile "{name}": catalog lists the document\'s routes in another order or with duplicates'
            )
    for entry in allow:
        if not any(route.covers(entry) for route in routes):
            problems.append(
                f'profile "{name}": allow entry "{entry}" is not an instance of any route in the document'
            )
    return problems + _parameter_drift(result, allow_entries, name)
