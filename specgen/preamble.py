"""What a preamble specgen built says about itself: the global it installs its client on.

A generated preamble (templates/preamble.js.j2) attaches its methods to one global and
returns early when that global is absent, so a grant naming another global loads and
every agent call is a ReferenceError. The runtime's loader refuses that mismatch, and
`check --grants` and `grant init` say it before a run does; all three read the global
here, beside the template that writes it.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from specgen.files import read_regular
from specgen.quoting import go_quote

#: The line of a generated preamble that names its global.
_GLOBAL_LINE = re.compile(r'^  const h = globalThis\[("(?:[^"\\\n]|\\.)*")\];$', re.MULTILINE)
#: How far into a preamble the line is looked for: it is near the top.
_SEARCHED = 64 * 1024


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


def preamble_problems(profile: dict[str, Any], grants: Path) -> list[str]:
    """What the loader would refuse in the profile's preamble, read as it reads it: the
    `preamble_file` relative to the grants file's folder, inside it, a regular UTF-8
    file, and a generated preamble built for the profile's global. For `check --grants`
    (a drift) and `grant init` (a note about the draft it wrote). A hand-written
    preamble is only read."""
    rel, text = profile.get("preamble_file"), profile.get("preamble")
    if isinstance(rel, str) and rel:
        shown = go_quote(rel)
        base = Path(os.path.abspath(grants)).parent
        where = Path(os.path.normpath(base / rel))
        if "\x00" in rel or Path(rel).is_absolute() or not where.is_relative_to(base):
            return [f"preamble_file {shown} is not a name inside the grants file's folder"]
        try:
            text = read_regular(where).decode("utf-8")
        except OSError as exc:
            return [f"preamble_file {shown}: {exc.strerror or exc}: {where}"]
        except UnicodeDecodeError:
            return [f"preamble_file {shown} is not UTF-8"]
    if not isinstance(text, str):
        return []
    global_name = profile.get("global") or "host"
    built = built_for(text)
    if built is None or built == global_name:
        return []
    what = f"preamble_file {go_quote(rel)}" if isinstance(rel, str) and rel else "preamble"
    return [
        f"{what} was built for global {go_quote(built)}, and the profile's global is "
        f"{go_quote(str(global_name))}: rebuild it with specgen build SPEC -o DIR --global "
        f"{global_name}, or set global to {go_quote(built)}"
    ]


__all__ = ["built_for", "preamble_problems"]
