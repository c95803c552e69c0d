"""Bounded file input, and atomic file output: a reader never sees half a file, and a
failure loses nothing."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from collections.abc import Iterator
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


def read_input(path: str | os.PathLike[str], limit: int = MAX_INPUT_BYTES) -> bytes:
    """The bytes of an input named on the command line: a regular file, or a pipe, as
    `<(curl ...)` names one (`/dev/fd/63`); else an OSError.

    A pipe is opened without blocking, so a FIFO that no process writes to never holds
    the command: its read then ends at once, empty, and the caller refuses an empty
    input as it would an empty file. A device or a folder is refused as `read_regular`
    refuses it, before it is opened.
    """
    mode = os.stat(path).st_mode
    if not stat.S_ISFIFO(mode):
        return read_regular(path, limit)
    flags = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)
    fd = os.open(path, flags)
    with open(fd, "rb") as fh:
        if not stat.S_ISFIFO(os.fstat(fh.fileno()).st_mode):
            raise OSError(errno.EINVAL, "not a regular file or a pipe")
        os.set_blocking(fh.fileno(), True)
        return read_stream_limited(fh, limit)


def read_regular(
    path: str | os.PathLike[str], limit: int = MAX_INPUT_BYTES, *, follow_links: bool = True
) -> bytes:
    """The bytes of `path`, which must be a regular file; else an OSError.

    For inputs where a pipe or a device has no business (a grant's `preamble_file`, a
    document or grants file named on the command line). The name is looked at (stat)
    before it is opened: opening a FIFO blocks until a writer appears, and opening some
    devices does something (a tape rewinds, a watchdog starts). It is then opened
    without blocking and checked again with fstat on the open descriptor, so a name
    swapped in between is refused too, before a byte is read. A folder is refused as
    "Is a directory", anything else as not a regular file. `follow_links` False: a
    symbolic link as the last part of the name is refused as well.
    """
    _require_regular((os.stat if follow_links else os.lstat)(path).st_mode)
    flags = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)
    if not follow_links:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags)
    with open(fd, "rb") as fh:
        _require_regular(os.fstat(fh.fileno()).st_mode)
        if hasattr(os, "set_blocking"):
            os.set_blocking(fh.fileno(), True)
        return read_stream_limited(fh, limit)


def _require_regular(mode: int) -> None:
    if stat.S_ISDIR(mode):
        raise OSError(errno.EISDIR, os.strerror(errno.EISDIR))
    if not stat.S_ISREG(mode):
        raise OSError(errno.EINVAL, "not a regular file")


def read_stream_limited(fh: BinaryIO, limit: int = MAX_INPUT_BYTES) -> bytes:
    """Read at most one byte past `limit`, so `/dev/zero` or `yes |` ends at once."""
    data = fh.read(limit + 1)
    if len(data) > limit:
        raise OSError(errno.EFBIG, f"larger than {limit} bytes")
    return data


def write_atomic(path: Path, data: bytes, mode: int = 0o644) -> None:
    """Write to a temporary file beside `path`, then rename it over `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _write_temporary(path, data, mode)
    try:
        os.replace(tmp, path)
    except BaseException:
        _discard([tmp])
        raise


def write_set(folder: Path, files: dict[str, bytes], mode: int = 0o644) -> None:
    """Replace the files `files` names in `folder` as one set, as far as a folder allows.

    Files that belong together (a build's allow.json and the preamble.js made from the
    same document) must not end up half old, half new: every file is first written to
    a temporary file in `folder`, and only when all are written are they renamed into
    place. A failure while writing (a full disk, a name taken by a folder) leaves the old
    set as it was and removes the temporaries. A rename within one folder needs no
    space and no new permission, so the window where a failure leaves a mix is only the
    rename loop itself. Every OSError names the file it is about (`filename`).
    """
    folder.mkdir(parents=True, exist_ok=True)
    targets = [folder / name for name in files]
    for target in targets:
        _check_replaceable(target)
    temporaries: list[str] = []
    try:
        for target, data in zip(targets, files.values(), strict=True):
            with _naming(target):
                temporaries.append(_write_temporary(target, data, mode))
        for target, tmp in zip(targets, list(temporaries), strict=True):
            with _naming(target):
                os.replace(tmp, target)
            temporaries.remove(tmp)
    except BaseException:
        _discard(temporaries)
        raise


def _check_replaceable(target: Path) -> None:
    """A folder under a file's name cannot be renamed over: refuse it before anything is
    written, not at its rename, when the files renamed before it would already be new."""
    with _naming(target):
        try:
            mode = os.lstat(target).st_mode
        except FileNotFoundError:
            return
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR))


@contextlib.contextmanager
def _naming(target: Path) -> Iterator[None]:
    """An OSError inside names `target`, not the temporary file a message would show."""
    try:
        yield
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror or str(exc), str(target)) from None


def _write_temporary(path: Path, data: bytes, mode: int) -> str:
    """`data` in a new temporary file beside `path`, on disk (fsync), with `mode`."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
    except BaseException:
        _discard([tmp])
        raise
    return tmp


def _discard(temporaries: list[str]) -> None:
    """Remove temporary files a failed write leaves; a failure to remove one is not the
    failure to report."""
    for tmp in temporaries:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


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
