"""`specgen build` on a JSON document loads only what it uses, and runs without the
cyclic GC; the output does not change (the goldens prove that)."""

from __future__ import annotations

import atexit
import gc
import json
import subprocess
import sys
from pathlib import Path

import pytest

from specgen import oneshot
from specgen.oneshot import keep_until_exit, one_shot_without_gc

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
print(json.dumps({"loaded": [m for m in HEAVY if m in sys.modules], "gc": gc.isenabled()}))
"""

#: Modules a build of a JSON document has no use for, each a few milliseconds or more
#: of every build's start if something imported it at module level again.
HEAVY = (
    # only for YAML input, `specgen validate`, or a plugged-in command
    "yaml",
    "referencing",
    "importlib.metadata",
    "jsonschema",
    "openapi_spec_validator",
    # jiter reads a JSON document; orjson only what jiter refuses (specgen/load.py)
    "orjson",
    # the runtime and what it runs on (specgen never imports runtime/)
    "runtime",
    "wasmtime",
    "httpx",
    "mcp",
    "asyncio",
    "ssl",
    "subprocess",
    "concurrent.futures",
    "logging",
    # the cache folder is computed without platformdirs on Linux (cache_dir.py)
    "platformdirs",
    # other commands' modules, and RE2 (pins and examples only)
    "specgen.check",
    "specgen.extract",
    "specgen.grant_init",
    "specgen.grant_view",
    "specgen.security",
    "specgen.regex",
    "re2",
)


def _probe(*args: str) -> dict[str, object]:
    probe = f"HEAVY = {HEAVY!r}\n{_PROBE}"
    proc = subprocess.run(
        [sys.executable, "-c", probe, *args], capture_output=True, text=True, check=True
    )
    return json.loads(proc.stdout.splitlines()[-1])


def test_build_of_a_json_document_imports_no_yaml_metadata_or_referencing(tmp_path: Path) -> None:
    seen = _probe("build", str(SPEC), "-o", str(tmp_path / "out"), "--global", "home")
    assert seen == {"loaded": [], "gc": False}
    assert (tmp_path / "out" / "preamble.js").is_file()  # the build ran to the end


def test_a_yaml_document_still_loads_yaml_when_needed(tmp_path: Path) -> None:
    spec = tmp_path / "doc.yaml"
    spec.write_text(
        "openapi: 3.0.3\ninfo: {title: t, version: '1'}\npaths:\n  /a:\n    get:\n      operationId: a\n      responses: {'200': {description: ok}}\n"
    )
    seen = _probe("build", str(spec), "-o", str(tmp_path / "out"))
    assert seen["loaded"] == ["yaml"]
    assert (tmp_path / "out" / "preamble.js").is_file()


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
        atexit.unregister(oneshot._leave_without_teardown)
        oneshot._one_shot.clear()
        gc.enable()
        gc.unfreeze()


def test_what_a_build_allocated_is_frozen_before_the_shutdown_collection() -> None:
    probe = """
import atexit, gc, json
# registered first, so it runs after the handler one_shot_without_gc registers
atexit.register(lambda: print(json.dumps(sum(len(gc.get_objects(g)) for g in range(3)))))
from specgen import oneshot
from specgen.oneshot import keep_until_exit, one_shot_without_gc
assert one_shot_without_gc(["build"], {"build"})
kept = [[i] for i in range(50_000)]  # lists are always tracked
"""
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert int(proc.stdout) < 1_000  # the 50,000 lists went to the permanent generation


_LEAVE = """
import atexit, os, sys
from specgen.oneshot import one_shot_without_gc, record_exit

def teardown(event, args, write=os.write):
    if event == "cpython.PyInterpreterState_Clear":  # raised while the interpreter finalizes
        write(1, b"torn down\\n")


sys.addaudithook(teardown)
assert one_shot_without_gc([sys.argv[1]], {"build"})
atexit.register(lambda: print("handler ran"))  # registered by the command: still runs
sys.stdout.write("x" * 200_000)  # buffered until exit
record_exit(int(sys.argv[2]) if sys.argv[2] != "none" else None)
raise SystemExit(None if sys.argv[2] == "none" else int(sys.argv[2]))
"""


@pytest.mark.parametrize(("status", "code"), [("0", 0), ("1", 1), ("2", 2), ("none", 0)])
def test_a_built_in_command_leaves_without_teardown_and_loses_nothing(
    status: str, code: int
) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", _LEAVE, "build", status], capture_output=True, text=True
    )
    assert proc.returncode == code
    assert proc.stdout == "x" * 200_000 + "handler ran\n"  # flushed, handler run, no teardown


def test_other_commands_and_other_endings_tear_down_as_usual() -> None:
    for args in (["run", "0"], ["build", "none"]):
        script = _LEAVE if args[0] == "run" else _LEAVE.replace("record_exit(", "(")
        script = script.replace("assert one_shot_without_gc", "one_shot_without_gc")
        proc = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True)
        assert proc.returncode == 0
        assert proc.stdout.endswith("handler ran\ntorn down\n")


def test_big_output_through_a_pipe_arrives_whole(tmp_path: Path) -> None:
    """`build` without -o prints every file; the fast exit must not cut it short."""
    from specgen import build as pipeline
    from specgen.render import all_sections

    result = pipeline.run(str(SPEC), pipeline.Options(global_name="home"))
    want = all_sections(result.gen, result.files)
    proc = subprocess.run(
        [sys.executable, "-m", "specgen", "build", str(SPEC), "--global", "home", "-q"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert proc.stdout == want


def test_only_a_one_shot_process_keeps_a_result_until_exit() -> None:
    kept = [[1]]
    keep_until_exit(kept)
    assert oneshot._kept == []  # a library caller's results are freed as usual
    oneshot._one_shot[:] = [True]
    try:
        keep_until_exit(kept)
        keep_until_exit(["latest"])
        assert oneshot._kept == [["latest"]]  # one result, never a growing list
    finally:
        oneshot._one_shot.clear()
        oneshot._kept.clear()


def test_help_lists_the_runtime_commands_without_importing_the_runtime() -> None:
    probe = """
import json, sys
from specgen.cli import main
sys.argv = ["specgen", "--help"]
try:
    main()
except SystemExit:
    pass
print(json.dumps(sorted(m for m in sys.modules if m == "runtime" or m.startswith("runtime."))))
"""
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    *listing, loaded = proc.stdout.splitlines()
    assert json.loads(loaded) == []
    rows = {line.split()[0]: line for line in listing if line.startswith("  ")}
    assert rows["run"].split(None, 1)[1].startswith("Run CODE.js in a fresh sandbox")
    assert rows["mcp"].split(None, 1)[1].startswith("Serve agent code execution")


def test_the_listed_summaries_are_the_plugged_in_commands_own_short_help() -> None:
    from importlib.metadata import entry_points

    import click

    from specgen.cli import PLUGIN_SUMMARIES

    plugins = {ep.name: ep for ep in entry_points(group="specgen.commands")}
    assert set(PLUGIN_SUMMARIES) <= set(plugins)
    for name, summary in PLUGIN_SUMMARIES.items():
        real = plugins[name].load()
        stand_in = click.Command(name, help=summary)
        for limit in (12, 30, 45, 60, 80, 10**6):
            assert stand_in.get_short_help_str(limit) == real.get_short_help_str(limit), name
