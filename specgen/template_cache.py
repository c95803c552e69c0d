"""Compiled templates kept on disk, so a build does not compile them on every start.

Jinja2 turns each template into Python source and compiles it; for the four files a
build writes that took about 14 ms of a 14-operation build's ~130 ms. Jinja2's own
bytecode-cache hook stores the compiled code; this class decides where and whom to
trust. The code in an entry is run by the generator (and Jinja2 unpickles part of it
before looking at it), so an entry is used only when it and its folder belong to this
user and nobody else can write them, and its HMAC-SHA256 under the per-user cache
secret matches (`specgen/cache_dir.py`; the rules of the runtime's compiled-engine
cache, in the same folder): a file planted by a checkout or a restored cache, owned by
the user as it may be, is never unpickled. An
entry's name covers the template's name and file, Jinja2's and Python's versions and
every environment setting that changes compiled code; Jinja2 itself keeps the SHA-1 of
the template's source inside it and recompiles when the source changed. Anything
missing, stale or untrusted costs a compile, never a failure; the MAX_ENTRIES most
recently written entries are kept.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import jinja2

from specgen.cache_dir import cache_dir, keep_newest, read_sealed, write_sealed

#: Entries kept, the most recently written: an entry's name covers the template's file,
#: so every checkout (a clone per CI run) writes its own set of them, and a user's cache
#: folder held hundreds. Room for the templates of a few checkouts at once.
MAX_ENTRIES = 64


class TemplateCache(jinja2.BytecodeCache):
    """Jinja2 bytecode, one file per template and environment, checked before use."""

    def __init__(self, directory: Path | None = None) -> None:
        self.directory = directory

    def _path(self, bucket: jinja2.bccache.Bucket) -> Path:
        env = bucket.environment
        settings = repr(
            (
                jinja2.__version__,
                sys.version,
                env.autoescape,
                env.trim_blocks,
                env.lstrip_blocks,
                env.keep_trailing_newline,
                env.newline_sequence,
                env.optimized,
                sorted(env.filters),
                sorted(env.tests),
                sorted(env.extensions),
                env.block_start_string,
                env.block_end_string,
                env.variable_start_string,
                env.variable_end_string,
                env.comment_start_string,
                env.comment_end_string,
                env.line_statement_prefix,
                env.line_comment_prefix,
            )
        )
        key = hashlib.sha256(f"{bucket.key}\0{settings}".encode()).hexdigest()[:40]
        return (self.directory or cache_dir()) / f"jinja-{key}.bin"

    def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        body = read_sealed(self._path(bucket))
        if body is None:
            return
        bucket.bytecode_from_string(body)  # stale source or versions: bucket stays empty

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        path = self._path(bucket)
        write_sealed(path, bucket.bytecode_to_string())
        keep_newest(path.parent, "jinja-*.bin", MAX_ENTRIES)
