"""Our WASI preview1 covers exactly the module's imports and denies by default."""

from __future__ import annotations

import wasmtime

from runtime.sandbox import engine, wasi


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
