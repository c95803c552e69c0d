"""What a server derives from its document and grant at start, kept for its next start.

An MCP client starts its server at every session, and on GitHub's document the server
spent about 0.3 s of each start generating the operations, their TypeScript types, the
grant's view and the instructions: the same output from the same input every time.
This keeps that output (the catalog's parts, the instructions, the title) in the user
cache folder, and a start whose input matches reads it back in about 40 ms (reading and
hashing the 13 MB document and this installation's code included).

What "the same input" means: the document's bytes, the options the server builds them
with, the grant's view of them (its name, allow list, token kind, global and response
headers) and the code that derives the output: every Python file of the `specgen` and
`runtime` packages and every template, by content, and the versions of the libraries
that read, check and render the document (`DERIVING`). Any difference is a miss, and a
miss derives everything as before, then replaces the entry. Nothing here fails a
start: an entry that cannot be keyed, read or written costs a derive.

The entry is unpickled, so it is trusted as the compiled templates and engine beside it
are (specgen/cache_dir.py): read only when it and its folder are this user's alone and
its HMAC under the per-user cache secret is right. One entry per document path, global
and profile, and the MAX_ENTRIES newest in all, so the folder holds an entry for each
server a user runs, not one per version of the document or per temporary path.
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
from typing import NamedTuple

from specgen.cache_dir import cache_dir, keep_newest, read_sealed, write_sealed

#: Bumped when what an entry holds changes shape in a way the code hash cannot see.
FORMAT = b"mcp-start-1"
_KEY_BYTES = 32
#: Entries kept in the folder, the most recently written: one per server a user runs.
MAX_ENTRIES = 16
#: The distributions besides this one whose code derives what a start keeps: they
#: read the document (jiter, orjson, PyYAML), check it (the validators and their
#: schemas, RE2 for its patterns) and render the instructions (Jinja2, MarkupSafe).
DERIVING = (
    "jiter",
    "orjson",
    "PyYAML",
    "jsonschema-rs",
    "jsonschema",
    "referencing",
    "openapi-spec-validator",
    "openapi-schema-validator",
    "google-re2",
    "Jinja2",
    "MarkupSafe",
)


class Slot(NamedTuple):
    """Where one start's entry is kept, and the key its input makes."""

    path: Path
    key: bytes


@cache
def code_fingerprint() -> bytes:
    """`fingerprint` of this installation's `specgen` and `runtime` packages and
    templates, and the versions of `DERIVING`: an editable install's edit changes it,
    as an upgrade of this project or of one of those libraries does."""
    import runtime
    import specgen
    from specgen.render import TEMPLATE_DIRS

    packages = (Path(runtime.__file__).parent, Path(specgen.__file__).parent)
    own = fingerprint(packages, tuple(d for d in TEMPLATE_DIRS if d.is_dir()))
    return hashlib.sha256(own + "\0".join(library_versions()).encode()).digest()


def library_versions() -> list[str]:
    """`name=version` of each of `DERIVING` (`-` when missing), and whether PyYAML has
    its C loader (the loader `specgen/load.py` takes when it can), found without
    importing any of them."""
    from importlib.metadata import PackageNotFoundError, version
    from importlib.util import find_spec

    found = []
    for name in DERIVING:
        try:
            found.append(f"{name}={version(name)}")
        except PackageNotFoundError:
            found.append(f"{name}=-")
    yaml = find_spec("yaml")
    folders = (yaml.submodule_search_locations or []) if yaml is not None else []
    libyaml = any(any(Path(f).glob("_yaml.*")) for f in folders)
    return [*found, f"libyaml={libyaml}"]


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


def slot_for(
    spec: str, global_name: str, profile: str, document: bytes, inputs: Iterable[object]
) -> Slot | None:
    """The slot of a start from `spec` (a path; None for stdin) with this input, or None
    when it cannot be keyed (a module file that cannot be read mid-upgrade, say)."""
    if spec == "-":
        return None
    try:
        return Slot(entry_path(spec, global_name, profile), key_of(document, inputs))
    except Exception:  # a start is never failed by its cache: it derives instead
        return None


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


def load(slot: Slot) -> object | None:
    """What was stored for the slot's key, or None: missing, sealed by someone else,
    for other input, or unreadable by this code."""
    body = read_sealed(slot.path)
    if body is None or body[:_KEY_BYTES] != slot.key:
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


def store(slot: Slot, value: object) -> None:
    """Keep `value` for the slot's key, and at most MAX_ENTRIES entries in all; best
    effort (see write_sealed)."""
    try:
        body = slot.key + pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # nothing kept: the next start derives, as this one did
        return
    write_sealed(slot.path, body)
    keep_newest(slot.path.parent, "mcp-start-*.bin", MAX_ENTRIES)
