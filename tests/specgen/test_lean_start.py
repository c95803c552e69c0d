"""`specgen build` on a JSON document loads only what it uses, and runs without the
cyclic GC; the output does not change (the goldens prove that)."""

from __future__ import annotations

import atexit
import gc
import json
import subprocess
import sys
from pathlib import Path

from specgen.oneshot import one_shot_without_gc

REPO = Path(__file__).resolve().parents[2]
SPEC = REPO / "tests" / "data" / "smart-home.openapi.json"

_PROBE = """
import gc, json, sys
from specgen.cli import main
sys.argv = ["specgen", *sys.argv[1:]]
try:
    main()
except SystemExit:
    pass
heavy = ("yaml", "referencing", "importlib.metadata", "jsonschema", "openapi_spec_validator")
print(json.dumps({"loaded": [m for m in heavy if m in sys.modules], "gc": gc.isenabled()}))
"""


def _probe(*args: str) -> dict[str, object]:
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE, *args], capture_output=True, text=True, check=True
    )
    return json.loads(proc.stdout.splitlines()[-1])


def test_build_of_a_json_document_imports_no_yaml_metadata_or_referencing(tmp_path: Path) -> None:
    seen = _probe("build", str(SPEC), "-o", str(tmp_path / "out"), "--global", "home")
    assert seen == {"loaded": [], "gc": False}


def test_a_yaml_document_still_loads_yaml_when_needed(tmp_path: Path) -> None:
    spec = tmp_path / "doc.yaml"
    spec.write_text(
        "openapi: 3.0.3\ninfo: {title: t, version: '1'}\npaths:\n  /a:\n    get:\n      operationId: a\n      responses: {'200': {description: ok}}\n"
    )
    seen = _probe("build", str(spec), "-o", str(tmp_path / "out"))
    assert seen["loaded"] == ["yaml"]


def test_only_built_in_commands_switch_the_collector_off() -> None:
    assert gc.isenabled()
    try:
        assert not one_shot_without_gc(["run", "x.js"], {"build", "check"})
        assert not one_shot_without_gc(["--help"], {"build", "check"})
        assert gc.isenabled()
        assert one_shot_without_gc(["--quiet", "build", "x.json"], {"build", "check"})
        assert not gc.isenabled()
    finally:
        atexit.unregister(gc.freeze)
        gc.enable()
        gc.unfreeze()


def test_what_a_build_allocated_is_frozen_before_the_shutdown_collection() -> None:
    probe = """
import atexit, gc, json
# registered first, so it runs after the handler one_shot_without_gc registers
atexit.register(lambda: print(json.dumps(sum(len(gc.get_objects(g)) for g in range(3)))))
from specgen.oneshot import one_shot_without_gc
assert one_shot_without_gc(["build"], {"build"})
kept = [[i] for i in range(50_000)]  # lists are always tracked
"""
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert int(proc.stdout) < 1_000  # the 50,000 lists went to the permanent generation
