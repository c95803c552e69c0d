"""The two load-time patches change exactly what runtime/wasm_patch.py documents."""

from __future__ import annotations

import pytest
import wasmtime
from hypothesis import given
from hypothesis import strategies as st

from runtime import PatchError
from runtime.sandbox import engine, wasi, wasm_patch
from runtime.sandbox import vm as qjs_vm


@pytest.fixture(scope="module")
def original() -> bytes:
    return engine.verify_wasm(engine.wasm_path().read_bytes())


@pytest.fixture(scope="module")
def patched(original) -> bytes:
    return wasm_patch.patch(original)


def test_shipped_module_has_the_layout_the_patches_expect(original):
    secs = wasm_patch.split_sections(original)
    assert wasm_patch.read_table(secs) == wasm_patch.TableLimits(580, 580)
    assert wasm_patch.read_memory_min_pages(secs) == 3
    assert wasm_patch.read_stack_pointer(secs) == 174688
    assert all(name != wasm_patch.TABLE_EXPORT for name, _, _ in wasm_patch.read_exports(secs))


def test_patched_module_changes_exactly_table_memory_stack_pointer_and_one_export(
    original, patched
):
    before, after = wasm_patch.split_sections(original), wasm_patch.split_sections(patched)
    assert [s.id for s in before] == [s.id for s in after]
    changed = {a.id for a, b in zip(before, after, strict=True) if a.payload != b.payload}
    assert changed == {4, 5, 6, 7}
    assert wasm_patch.read_table(after) == wasm_patch.TableLimits(580, None)
    assert wasm_patch.read_memory_min_pages(after) == 3 + 16
    assert wasm_patch.read_stack_pointer(after) == 19 * 65536
    exports_before, exports_after = wasm_patch.read_exports(before), wasm_patch.read_exports(after)
    assert exports_after == [*exports_before, (wasm_patch.TABLE_EXPORT, 1, 0)]
    # the second global (immutable) is untouched
    assert after[[s.id for s in after].index(6)].payload.endswith(
        before[[s.id for s in before].index(6)].payload[-5:]
    )
    wasmtime.Module.validate(wasmtime.Engine(), patched)


def test_patching_twice_or_garbage_is_refused(patched):
    with pytest.raises(PatchError):
        wasm_patch.patch(patched)
    with pytest.raises(PatchError):
        wasm_patch.patch(b"\x00asm\x02\x00\x00\x00")
    with pytest.raises(PatchError):
        wasm_patch.relocate_stack(wasm_patch.split_sections(patched), 1000)


@given(st.integers(min_value=0, max_value=2**40))
def test_uleb_round_trip(n):
    assert wasm_patch._read_uleb(wasm_patch._uleb(n) + b"\xff", 0) == (n, len(wasm_patch._uleb(n)))


@given(st.integers(min_value=-(2**31), max_value=2**31 - 1))
def test_sleb_round_trip(n):
    enc = wasm_patch._sleb(n)
    assert wasm_patch._read_sleb(enc, 0) == (n, len(enc))


def test_heap_never_lands_in_the_relocated_stack():
    eng = engine.get_engine()
    state = wasi.WasiState(output_bytes=0, clock="fixed")
    vm = qjs_vm.Vm(eng, state, memory_bytes=256 << 20, deadline_ticks=10**6)
    try:
        vm.call("_initialize")
        assert vm.call("qjs_init") == 0
        stack_lo, stack_hi = 3 * 65536, eng.stack_top
        sizes = [8, 100, 4096, 70000, 1 << 20, 16, 3 << 20, 24] * 8
        for size in sizes:
            ptr = vm.call("malloc", size)
            assert ptr != 0
            assert ptr + size <= stack_lo or ptr >= stack_hi, (hex(ptr), size)
    finally:
        vm.close()
