"""What a preamble specgen built says about itself: the global it installs its client on.

A generated preamble (templates/preamble.js.j2) attaches its methods to one global and
returns early when that global is absent, so a grant naming another global loads and
every agent call is a ReferenceError. The runtime's loader refuses that mismatch, and
`check --grants` and `grant init` say it before a run does; all three read the global
here, beside the template that writes it.
"""

from __future__ import annotations

import json
import re

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


__all__ = ["built_for"]
