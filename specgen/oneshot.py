"""No cyclic garbage collection in a one-shot generator process.

A build parses the document into hundreds of thousands of dicts and lists that live
until the process exits and hold no reference cycles; the cyclic collector still
traverses them again and again as they are allocated (about a third of parsing GitHub's
document). Reference counting frees everything else, and the process ends right after,
so the built-in commands run with the collector off. Commands other packages plug in
(the runtime's `run`, which may serve many sandboxes) keep it.

The interpreter still runs one full collection while it shuts down, whether the
collector is enabled or not: on GitHub's document a traversal of everything the build
allocated, about 15 ms for nothing. Freezing once more at exit moves all of it out of
that collection's reach.
"""

from __future__ import annotations

import atexit
import gc
from collections.abc import Container, Sequence


def one_shot_without_gc(argv: Sequence[str], builtin: Container[str]) -> bool:
    """Switch the cyclic GC off when `argv` names a built-in command; True if it did.

    What was allocated before (the interpreter, click, our modules) is frozen out of
    every later collection as well, in case something turns the collector back on, and
    what is allocated after is frozen at exit, before the shutdown collection.
    """
    command = next((arg for arg in argv if not arg.startswith("-")), None)
    if command is None or command not in builtin:
        return False
    gc.freeze()
    gc.disable()
    atexit.register(gc.freeze)
    return True
