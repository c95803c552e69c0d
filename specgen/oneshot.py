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

Tearing the interpreter down (every module, function and object freed one by one) costs
a build with click, Jinja2 and jsonschema-rs loaded more than building a small document
does. A built-in command that ended with a plain exit status therefore leaves through
`os._exit` once everything else registered with `atexit` has run and stdout and stderr
are flushed: its files are already written, closed and synced, and the operating system
frees the rest at once. If a stream cannot be flushed, or the command ended any other
way (an exception, a message as the exit status), the interpreter exits as usual and
reports it as it always did.
"""

from __future__ import annotations

import atexit
import gc
import os
import sys
from collections.abc import Container, Sequence

#: The exit status of the built-in command that ran, once it has ended (see main()).
_status: list[int] = []
#: Whether this process runs a built-in command (one_shot_without_gc said so).
_one_shot: list[bool] = []
#: The one result kept alive until the process leaves (see keep_until_exit).
_kept: list[object] = []


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
    # atexit runs handlers last-registered first: leaving is registered before anything
    # the command registers, so it runs after all of them.
    atexit.register(_leave_without_teardown)
    atexit.register(gc.freeze)
    _one_shot[:] = [True]
    return True


def keep_until_exit(result: object) -> None:
    """In a one-shot process, hold `result` until the process leaves.

    Freeing a parsed document object by object when the command returns costs GitHub's
    about 10 ms; left alone, it goes with the process at `os._exit`. Only the latest
    result is held, and nothing at all outside a one-shot process (a library caller's
    results are freed as usual).
    """
    if _one_shot:
        _kept[:] = [result]


def record_exit(code: object) -> None:
    """Note the status a built-in command's SystemExit carries (None is 0); any other
    value (a message) is left to the interpreter to print and exit with."""
    if code is None:
        _status[:] = [0]
    elif isinstance(code, int) and 0 <= code <= 255:
        _status[:] = [int(code)]


def _leave_without_teardown() -> None:
    if not _status:
        return
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            return  # the interpreter's own exit reports it, as without this handler
    os._exit(_status[0])
