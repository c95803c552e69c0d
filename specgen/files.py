"""Bounded file input, and atomic file output: a reader never sees half a file, and a
failure loses nothing."""

from __future__ import annotations

import contextlib
import errno
import os
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
