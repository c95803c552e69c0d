"""The engine's files: the pinned module inside the package and the compiled form of it
kept in the user's cache, with what names that entry (the settings that change the
compiled code).

Nothing here loads wasmtime, so the process that starts engine processes (the broker's,
on the worker and gvisor tiers) can see that the compiled engine is cached, as they
need it to be, without loading the engine itself; `runtime.sandbox.engine` compiles
and loads it.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
from pathlib import Path

from runtime.errors import EngineError
from specgen.cache_dir import cache_dir, read_sealed

#: The engine's pins (sources, toolchain, the built module's hash): one file, read by
#: the build (engine_build/build.py) and by this loader.
_PINS = json.loads((Path(__file__).with_name("engine_build") / "pins.json").read_text("utf-8"))
#: The version of the `quickjs-ng` sdist the engine is built from (its first three parts
#: are QuickJS-NG's own version: 0.17.0.2 carries QuickJS-NG 0.17.0).
ENGINE_VERSION: str = _PINS["quickjs_ng"]["version"]
#: SHA-256 of the module engine_build/build.py produces from the pinned sources.
WASM_SHA256: str = _PINS["engine_sha256"]
#: Where the build puts the module inside the package (never committed: built at install).
WASM_FILE = Path(__file__).with_name("_engine") / "qjs-ng.wasm"

#: Native wasm stack per call into the guest. 2 MiB is the most wasmtime accepts without
#: raising its async stack size (which would abort the process), and the QuickJS stack
#: allowance (`engine.JS_STACK_ALLOWANCE`) must stay well under it so JS recursion hits
#: RangeError first.
MAX_WASM_STACK = 2 << 20
#: The shadow stack the build links in at the bottom of memory (engine_build/build.py).
STACK_BYTES = 1 << 20
#: Address space reserved for each linear memory (wasm32's whole space), so a memory
#: never moves as it grows.
MEMORY_RESERVATION_BYTES = 4 << 30


def engine_settings() -> dict[str, object]:
    """Everything that changes the compiled artefact; part of the cache key."""
    return {
        "epoch_interruption": True,
        "max_wasm_stack": MAX_WASM_STACK,
        "memory_reservation": MEMORY_RESERVATION_BYTES,
        "memory_may_move": False,
        "stack_bytes": STACK_BYTES,
        "wasmtime": importlib.metadata.version("wasmtime"),
    }


def cache_key() -> str:
    """Hash of the pinned wasm, the patches, the engine settings and wasmtime's version."""
    material = json.dumps({"wasm": WASM_SHA256, **engine_settings()}, sort_keys=True)
    return hashlib.sha256(material.encode()).hexdigest()[:32]


def cache_path() -> Path:
    return cache_dir() / f"qjs-ng-{ENGINE_VERSION}-{cache_key()}.cwasm"


def wasm_path() -> Path:
    """The built module inside the installed package (never a path outside it)."""
    if not WASM_FILE.is_file():
        raise EngineError(
            f"engine refused: {WASM_FILE} is not built (run `make engine`, or reinstall the package)"
        )
    return WASM_FILE


def verify_wasm(data: bytes) -> bytes:
    """Return `data` if it is exactly the pinned build, else refuse."""
    digest = hashlib.sha256(data).hexdigest()
    if digest != WASM_SHA256:
        raise EngineError(
            f"engine refused: wasm module sha256 {digest} is not the pinned build of the quickjs-ng {ENGINE_VERSION} sdist ({WASM_SHA256})"
        )
    return data


def ensure_cached() -> None:
    """Compile and cache the engine module now unless a trusted entry is there.

    An isolated engine process sees the cache folder read-only, so it can load the
    compiled module but never store one: without this, on a machine where no run has
    cached it yet, every engine process would compile the engine at its start (about a
    second each), or find no folder at all to see. The process that starts engine
    processes calls this first; with a cache folder that cannot be written, nothing is
    stored and the engine processes compile as before. wasmtime is loaded only to
    compile, when no trusted entry is there."""
    if read_sealed(cache_path()) is None:
        from runtime.sandbox.engine import load_module, make_engine

        load_module(make_engine(pooled=False))
