"""A grant's preamble as the runtime's loader reads it, and the global it was built for.

A generated preamble (templates/preamble.js.j2) attaches its methods to one global and
returns early when that global is absent, so a grant naming another global loads and
every agent call is a ReferenceError. The rules for reading a profile's preamble (inline
or from a file inside the grants file's folder) and for its global live here, beside the
template that writes the preamble: the loader (runtime/broker/grants.py) applies them
when a run starts, and `check --grants` and `grant init` apply the same ones, so they say
what the loader would refuse before a run does, in the loader's words.
"""

from __future__ import annotations

import errno
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from specgen.files import read_regular
from specgen.naming import global_name_error
from specgen.quoting import json_quoted

#: The line of a generated preamble that names its global.
_GLOBAL_LINE = re.compile(r'^  const h = globalThis\[("(?:[^"\\\n]|\\.)*")\];$', re.MULTILINE)
#: How far into a preamble the line is looked for: it is near the top.
_SEARCHED = 64 * 1024


class PreambleError(ValueError):
    """A profile's preamble or global the loader refuses; str() is the one line."""


def built_for(preamble: str) -> str | None:
    """The global a generated preamble was built for; None for a hand-written one."""
    match = _GLOBAL_LINE.search(preamble, 0, _SEARCHED)
    if match is None:
        return None
    try:
        name = json.loads(match.group(1))
    except ValueError:
        return None
    return name if isinstance(name, str) else None


def _string(body: Mapping[str, Any], key: str) -> str:
    value = body.get(key, "")
    if not isinstance(value, str):
        raise PreambleError(f"{key} must be a string")
    return value


def escapes(rel: str, base_dir: Path | None) -> bool:
    """Whether the name `rel` leaves the folder `base_dir` (absolute), lexically, as the
    loader decides before it looks at the disk. With no folder known (a draft printed
    on stdout), whether its `..` leaves its own starting point."""
    if Path(rel).is_absolute():
        return True
    if base_dir is None:
        parts = Path(os.path.normpath(rel)).parts
        return bool(parts) and parts[0] == ".."
    return not Path(os.path.normpath(base_dir / rel)).is_relative_to(base_dir)


def read_preamble(body: Mapping[str, Any], base_dir: Path) -> str:
    """The profile's preamble: `preamble` inline, or the UTF-8 text of `preamble_file`,
    a regular file named relative to `base_dir` (the grants file's folder) that stays
    inside it, by its name and through any symlink; "" for none. PreambleError else."""
    inline = _string(body, "preamble")
    rel = _string(body, "preamble_file")
    if "preamble" in body and "preamble_file" in body:
        raise PreambleError("set either preamble or preamble_file, not both")
    if not rel:
        return inline
    if "\x00" in rel:
        raise PreambleError(f"read preamble_file: the name contains a NUL byte: {json_quoted(rel)}")
    if escapes(rel, base_dir):
        raise PreambleError(f"preamble_file {json_quoted(rel)} escapes the grants directory")
    candidate = Path(os.path.normpath(base_dir / rel))
    try:
        resolved = candidate.resolve(strict=True)
        real_dir = base_dir.resolve(strict=True)
    except OSError as e:
        # a relative name is read from the grants file's folder, not the working one
        raise PreambleError(
            f"read preamble_file: {e.strerror or e}: {rel} (in the grants file's folder, "
            f"{json_quoted(str(base_dir))})"
        ) from None
    except RuntimeError:
        # Python before 3.13 turns a symlink loop (ELOOP) into RuntimeError here.
        raise PreambleError(f"read preamble_file: {os.strerror(errno.ELOOP)}: {rel}") from None
    if not resolved.is_relative_to(real_dir):
        raise PreambleError(
            f"preamble_file {json_quoted(rel)} resolves outside the grants directory"
        )
    try:
        data = read_regular(resolved)
    except OSError as e:
        raise PreambleError(f"read preamble_file: {e.strerror or e}: {rel}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise PreambleError("host-api grant: Global and Preamble must be valid UTF-8") from None


def global_error(global_name: str, preamble: str) -> str | None:
    """Why `global_name` cannot be the profile's global with this preamble: not a name a
    client can be installed on, or not the one a generated preamble was built for (a
    hand-written preamble is not checked). None when it can."""
    why = global_name_error(global_name)
    if why is not None:  # the client is installed as globalThis[NAME], called as NAME.x()
        return f"global {json_quoted(global_name)} {why}"
    built = built_for(preamble)
    if built is not None and built != global_name:
        return (
            f"global {json_quoted(global_name)} differs from the preamble's global "
            f"{json_quoted(built)}, so the preamble would install nothing; set global to "
            f"{json_quoted(built)} or rebuild the preamble with --global {json_quoted(global_name)}"
        )
    return None


def preamble_problems(profile: Mapping[str, Any], grants: Path) -> list[str]:
    """What the loader would refuse in the profile's preamble and global, in its words:
    for `check --grants` (a drift line) and `grant init` (a note about its draft)."""
    base_dir = Path(os.path.abspath(grants)).parent
    try:
        preamble = read_preamble(profile, base_dir)
        global_name = _string(profile, "global") or "host"
    except PreambleError as exc:
        return [str(exc)]
    why = global_error(global_name, preamble)
    return [] if why is None else [why]


__all__ = [
    "PreambleError",
    "built_for",
    "escapes",
    "global_error",
    "preamble_problems",
    "read_preamble",
]
