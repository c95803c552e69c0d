"""What a server derives from its document and grant at start, kept for its next start.

An MCP client starts its server at every session, and on GitHub's document the server
spent about 0.3 s of each start generating the operations, their TypeScript types, the
grant's view and the instructions: the same output from the same input every time.
This keeps that output (the catalog's parts, the instructions, the title) in the user
cache folder, and a start whose input matches reads it back in about 20 ms.

What "the same input" means: the document's bytes, the options the server builds them
with, the grant's view of them (its name, allow list, token kind, global and response
headers) and the code that derives the output: every Python file of the `specgen` and
`runtime` packages and every template, by content. Any difference is a miss, and a miss
derives everything as before, then replaces the entry.

The entry is unpickled, so it is trusted as the compiled templates and engine beside it
are (specgen/cache_dir.py): read only when it and its folder are this user's alone and
its HMAC under the per-user cache secret is right. One entry per document path, global
and profile, so the folder holds at most one entry for each server a user runs, not one
per version of the document.
"""

from __future__ import annotations

import gc
import hashlib
import os
import pickle
import sys
from collections.abc import Iterable
from functools import cache
from pathlib import Path

from specgen.cache_dir import cache_dir, read_sealed, write_sealed

#: Bumped when what an entry holds changes shape in a way the code hash cannot see.
FORMAT = b"mcp-start-1"
_KEY_BYTES = 32


@cache
def code_fingerprint() -> bytes:
    """`fingerprint` of this installation's `specgen` and `runtime` packages and
    templates: an editable install's edit changes it, as an upgrade does."""
    import runtime
    import specgen
    from specgen.render import TEMPLATE_DIRS

    packages = (Path(runtime.__file__).parent, Path(specgen.__file__).parent)
    return fingerprint(packages, tuple(d for d in TEMPLATE_DIRS if d.is_dir()))


def fingerprint(packages: Iterable[Path], templates: Iterable[Path]) -> bytes:
    """SHA-256 over the Python version, every `*.py` under `packages` and every file
    under `templates`, each by its path there and its content."""
    digest = hashlib.sha256(sys.version.encode())
    for roots, pattern in ((packages, "*.py"), (templates, "*")):
        for root in roots:
            digest.update(b"\1" + str(root.name).encode("utf-8", "surrogateescape"))
            for path in sorted(p for p in root.rglob(pattern) if p.is_file()):
                name = str(path.relative_to(root)).encode("utf-8", "surrogateescape")
                digest.update(b"\0" + name + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    return digest.digest()


def key_of(document: bytes, inputs: Iterable[object]) -> bytes:
    """The entry's key: the document's bytes, the other inputs by their repr (plain
    data: strings, tuples, named tuples of them) and the code."""
    digest = hashlib.sha256(FORMAT)
    digest.update(code_fingerprint())
    digest.update(hashlib.sha256(document).digest())
    for item in inputs:
        text = repr(item).encode("utf-8", "surrogateescape")
        digest.update(len(text).to_bytes(8, "big"))
        digest.update(text)
    return digest.digest()


def entry_path(spec: str, global_name: str, profile: str) -> Path:
    """Where the one entry of this document path, global and profile is kept."""
    where = repr((os.path.abspath(spec), global_name, profile)).encode("utf-8", "surrogateescape")
    return cache_dir() / f"mcp-start-{hashlib.sha256(where).hexdigest()[:32]}.bin"


def load(path: Path, key: bytes) -> object | None:
    """What was stored under `key` at `path`, or None: missing, sealed by someone else,
    for other input, or unreadable by this code."""
    body = read_sealed(path)
    if body is None or body[:_KEY_BYTES] != key:
        return None
    collecting = gc.isenabled()
    gc.disable()  # GitHub's entry is ~200k objects: a collection midway tripled the read
    try:
        return pickle.loads(body[_KEY_BYTES:])
    except Exception:  # an entry this code cannot read is a miss, never a failure
        return None
    finally:
        if collecting:
            gc.enable()


def store(path: Path, key: bytes, value: object) -> None:
    """Keep `value` under `key` at `path`; best effort (see write_sealed)."""
    write_sealed(path, key + pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
