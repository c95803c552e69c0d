"""The one cache folder of this project: compiled templates, the compiled sandbox engine
and what `specgen mcp` derived at its last start.

Each cache holds what the project runs or unpickles (`specgen/template_cache.py`,
`runtime/sandbox/engine.py`, `runtime/mcp/start_cache.py`), under the same ownership
and permission rules, so they live in one folder that one setting moves.

Ownership is not enough to trust an entry: files from a `git clone`, an unpacked
archive or a restored CI cache belong to the user with mode 0644, and what an entry
holds runs on load (Jinja2 unpickles a bytecode entry before its own checksum is seen;
wasmtime maps a compiled module's native code). So every entry is sealed with
HMAC-SHA256 under a per-user secret, `cache.key` in the same folder, made from
os.urandom when first needed and never trusted unless it is ours and readable by us
alone (0600). A planted entry cannot carry a valid seal without that secret, and it is
checked before a byte of the entry is interpreted. The seal covers the entry's file
name too, so one valid entry cannot stand in for another.
"""

from __future__ import annotations

import contextlib
import hmac
import os
import sys
from pathlib import Path

#: The MAC key's file, in the cache folder.
SECRET_NAME = "cache.key"
_SECRET_BYTES = 32
_MAC_BYTES = 32

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
    an absolute path is left to platformdirs as well. A relative $PLIMSOLL_CACHE_DIR
    is ignored for the same reason: it would resolve against the working folder, a
    checkout whose files anyone who wrote the repository chose.
    """
    override = os.environ.get(CACHE_ENV)
    if override and os.path.isabs(override):
        return Path(override)
    if sys.platform.startswith("linux"):
        base = os.environ.get("XDG_CACHE_HOME", "")
        if not os.path.isabs(base):
            base = os.path.expanduser("~/.cache")
        if os.path.isabs(base):
            return Path(base) / _APP
    import platformdirs

    return Path(platformdirs.user_cache_dir(_APP, appauthor=False))


def seal(path: Path, body: bytes) -> bytes | None:
    """`body` followed by its MAC, ready to write at `path`; None when no secret is
    available (the folder is not ours, or cannot be written): then nothing is cached."""
    key = _secret(path.parent, create=True)
    if key is None:
        return None
    return body + _mac(key, path.name, body)


def unseal(path: Path, blob: bytes) -> bytes | None:
    """The body of an entry read from `path` if its MAC is right, else None."""
    if len(blob) <= _MAC_BYTES:
        return None
    key = _secret(path.parent, create=False)
    if key is None:
        return None
    body, mac = blob[:-_MAC_BYTES], blob[-_MAC_BYTES:]
    if not hmac.compare_digest(mac, _mac(key, path.name, body)):
        return None
    return body


def read_sealed(path: Path) -> bytes | None:
    """The body of the entry at `path` when it and its folder are ours alone and its MAC
    is right, else None: what every cache here checks before it interprets a byte."""
    from specgen.files import read_trusted

    blob = read_trusted(path)
    return unseal(path, blob) if blob is not None else None


def write_sealed(path: Path, body: bytes) -> None:
    """Write `body` sealed at `path`, atomically and readable by this user alone. Best
    effort: a read-only or full cache folder costs the next reader a rebuild, nothing
    more, so nothing is raised."""
    from specgen.files import write_atomic

    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        sealed = seal(path, body)
        if sealed is not None:
            write_atomic(path, sealed, mode=0o600)
    except OSError:
        pass


def keep_newest(folder: Path, pattern: str, count: int) -> None:
    """Remove all but the `count` most recently written entries matching `pattern`:
    entries keyed by a path (a checkout, a document in a temporary folder) would
    otherwise stay for every path there ever was. Best effort, as writing is."""
    try:
        entries = [(p.lstat().st_mtime_ns, p) for p in folder.glob(pattern)]
        for _, old in sorted(entries, reverse=True)[count:]:
            old.unlink(missing_ok=True)
    except OSError:
        pass  # another process removed it first, or the folder went: nothing to do


def _mac(key: bytes, name: str, body: bytes) -> bytes:
    return hmac.digest(key, name.encode("utf-8", "surrogateescape") + b"\0" + body, "sha256")


def _secret(folder: Path, *, create: bool) -> bytes | None:
    """The folder's MAC key if it is ours alone; with `create`, a new one replaces a
    missing or untrusted key file (the folder itself must be ours, see read_trusted)."""
    from specgen.files import read_trusted, trusted_folder

    path = folder / SECRET_NAME
    key = read_trusted(path, private=True)
    if key is not None and len(key) == _SECRET_BYTES:
        return key
    if not create:
        return None
    import tempfile

    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        if not trusted_folder(folder):
            # A folder others may write (a cache folder set to /tmp): no entry in it
            # would ever be read, so no secret is left there either.
            return None
        fd, tmp = tempfile.mkstemp(prefix=f".{SECRET_NAME}.", dir=folder)  # mode 0600
    except OSError:
        return None
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(os.urandom(_SECRET_BYTES))
            fh.flush()
            os.fsync(fh.fileno())
        try:
            os.link(tmp, path)  # never over a key another process just made
        except FileExistsError:
            there = read_trusted(path, private=True)
            if there is None or len(there) != _SECRET_BYTES:
                os.replace(tmp, path)  # the one there is not ours alone: replaced
    except OSError:
        return None
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
    # What is used is what the file holds now, read under the same rules.
    key = read_trusted(path, private=True)
    return key if key is not None and len(key) == _SECRET_BYTES else None
