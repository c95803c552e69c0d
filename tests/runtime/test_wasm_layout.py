"""The built engine has the layout the sandbox relies on, and any other layout is refused."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runtime import PatchError
from runtime.sandbox import engine, wasi, wasm_layout
from runtime.sandbox import vm as qjs_vm


@pytest.fixture(scope="module")
def built() -> bytes:
    return engine.verify_wasm(engine.wasm_path().read_bytes())


def _with_section(wasm: bytes, sid: int, payload: bytes) -> bytes:
    sections = wasm_layout.split_sections(wasm)
    return wasm_layout.join_sections(
        [wasm_layout.Section(sid, payload) if s.id == sid else s for s in sections]
    )


def test_the_built_module_has_a_growable_exported_table_and_the_stack_at_the_bottom(built):
    layout = wasm_layout.check_layout(built, engine.STACK_BYTES)
    assert layout.stack_top == engine.STACK_BYTES == 1 << 20
    assert layout.memory_min_pages * wasm_layout.WASM_PAGE > layout.stack_top
    sections = wasm_layout.split_sections(built)
    assert wasm_layout.read_table(sections).maximum is None
    assert (wasm_layout.TABLE_EXPORT, 1, 0) in wasm_layout.read_exports(sections)
    assert layout.table_min + 3 * 100 < engine.POOL_TABLE_ELEMENTS


def test_a_table_with_a_maximum_is_refused(built):
    minimum = wasm_layout.read_table(wasm_layout.split_sections(built)).minimum
    capped = _with_section(built, 4, bytes([1, 0x70, 0x01]) + wasm_layout._uleb(minimum) * 2)
    with pytest.raises(PatchError, match="has a maximum"):
        wasm_layout.check_layout(capped, engine.STACK_BYTES)


def test_an_unexported_table_or_a_stack_elsewhere_is_refused(built):
    with pytest.raises(PatchError, match="not exported"):
        sections = wasm_layout.split_sections(built)
        exports = [
            e for e in wasm_layout.read_exports(sections) if e[0] != wasm_layout.TABLE_EXPORT
        ]
        payload = bytes([len(exports)])  # fewer than 128 exports: a one-byte count
        payload += b"".join(
            bytes([len(n)]) + n.encode() + bytes([k]) + wasm_layout._uleb(i) for n, k, i in exports
        )
        wasm_layout.check_layout(_with_section(built, 7, payload), engine.STACK_BYTES)
    with pytest.raises(PatchError, match="stack pointer starts at"):
        wasm_layout.check_layout(built, engine.STACK_BYTES * 2)
    with pytest.raises(PatchError):
        wasm_layout.check_layout(b"\x00asm\x02\x00\x00\x00", engine.STACK_BYTES)


@given(st.integers(min_value=0, max_value=2**40))
def test_uleb_round_trip(n):
    enc = wasm_layout._uleb(n)
    assert wasm_layout._read_uleb(enc + b"\xff", 0) == (n, len(enc))


def test_the_heap_never_lands_in_the_stack():
    eng = engine.get_engine()
    state = wasi.WasiState(output_bytes=0, clock="fixed")
    vm = qjs_vm.Vm(eng, state, memory_bytes=256 << 20, deadline_ticks=10**6)
    try:
        vm.call("_initialize")
        assert vm.call("qjs_init") == 0
        sizes = [8, 100, 4096, 70000, 1 << 20, 16, 3 << 20, 24] * 8
        for size in sizes:
            ptr = vm.call("malloc", size)
            assert ptr >= eng.stack_top, (hex(ptr), size)
    finally:
        vm.close()


def test_a_large_block_costs_what_it_asks_for():
    # The allocator grows memory by what a block needs (not the next power of two), so
    # half a run's limit still fits: a 128 MiB buffer in a 256 MiB run.
    eng = engine.get_engine()
    state = wasi.WasiState(output_bytes=0, clock="fixed")
    vm = qjs_vm.Vm(eng, state, memory_bytes=256 << 20, deadline_ticks=10**6)
    try:
        vm.call("_initialize")
        assert vm.call("malloc", 200 << 20) != 0
    finally:
        vm.close()
