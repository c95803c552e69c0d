"""JavaScript names for generated methods and their arguments.

The preamble is evaluated inside the sandbox, so every name that reaches it must be a
valid identifier that cannot shadow the client's own methods or anything objects
inherit; otherwise a document could break or subvert the client it is generating.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from functools import lru_cache

#: ECMAScript reserved words (plus the strict-mode and future ones) an argument may not use.
RESERVED: frozenset[str] = frozenset(
    [
        "arguments",
        "await",
        "break",
        "case",
        "catch",
        "class",
        "const",
        "continue",
        "debugger",
        "default",
        "delete",
        "do",
        "else",
        "enum",
        "eval",
        "export",
        "extends",
        "false",
        "finally",
        "for",
        "function",
        "if",
        "implements",
        "import",
        "in",
        "instanceof",
        "interface",
        "let",
        "new",
        "null",
        "package",
        "private",
        "protected",
        "public",
        "return",
        "static",
        "super",
        "switch",
        "this",
        "throw",
        "true",
        "try",
        "typeof",
        "var",
        "void",
        "while",
        "with",
        "yield",
    ]
)

#: The injected client's own methods: a generated method with one of these names would
#: replace the method every other generated method calls.
CLIENT_METHODS: tuple[str, ...] = ("call", "del", "get", "patch", "post", "put")

#: Names every object inherits; a method by one of these names breaks ordinary JS.
OBJECT_PROTOTYPE: frozenset[str] = frozenset(
    [
        "__proto__",
        "constructor",
        "__defineGetter__",
        "__defineSetter__",
        "__lookupGetter__",
        "__lookupSetter__",
        "hasOwnProperty",
        "isPrototypeOf",
        "propertyIsEnumerable",
        "toLocaleString",
        "toString",
        "valueOf",
    ]
)

_DIGITS = frozenset("0123456789")
_NOT_IDENT = re.compile(r"[^A-Za-z0-9_$]")


#: A plain JavaScript identifier (ASCII): what a client's global name must be.
_GLOBAL_NAME = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*\Z")
#: Globals that exist and cannot be assigned, so a client installed on one is lost.
_NOT_ASSIGNABLE = frozenset({"undefined", "NaN", "Infinity", "globalThis"})


def global_name_error(name: str) -> str | None:
    """Why `name` cannot be the global a client is installed on (`globalThis[NAME]`,
    called as `NAME.x()` by agent code, named in what the model is told), or None:
    for `--global` and a grant's `global` alike."""
    if not _GLOBAL_NAME.match(name):
        return "is not a JS identifier ([A-Za-z_$][A-Za-z0-9_$]*)"
    if name in RESERVED:
        return "is a reserved word in JS"
    if name in _NOT_ASSIGNABLE:
        return "is a global JS does not let a script replace"
    return None


def js_ident(raw: str) -> str:
    """Map any string to an ASCII JavaScript identifier, one `_` per foreign code point.

    ASCII only on purpose: the result is also shown to a model and typed by people, and
    Unicode identifiers invite look-alike names.
    """
    if not raw:
        return "_"
    out = ident_chars(raw)
    return "_" + out if raw[0] in _DIGITS else out


#: `ident_chars` for ASCII text: every byte but [A-Za-z0-9_$] becomes `_`.
_ASCII_IDENT = bytes(
    b if chr(b).isascii() and (chr(b).isalnum() or chr(b) in "_$") else ord("_") for b in range(256)
)


def ident_chars(raw: str) -> str:
    """`raw` with every code point outside [A-Za-z0-9_$] written as one `_`.

    ASCII text (GitHub's operationIds such as `repos/get-content`, component names)
    goes through a byte table, a fifth of the regex substitution's cost (about 1 us an
    id, paid for every operation and every component declared); anything else
    through the regex. tests/specgen/test_fast_paths_equivalence.py holds both to it.
    """
    if raw.isascii():
        return raw.encode().translate(_ASCII_IDENT).decode()
    return _NOT_IDENT.sub("_", raw)  # one `_` per code point, in one C-level pass


def arg_names(raw_names: Iterable[str], has_body: bool, extra: Iterable[str] = ()) -> list[str]:
    """Argument names for path parameters, unique and never a reserved word.

    `h` is taken because the generated code names the client `h`; `body` is taken when
    the method sends a body, since it is always the last argument; `extra` names other
    arguments the method takes after them (the default build's `options`).
    """
    taken = {"h", *extra}
    if has_body:
        taken.add("body")
    names: list[str] = []
    counters: dict[str, int] = {}
    for raw in raw_names:
        name = unique(js_ident(raw), lambda n: n in RESERVED or n in taken, counters)
        taken.add(name)
        names.append(name)
    return names


#: The longest method name the generator writes; longer ones are cut and given a hash.
MAX_NAME = 64

#: Names that make the client object misbehave although they are not inherited:
#: a `then` method turns the client into a thenable, so `await memory` would call it.
THENABLE: frozenset[str] = frozenset({"then"})


@lru_cache(maxsize=8192)  # each operationId is named twice: claimed first, then used
def noted_ident(raw: str) -> tuple[str, str | None]:
    """`js_ident`, bounded to MAX_NAME, and a warning when the name differs from `raw`.

    A long name is cut and given the first 8 hex digits of the raw text's SHA-256, so
    two long ids that share a prefix still get different (and stable) names.
    """
    name = js_ident(raw)
    if len(name) > MAX_NAME:
        import hashlib

        digest = hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()[:8]
        name = f"{name[: MAX_NAME - 9]}_{digest}"
    if name == raw:
        return name, None
    return name, "is not a plain JavaScript identifier"


def unsafe_method_name(name: str) -> str | None:
    """Why `name` may not be a generated method's name as it stands, or None."""
    if name not in _UNSAFE:  # one lookup for the common case: every operation asks
        return None
    if name in CLIENT_METHODS:
        return "is one of the injected client's own methods"
    if name in OBJECT_PROTOTYPE:
        return "is a name every object inherits from Object.prototype"
    if name in THENABLE:
        return "would make the client a thenable (await would call it)"
    if name in RESERVED:
        return "is a JavaScript reserved word"
    return None


#: Every name `unsafe_method_name` has a reason for.
_UNSAFE = frozenset(CLIENT_METHODS) | OBJECT_PROTOTYPE | THENABLE | RESERVED


def unique(base: str, taken: Callable[[str], bool], counters: dict[str, int]) -> str:
    """`base`, else `base_` (the reference's rule), else `base_2`, `base_3`, ...

    The reference appends `_` until a name is free, which a document with n paths whose
    names collide turns into names n characters long: output quadratic in the input and
    work cubic (62 MB and 29 s for 544 KB). After the first `_` we count instead, and
    `counters` remembers where each base's count stopped, so every name costs amortised
    O(1) tries. The caller marks the returned name taken.
    """
    if not taken(base):
        return base
    name = base + "_"
    if not taken(name):
        return name
    n = counters.get(base, 2)
    while taken(f"{base}_{n}"):
        n += 1
    counters[base] = n + 1
    return f"{base}_{n}"
