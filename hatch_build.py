"""Hatch build hook: every wheel (editable included) gets the engine built from pinned sources.

Why at install: the sandbox's engine module is compiled from the pinned `quickjs-ng`
sdist with the pinned `ziglang` compiler (runtime/sandbox/engine_build/build.py, about
30 s on one core the first time, then cached), so it happens once, never at the first
`specgen run`. A regular wheel carries the module inside the package; an editable install
(`make`) leaves it in the checkout at runtime/sandbox/_engine/, where the package finds
it. The build fails (and so does the install) if the result is not the pinned SHA-256.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

ENGINE_IN_PACKAGE = "runtime/sandbox/_engine/qjs-ng.wasm"


def _engine_build(root: Path):
    """engine_build/build.py, loaded by path: nothing of the project is installed yet."""
    path = root / "runtime" / "sandbox" / "engine_build" / "build.py"
    spec = importlib.util.spec_from_file_location("plimsoll_engine_build", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class EngineBuildHook(BuildHookInterface):
    PLUGIN_NAME = "plimsoll-engine"

    def initialize(self, version: str, build_data: dict) -> None:
        if self.target_name != "wheel":
            return  # the sdist carries the sources and this hook, not the module
        root = Path(self.root)
        build = _engine_build(root)
        out = root / ENGINE_IN_PACKAGE
        try:
            build.build(out)
        except build.BuildError as exc:
            raise SystemExit(f"engine build: {exc}") from None
        except OSError as exc:
            raise SystemExit(f"engine build: {exc.strerror or exc}: {exc.filename!r}") from None
        if version != "editable":
            build_data["force_include"][str(out)] = ENGINE_IN_PACKAGE
