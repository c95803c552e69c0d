"""Bounded file input, and atomic file output: a reader never sees half a file, and a
failure loses nothing."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from pathlib import Path
from typing import BinaryIO

#: The most any input (document, grants file, preamble) may hold. Far above the largest
#: published OpenAPI document (Microsoft Graph beta, 47 MB); it exists so that a device
#: or an endless pipe named as an input is refused instead of read until memory runs out.
MAX_INPUT_BYTES = 256 << 20


def read_limited(path: str | os.PathLike[str], limit: int = MAX_INPUT_BYTES) -> bytes:
    """The bytes of `path`; past `limit` an OSError, which every reader already reports."""
    with open(path, "rb") as fh:
        return read_stream_limited(fh, limit)


def read_regular(path: str | os.PathLike[str], limit: int = MAX_INPUT_BYTES) -> bytes:
    """The bytes of `path`, which must be a regular file; else an OSError.

    For inputs named inside another file (a grant's `preamble_file`), where a pipe or a
    device has no business: opening a FIFO blocks until a writer appears, so the name
    is opened without blocking and checked with fstat on the open descriptor before a
    byte is read. A folder is refused as "Is a directory", anything else as not a
    regular file.
    """
    flags = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)
    fd = os.open(path, flags)
    with open(fd, "rb") as fh:
        mode = os.fstat(fh.fileno()).st_mode
        if stat.S_ISDIR(mode):
            raise OSError(errno.EISDIR, os.strerror(errno.EISDIR))
        if not stat.S_ISREG(mode):
            raise OSError(errno.EINVAL, "not a regular file")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fh.fileno(), True)
        return read_stream_limited(fh, limit)


def read_stream_limited(fh: BinaryIO, limit: int = MAX_INPUT_BYTES) -> bytes:
    """Read at most one byte past `limit`, so `/dev/zero` or `yes |` ends at once."""
    data = fh.read(limit + 1)
    if len(data) > limit:
        raise OSError(errno.EFBIG, f"larger than {limit} bytes")
    return data


def write_atomic(path: Path, data: bytes, mode: int = 0o644) -> None:
    """Write to a temporary file beside `path`, then rename it over `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def trusted(path: Path) -> bool:
    """Are the cache entry and its folder ours alone (owned by us, writable by nobody
    else)? The rule of every on-disk cache here (specgen/cache_dir.py).

    A check of the names only: `read_trusted` is what load uses, checking the very
    files it reads."""
    try:
        return _ours(path.stat(), os.getuid()) and trusted_folder(path.parent)
    except OSError:
        return False


def trusted_folder(folder: Path) -> bool:
    """Is the folder ours and writable by nobody else: the folder rule of `trusted`."""
    try:
        return _ours(folder.stat(), os.getuid())
    except OSError:
        return False


def _ours(st: os.stat_result, uid: int, mask: int = 0o022) -> bool:
    return st.st_uid == uid and not st.st_mode & mask


def read_trusted(path: Path, *, private: bool = False) -> bytes | None:
    """The entry's bytes when it and its folder are ours alone, else None.

    The checks are made on the open folder and the open entry (fstat), and the entry is
    opened inside that folder without following a link: a folder or entry that someone
    swaps between the check and the read (the folder a link in a shared place, say) is
    never what gets read. Where the system cannot open relative to a folder, the names
    are checked instead.

    `private`: the entry must also be unreadable by anyone else (mode 0600 or
    tighter), the rule of a secret such as the caches' MAC key.
    """
    mask = 0o077 if private else 0o022
    if os.open not in os.supports_dir_fd or not hasattr(os, "O_NOFOLLOW"):
        try:
            if not trusted(path) or (private and path.stat().st_mode & mask):
                return None
            return path.read_bytes()
        except OSError:
            return None
    uid = os.getuid()
    flags = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)
    try:
        folder = os.open(path.parent, flags | os.O_DIRECTORY)
    except OSError:
        return None
    try:
        if not _ours(os.fstat(folder), uid):
            return None
        # O_NONBLOCK: opening a FIFO planted under the entry's name (a restored cache can
        # hold one) would wait forever for a writer; so it returns at once and the
        # regular-file check below refuses it. A regular file reads as it always does.
        fd = os.open(path.name, flags | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=folder)
        with open(fd, "rb") as entry:
            st = os.fstat(entry.fileno())
            if not stat.S_ISREG(st.st_mode) or not _ours(st, uid, mask):
                return None
            return entry.read()
    except OSError:
        return None
    finally:
        os.close(folder)
