"""Reads the layout of the engine module and checks it is the one the sandbox relies on.

The build (runtime/sandbox/engine_build/) links the module so that the host can add
native functions and so that deep recursion cannot overwrite memory: the function table
is exported as `__indirect_function_table` with no maximum (the host `table.grow`s a
slot whose index is then a C function pointer the guest can call: JS_NewCFunction2, the
rejection tracker), and the shadow stack sits at the bottom of linear memory, below the
data and the heap, with the stack pointer (global 0) starting at its top, so a stack
that overflows runs off the start of memory (a trap) instead of into the heap.

`check_layout` refuses any module that differs, so a different build can never be
half-trusted. The reader is a minimal section parser over the bytes; it needs no
wasm tooling at run time.
"""

from __future__ import annotations

from dataclasses import dataclass

from runtime.errors import PatchError

WASM_PAGE = 65536
TABLE_EXPORT = "__indirect_function_table"

_MAGIC = b"\x00asm\x01\x00\x00\x00"
_SEC_TABLE, _SEC_MEMORY, _SEC_GLOBAL, _SEC_EXPORT = 4, 5, 6, 7
_FUNCREF, _I32, _I32_CONST, _END = 0x70, 0x7F, 0x41, 0x0B
_EXPORT_TABLE = 0x01


def _uleb(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _read_uleb(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data):
            raise PatchError("truncated LEB128 integer")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return result, pos


def _read_sleb(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            if byte & 0x40:
                result -= 1 << shift
            return result, pos


@dataclass
class Section:
    id: int
    payload: bytes


def split_sections(wasm: bytes) -> list[Section]:
    """The module's sections in order; the header is checked, not returned."""
    if not wasm.startswith(_MAGIC):
        raise PatchError("not a WebAssembly 1.0 binary")
    pos, sections = len(_MAGIC), []
    while pos < len(wasm):
        sid = wasm[pos]
        size, pos = _read_uleb(wasm, pos + 1)
        if pos + size > len(wasm):
            raise PatchError("section runs past the end of the module")
        sections.append(Section(sid, wasm[pos : pos + size]))
        pos += size
    return sections


def join_sections(sections: list[Section]) -> bytes:
    out = bytearray(_MAGIC)
    for sec in sections:
        out.append(sec.id)
        out += _uleb(len(sec.payload))
        out += sec.payload
    return bytes(out)


def _only(sections: list[Section], sid: int) -> Section:
    found = [s for s in sections if s.id == sid]
    if len(found) != 1:
        raise PatchError(f"expected exactly one section {sid}, found {len(found)}")
    return found[0]


@dataclass(frozen=True)
class TableLimits:
    minimum: int
    maximum: int | None


def read_table(sections: list[Section]) -> TableLimits:
    data = _only(sections, _SEC_TABLE).payload
    count, pos = _read_uleb(data, 0)
    if count != 1 or data[pos] != _FUNCREF:
        raise PatchError("expected one funcref table")
    flags = data[pos + 1]
    minimum, pos = _read_uleb(data, pos + 2)
    maximum = None
    if flags == 0x01:
        maximum, pos = _read_uleb(data, pos)
    elif flags != 0x00:
        raise PatchError(f"unexpected table limits flag {flags:#x}")
    if pos != len(data):
        raise PatchError("unexpected bytes after the table entry")
    return TableLimits(minimum, maximum)


def read_exports(sections: list[Section]) -> list[tuple[str, int, int]]:
    """(name, kind, index) for every export, in order."""
    data = _only(sections, _SEC_EXPORT).payload
    count, pos = _read_uleb(data, 0)
    out = []
    for _ in range(count):
        n, pos = _read_uleb(data, pos)
        name = data[pos : pos + n].decode()
        kind = data[pos + n]
        index, pos = _read_uleb(data, pos + n + 1)
        out.append((name, kind, index))
    return out


def read_memory_min_pages(sections: list[Section]) -> int:
    data = _only(sections, _SEC_MEMORY).payload
    count, pos = _read_uleb(data, 0)
    if count != 1 or data[pos] != 0x00:
        raise PatchError("expected one memory with a minimum and no maximum")
    minimum, pos = _read_uleb(data, pos + 1)
    if pos != len(data):
        raise PatchError("unexpected bytes after the memory entry")
    return minimum


def _globals(data: bytes) -> list[tuple[int, int, int, int]]:
    """(start, end, mutability, i32 init) of each `i32 (mut?) = i32.const N` global."""
    count, pos = _read_uleb(data, 0)
    out = []
    for _ in range(count):
        start = pos
        if data[pos] != _I32 or data[pos + 2] != _I32_CONST:
            raise PatchError("expected only i32 globals initialised by i32.const")
        mut = data[pos + 1]
        value, pos = _read_sleb(data, pos + 3)
        if data[pos] != _END:
            raise PatchError("unexpected global initialiser")
        pos += 1
        out.append((start, pos, mut, value))
    if pos != len(data):
        raise PatchError("unexpected bytes after the globals")
    return out


def read_stack_pointer(sections: list[Section]) -> int:
    """Global 0 is the linker's `__stack_pointer` (mutable i32)."""
    globs = _globals(_only(sections, _SEC_GLOBAL).payload)
    if not globs or globs[0][2] != 1:
        raise PatchError("global 0 is not a mutable i32 stack pointer")
    return globs[0][3] & 0xFFFFFFFF


@dataclass(frozen=True)
class Layout:
    """What the sandbox needs to know about a module it accepted."""

    stack_top: int  # the initial `__stack_pointer`: the top of the shadow stack
    memory_min_pages: int
    table_min: int


def check_layout(wasm: bytes, stack_bytes: int) -> Layout:
    """The module's layout, or PatchError when it is not the one the sandbox relies on."""
    sections = split_sections(wasm)
    table = read_table(sections)
    if table.maximum is not None:
        raise PatchError("the function table has a maximum: the host could not add to it")
    if (TABLE_EXPORT, _EXPORT_TABLE, 0) not in read_exports(sections):
        raise PatchError(f"table 0 is not exported as {TABLE_EXPORT}")
    stack_top = read_stack_pointer(sections)
    if stack_top != stack_bytes:
        raise PatchError(
            f"the stack pointer starts at {stack_top}, not at the top of a "
            f"{stack_bytes}-byte stack at the bottom of memory"
        )
    pages = read_memory_min_pages(sections)
    if pages * WASM_PAGE <= stack_top:
        raise PatchError("the initial memory holds nothing above the stack")
    return Layout(stack_top, pages, table.minimum)
