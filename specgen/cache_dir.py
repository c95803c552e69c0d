"""The one cache folder of this project: compiled templates and the compiled sandbox engine.

Both caches hold code the project runs (`specgen/template_cache.py`,
`runtime/sandbox/engine.py`), under the same ownership and permission rules, so they
live in one folder that one setting moves.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

#: Overrides the cache folder.
CACHE_ENV = "PLIMSOLL_CACHE_DIR"
_APP = "plimsoll-specgen"


def cache_dir() -> Path:
    """$PLIMSOLL_CACHE_DIR, else platformdirs' user cache folder for this app.

    Computed here on Linux (XDG, as platformdirs does; a test holds the two equal)
    because importing platformdirs costs a small build a few milliseconds; other
    systems ask platformdirs. The XDG spec has a relative XDG_CACHE_HOME ignored, as
    platformdirs does: taken as given it put both caches, code this project loads and
    runs, under whatever folder the command was started in. A home folder that is not
    an absolute path is left to platformdirs as well.
    """
    override = os.environ.get(CACHE_ENV)
    if override:
        return Path(override)
    if sys.platform.startswith("linux"):
        base = os.environ.get("XDG_CACHE_HOME", "")
        if not os.path.isabs(base):
            base = os.path.expanduser("~/.cache")
        if os.path.isabs(base):
            return Path(base) / _APP
    import platformdirs

    return Path(platformdirs.user_cache_dir(_APP, appauthor=False))
