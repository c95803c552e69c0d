"""Our WASI preview1 covers exactly the module's imports and denies by default."""

from __future__ import annotations

import ctypes

import pytest
import wasmtime
from wasmtime import _ffi as ffi

from runtime.sandbox import engine, wasi
from runtime.sandbox import vm as qjs_vm


def test_imports_match_the_module_exactly():
    module = engine.get_engine().module
    wanted = {}
    for imp in module.imports:
        assert imp.module == wasi.MODULE
        ty = imp.type
        assert isinstance(ty, wasmtime.FuncType)
        wanted[imp.name] = (tuple(str(p) for p in ty.params), tuple(str(r) for r in ty.results))
    assert wanted == {name: (p, r) for name, (p, r, _) in wasi.IMPORTS.items()}
    assert not any(name.startswith("sock_") for name in wanted)


def test_output_cap_keeps_the_first_bytes_of_each_stream():
    state = wasi.WasiState(output_bytes=10, clock="fixed")
    for chunk in (b"abcd", b"efgh", b"ijkl", b"mnop"):
        state.emit(1, chunk)
    state.emit(2, b"12345")
    assert (bytes(state.out[1]), state.truncated[1]) == (b"abcdefghij", True)
    assert (bytes(state.out[2]), state.truncated[2]) == (b"12345", False)


def test_fixed_clock_starts_at_a_fixed_instant_and_only_sleeps_move_it():
    state = wasi.WasiState(output_bytes=0, clock="fixed")
    assert state.now_ns(0) == wasi.FIXED_EPOCH_NS and state.now_ns(1) == 0
    state.sleep(1500)
    assert state.now_ns(0) == wasi.FIXED_EPOCH_NS + 1500 and state.now_ns(1) == 1500


def test_linear_memory_keeps_its_address_when_it_grows():
    # The host keeps the memory's address for the whole run and reads guest memory
    # through it; that is only sound if growing never moves the memory.
    eng = engine.get_engine()
    state = wasi.WasiState(output_bytes=0, clock="fixed")
    with eng.instance() as inst:
        vm = qjs_vm.Vm(inst, state, memory_bytes=512 << 20, deadline_ticks=1000)
        try:
            before = state._base(vm.context)
            prev = ctypes.c_uint64()
            err = ffi.wasmtime_memory_grow(
                vm.context, ctypes.byref(state.memory), 4000, ctypes.byref(prev)
            )
            assert not err
            base, size = state._base(vm.context)
            assert base == before[0] and size == before[1] + 4000 * 65536
            vm.write(size - 4, b"\x01\x02\x03\x04")
            assert vm.read(size - 4, 4) == b"\x01\x02\x03\x04"
            with pytest.raises(wasi.GuestMemoryError):
                vm.read(size - 3, 4)
        finally:
            vm.close()
    with pytest.raises(wasi.GuestMemoryError):
        state.read(None, 0, 1)  # the Store is gone: nothing reaches its memory
