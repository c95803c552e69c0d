"""The engine build: pinned inputs, exactly the exports the sandbox calls, only the WASI
imports the sandbox provides, and the same bytes every time (docs/engine.md)."""

from __future__ import annotations

import hashlib
import re
import shutil
from pathlib import Path

import pytest
import wasmtime

from runtime.sandbox import engine, engine_file, wasi
from runtime.sandbox.engine_build import build

SANDBOX = Path(engine.__file__).parent
#: The glue's own entry points (host_glue.c exports them by attribute) and the reactor ABI.
GLUE_EXPORTS = {
    "qjs_init",
    "qjs_get_context",
    "js_std_loop_once",
    "js_std_await",
    "js_std_dump_error",
    "js_module_set_import_meta",
    "plimsoll_uint8_bytes",
    "plimsoll_reply",
    "plimsoll_settle",
}
#: Exactly what the module may import: the WASI calls runtime/sandbox/wasi.py answers
#: (no file, environment or process call among them).
EXPECTED_IMPORTS = {
    ("wasi_snapshot_preview1", name)
    for name in (
        "clock_time_get",
        "fd_close",
        "fd_fdstat_get",
        "fd_read",
        "fd_seek",
        "fd_write",
        "poll_oneoff",
        "proc_exit",
    )
}


def _module() -> wasmtime.Module:
    return engine.get_engine().module


def _called_by_the_sandbox() -> set[str]:
    """Every C function runtime/sandbox/*.py calls by name: `vm.call("NAME", ...)` and
    the error throwers `_throw(vm, ctx, "Kind", ...)` calls as JS_Throw<Kind>Error."""
    names: set[str] = set()
    for path in SANDBOX.glob("*.py"):
        text = path.read_text("utf-8")
        names |= set(re.findall(r'call\(\s*"([A-Za-z_][A-Za-z0-9_]*)"', text))
        names |= {f"JS_Throw{k}Error" for k in re.findall(r'_throw\(vm, ctx, "(\w+)"', text)}
    return names


def _after_marker(text: str) -> set[str]:
    tail = text.split("# Used by the tests only", 1)[1]
    return {ln.strip() for ln in tail.splitlines() if ln.strip() and not ln.startswith("#")}


def test_the_module_exports_exactly_the_c_api_the_sandbox_calls():
    functions = {e.name for e in _module().exports if isinstance(e.type, wasmtime.FuncType)}
    called = _called_by_the_sandbox()
    test_only = _after_marker(build.EXPORTS.read_text("utf-8"))
    assert called - functions == set(), "called but not exported (add to exports.txt)"
    unused = functions - called - test_only - GLUE_EXPORTS - {"_initialize"}
    assert unused == set(), "exported but never called (drop from exports.txt)"
    assert set(build.exports()) | GLUE_EXPORTS | {"_initialize"} == functions
    others = {e.name for e in _module().exports if not isinstance(e.type, wasmtime.FuncType)}
    assert others == {"memory", "__indirect_function_table"}


def test_the_module_imports_only_the_wasi_calls_the_sandbox_provides():
    imports = {(i.module, i.name) for i in _module().imports}
    assert imports == EXPECTED_IMPORTS
    assert {name for _, name in imports} <= set(wasi.IMPORTS)
    assert all(module == wasi.MODULE for module, _ in imports)


def test_the_installed_module_is_the_pinned_build():
    data = engine.wasm_path().read_bytes()
    assert hashlib.sha256(data).hexdigest() == build.load_pins()["engine_sha256"]
    assert build.load_pins()["engine_sha256"] == engine_file.WASM_SHA256


def test_every_pinned_input_has_a_sha256():
    pins = build.load_pins()
    assert re.fullmatch(r"[0-9a-f]{64}", pins["quickjs_ng"]["sha256"])
    assert pins["quickjs_ng"]["version"].split(".")[:2] >= ["0", "17"]
    for wheel in pins["ziglang"]["wheels"].values():
        assert re.fullmatch(r"[0-9a-f]{64}", wheel["sha256"])
        assert wheel["filename"].startswith(f"ziglang-{pins['ziglang']['version']}-")


def test_the_post_link_step_changes_only_the_table_maximum():
    from runtime.sandbox import wasm_layout

    built = engine.wasm_path().read_bytes()
    minimum = wasm_layout._uleb(wasm_layout.read_table(wasm_layout.split_sections(built)).minimum)
    capped = wasm_layout.join_sections(
        [
            wasm_layout.Section(4, bytes([1, 0x70, 0x01]) + minimum + wasm_layout._uleb(600))
            if s.id == 4
            else s
            for s in wasm_layout.split_sections(engine.wasm_path().read_bytes())
        ]
    )
    assert build.drop_table_maximum(capped) == engine.wasm_path().read_bytes()
    with pytest.raises(build.BuildError, match="with a maximum"):
        build.drop_table_maximum(engine.wasm_path().read_bytes())
    with pytest.raises(build.BuildError, match=r"WebAssembly 1\.0"):
        build.drop_table_maximum(b"\x00asm\x02\x00\x00\x00")


def test_a_download_that_does_not_hash_to_its_pin_is_refused(tmp_path, monkeypatch):
    # Whatever pip leaves behind (here: a planted file, pip doing nothing), a file that
    # does not hash to the pin never reaches the compiler.
    sdist = build.load_pins()["quickjs_ng"]
    name = f"quickjs_ng-{sdist['version']}.tar.gz"
    (tmp_path / "downloads").mkdir()
    (tmp_path / "downloads" / name).write_bytes(b"not the sdist")
    asked: list[str] = []
    monkeypatch.setattr(build, "_pip_download", lambda req, hashes, dest, *extra: asked.append(req))
    with pytest.raises(build.BuildError, match=r"has sha256 [0-9a-f]{64}, pinned"):
        build._fetch(tmp_path, name, sdist["sha256"], f"quickjs-ng=={sdist['version']}")
    assert asked == [f"quickjs-ng=={sdist['version']}"]  # a bad cached file is fetched again


@pytest.mark.slow
def test_building_again_from_scratch_gives_the_same_bytes(tmp_path):
    # A second build in another folder, with a compiler cache of its own: the result
    # must be byte for byte the installed one (and so the pinned hash). The downloads
    # are reused (they are checked by hash either way); everything else starts empty.
    cache = tmp_path / "cache"
    cache.mkdir()
    shutil.copytree(build.default_cache() / "downloads", cache / "downloads")
    out = tmp_path / "again.wasm"
    digest = build.build(out, cache)
    assert digest == build.load_pins()["engine_sha256"]
    assert out.read_bytes() == engine.wasm_path().read_bytes()
    assert (cache / f"engine-{build.build_key(build.load_pins())}.wasm").is_file()
