"""Load-time binary patches of the QuickJS-NG reactor module (qjs-wasi-reactor.wasm 0.15.0.1).

Why patch at all: the module as shipped cannot host a native function written in Python
(its one function table is neither exported nor growable) and its 64 KiB shadow stack
grows down into `.data`/`.bss`, so deep JavaScript recursion silently overwrites
globals instead of raising a RangeError. Both are fixed by rewriting four small
sections of the binary before it is compiled; nothing else in the module changes.

1. `export_growable_table`: the table section declares `table 580 580 funcref`. The
   maximum is dropped (limits flag 0x01 -> 0x00) and the export section gains
   `__indirect_function_table` -> table 0, so the host can `table.grow` a slot whose index
   is then a C function pointer the guest can call (JS_NewCFunction2, the rejection
   tracker).
2. `relocate_stack`: the initial memory grows by `stack_bytes` (memory minimum 3 -> 19
   pages for 1 MiB) and the stack pointer (global 0) moves from the top of the old image
   to the top of the new region. The stack now grows down through fresh pages of its
   own. dlmalloc's first region is `[__heap_base, __heap_end)`, link-time constants below
   the old top, and later `sbrk` calls grow above the new top, so the heap never lands in
   the stack region (tests/runtime/test_wasm_patch.py checks this on a live instance).

The patcher is a minimal section rewriter: it re-encodes only the sections it changes and
copies every other byte through verbatim. Any deviation from the expected input layout
raises PatchError, so a different build can never be patched into something subtly wrong.
"""

from __future__ import annotations

from dataclasses import dataclass

from runtime.errors import PatchError

WASM_PAGE = 65536
TABLE_EXPORT = "__indirect_function_table"
DEFAULT_STACK_BYTES = 1 << 20

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


def _sleb(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        done = (value == 0 and not byte & 0x40) or (value == -1 and byte & 0x40)
        out.append(byte if done else byte | 0x80)
        if done:
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


def export_growable_table(sections: list[Section]) -> list[Section]:
    """Drop the table maximum and export table 0 as `__indirect_function_table`."""
    limits = read_table(sections)
    exports = read_exports(sections)
    if any(name == TABLE_EXPORT for name, _, _ in exports):
        raise PatchError("table already exported; module is not the expected build")
    if limits.maximum is None:
        raise PatchError("table is already growable; module is not the expected build")
    out = []
    for sec in sections:
        if sec.id == _SEC_TABLE:
            sec = Section(_SEC_TABLE, bytes([1, _FUNCREF, 0x00]) + _uleb(limits.minimum))
        elif sec.id == _SEC_EXPORT:
            count, pos = _read_uleb(sec.payload, 0)
            name = TABLE_EXPORT.encode()
            entry = _uleb(len(name)) + name + bytes([_EXPORT_TABLE]) + _uleb(0)
            sec = Section(_SEC_EXPORT, _uleb(count + 1) + sec.payload[pos:] + entry)
        out.append(sec)
    return out


def relocate_stack(sections: list[Section], stack_bytes: int) -> list[Section]:
    """Give the shadow stack `stack_bytes` of fresh pages above the initial image."""
    if stack_bytes <= 0 or stack_bytes % WASM_PAGE:
        raise PatchError("stack size must be a positive multiple of 64 KiB")
    old_pages = read_memory_min_pages(sections)
    old_sp = read_stack_pointer(sections)
    if old_sp > old_pages * WASM_PAGE:
        raise PatchError("stack pointer lies above the initial memory")
    new_pages = old_pages + stack_bytes // WASM_PAGE
    new_sp = new_pages * WASM_PAGE
    if new_sp >= 1 << 31:
        raise PatchError("relocated stack does not fit in a signed i32")
    out = []
    for sec in sections:
        if sec.id == _SEC_MEMORY:
            sec = Section(_SEC_MEMORY, bytes([1, 0x00]) + _uleb(new_pages))
        elif sec.id == _SEC_GLOBAL:
            data = sec.payload
            start, end, _mut, _ = _globals(data)[0]
            glob0 = bytes([_I32, 1, _I32_CONST]) + _sleb(new_sp) + bytes([_END])
            sec = Section(_SEC_GLOBAL, data[:start] + glob0 + data[end:])
        out.append(sec)
    return out


def patch(wasm: bytes, stack_bytes: int = DEFAULT_STACK_BYTES) -> bytes:
    """Both patches, in the order the module needs them."""
    sections = split_sections(wasm)
    sections = export_growable_table(sections)
    sections = relocate_stack(sections, stack_bytes)
    return join_sections(sections)
