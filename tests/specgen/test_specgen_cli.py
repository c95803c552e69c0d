"""The `specgen` command line: exit codes, one-line refusals, files, emit kinds and check.

Most cases run in-process through click's CliRunner (fast); a few run the installed
console script as a real subprocess, because the entry point, stdin piping and "never a
traceback" are only really proven from outside the interpreter.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result

from specgen.cli import EMIT_KINDS, cli

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "golden"
SMART = ROOT / "tests/data/smart-home.openapi.json"
HAZARDS = ROOT / "tests/data/hazards.openapi.json"
FILES = ("allow.json", "description.txt", "health_check.txt", "preamble.js", "types.d.ts")
HEALTH_NOTE_LINE = (
    "specgen: health_check not set: no operation is marked x-plimsoll-health-check, so the "
    "profile gets no health_check: after an upstream 503 the per-run breaker waits out its full "
    "cooldown instead of probing for recovery. Mark the one concrete GET that reports whether "
    "the API can take traffic again"
)


def run(*args: str | Path, input: bytes | str | None = None, full: bool = False) -> Result:
    """Invoke the CLI; build/emit/check in reference mode unless `full` (or --compat given).

    This file pins the reference's CLI behaviour; the default build's differences are
    tested in test_specgen_params.py.
    """
    argv = [str(a) for a in args]
    if argv and argv[0] in ("build", "emit", "check") and not full and "--compat" not in argv:
        argv.append("--compat")
        argv.append("reference")
    return CliRunner().invoke(cli, argv, input=input)


def refused(result: Result, code: int = 1) -> str:
    """Assert a clean refusal: the exit code, nothing on stdout, ONE line on stderr."""
    assert result.exit_code == code, result.output
    assert isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def golden(name: str) -> dict[str, str]:
    folder = GOLDEN / name
    return {f: (folder / f).read_text() for f in FILES if (folder / f).exists()}


def folder(path: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(path.iterdir())}


def write(path: Path, data: Any) -> Path:
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def minimal(**top: Any) -> dict[str, Any]:
    d: dict[str, Any] = {
        "openapi": "3.0.3",
        "info": {"title": "t", "version": "1"},
        "paths": {"/a": {"get": {"operationId": "a", "responses": {"200": {"description": "OK"}}}}},
    }
    d.update(top)
    return d


# -- help and usage (exit 0 / 2) -------------------------------------------------------------


@pytest.mark.parametrize("command", [[], ["build"], ["emit"], ["check"], ["validate"], ["extract"]])
def test_help_on_every_command(command: list[str]) -> None:
    for flag in ("--help", "-h"):
        result = run(*command, flag)
        assert result.exit_code == 0, result.output
        assert "Usage: " in result.stdout


@pytest.mark.parametrize(
    "args",
    [
        ["build"],
        ["build", str(SMART), "--bogus"],
        ["emit", "preambel", str(SMART)],
        ["emit", "allow"],
        ["check", str(SMART)],
        ["check", str(SMART), "--grants", "g.json"],
        ["check", str(SMART), "--profile", "p"],
        ["extract", str(SMART), "--sha256", "00", "-o", "x.json"],
        ["nosuchcommand"],
    ],
)
def test_usage_errors_exit_2(args: list[str]) -> None:
    result = run(*args)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert result.stdout == ""


def test_outdir_that_is_a_file_is_a_usage_error(tmp_path: Path) -> None:
    target = write(tmp_path / "file", "x")
    assert run("build", SMART, "-o", target).exit_code == 2


# -- one-line refusals (exit 1) ----------------------------------------------------------------


def test_missing_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.json"
    assert (
        refused(run("build", missing))
        == f"specgen: {missing}: cannot read: No such file or directory"
    )


def test_unreadable_file(tmp_path: Path) -> None:
    assert refused(run("build", tmp_path)) == f"specgen: {tmp_path}: cannot read: Is a directory"
    if os.geteuid() != 0:  # root reads anything; the directory case covers it there
        locked = write(tmp_path / "locked.json", minimal())
        locked.chmod(0)
        assert refused(run("build", locked)) == f"specgen: {locked}: cannot read: Permission denied"


def test_endless_inputs_are_refused_not_read_forever(tmp_path: Path) -> None:
    """Found: `specgen build /dev/zero` (and --grants /dev/zero) read until memory ran out.
    A device is not a regular file, so it is refused before it is opened; a regular file
    is read up to the limit only."""
    from specgen.files import read_regular

    not_regular = "cannot read: not a regular file"
    assert refused(run("build", "/dev/zero")) == (
        f"specgen: /dev/zero: {not_regular} (give a file, a pipe, or - to read stdin)"
    )
    g = grants(tmp_path, SMART_ROUTES, [])
    assert refused(run("check", SMART, "--grants", "/dev/zero", "--profile", "home")) == (
        f"specgen: grants /dev/zero: {not_regular}"
    )
    assert run("check", SMART, "--grants", g, "--profile", "home").exit_code == 0
    assert read_regular(write(tmp_path / "four", "abcd"), 4) == b"abcd"
    with pytest.raises(OSError, match="larger than 3 bytes"):
        read_regular(tmp_path / "four", 3)


def test_stdin_is_read_up_to_the_limit_only() -> None:
    import io

    from specgen.files import read_stream_limited

    assert read_stream_limited(io.BytesIO(b"abcd"), 4) == b"abcd"
    stream = io.BytesIO(b"abcdef")
    with pytest.raises(OSError, match="larger than 4 bytes"):
        read_stream_limited(stream, 4)
    assert stream.tell() == 5


@pytest.mark.parametrize("text", ["{", '{"openapi": "3.0.3",}', "[1, 2", '{"a": 1} x'])
def test_invalid_json(tmp_path: Path, text: str) -> None:
    spec = write(tmp_path / "bad.json", text)
    assert refused(run("build", spec)).startswith(f"specgen: {spec}: invalid JSON: ")


@pytest.mark.parametrize(
    "text", ["a: [1,\n", "openapi: 3.0.3\n  bad: indent\n x", "a: 'unterminated\n"]
)
def test_invalid_yaml(tmp_path: Path, text: str) -> None:
    spec = write(tmp_path / "bad.yaml", text)
    assert refused(run("build", spec)).startswith(f"specgen: {spec}: invalid YAML: ")


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("[1]", "list"),
        ("- a\n", "list"),
        ('"s"', "str"),
        ("7", "int"),
        ("", "empty"),
        ("null", "empty"),
    ],
)
def test_top_level_must_be_an_object(tmp_path: Path, text: str, kind: str) -> None:
    spec = write(tmp_path / "top.json", text)
    assert (
        refused(run("build", spec))
        == f"specgen: {spec}: the top level must be an object, not {kind}"
    )


@pytest.mark.parametrize(
    ("top", "shown"),
    [({"openapi": "2.0"}, '"2.0"'), ({"openapi": "4.0.0"}, '"4.0.0"')],
)
def test_openapi_2_is_refused(tmp_path: Path, top: dict[str, Any], shown: str) -> None:
    spec = write(tmp_path / "old.json", minimal(**top))
    assert refused(run("build", spec)) == f"specgen: unsupported openapi version {shown} (need 3.x)"
    # a Swagger 2.0 document (no "openapi" at all) is named as such: tests/specgen/test_operator_edges.py


def test_structural_validation_error_is_one_line_with_pointer_and_count(tmp_path: Path) -> None:
    d = minimal()
    d["paths"]["/a"]["get"]["responses"] = "nope"
    del d["info"]["version"]
    spec = write(tmp_path / "invalid.json", d)
    line = refused(run("build", spec))
    head = f"specgen: {spec}: not a valid OpenAPI 3.0.3 document: "
    assert line in (
        head + '"nope" is not of type "object" at /paths/~1a/get/responses (and 1 more error)',
        head + '"version" is a required property at /info (and 1 more error)',
    )
    # one error only: no count
    d = minimal()
    d["paths"]["/a"]["get"]["responses"] = "nope"
    d["openapi"] = "3.1.0"
    spec31 = write(tmp_path / "invalid31.json", d)
    assert refused(run("build", spec31)) == (
        f"specgen: {spec31}: not a valid OpenAPI 3.1.0 document: "
        '"nope" is not of type "object" at /paths/~1a/get/responses'
    )


def test_no_validate_skips_the_schema_but_not_the_rules(tmp_path: Path) -> None:
    d = minimal()
    d["paths"]["/a"]["get"]["responses"] = "nope"
    spec = write(tmp_path / "invalid.json", d)
    result = run("emit", "allow", spec, "--no-validate")
    assert result.exit_code == 0, result.output
    assert result.stdout == '[\n  "GET /a"\n]\n'
    d["paths"]["/a"]["get"]["operationId"] = "get"
    spec = write(tmp_path / "invalid2.json", d)
    assert "injected client's own methods" in refused(run("build", spec, "--no-validate"))


def test_remote_ref_is_named(tmp_path: Path) -> None:
    d = minimal()
    d["paths"]["/b"] = {"$ref": "https://example.com/other.json#/paths/~1b"}
    spec = write(tmp_path / "remote.json", d)
    assert refused(run("build", spec)) == (
        f'specgen: {spec}: path "/b": $ref "https://example.com/other.json#/paths/~1b" points '
        "outside the document; only local references (#/...) are resolved, so bundle the document first"
    )


def test_unresolvable_ref_is_named(tmp_path: Path) -> None:
    d = minimal()
    d["paths"]["/a"]["get"]["parameters"] = [{"$ref": "#/components/parameters/Gone"}]
    spec = write(tmp_path / "dangling.json", d)
    assert refused(run("build", spec)) == (
        f'specgen: {spec}: GET /a parameter 0: $ref "#/components/parameters/Gone" does not resolve'
    )


def test_servers_that_disagree_and_server_picking_one(tmp_path: Path) -> None:
    d = minimal(servers=[{"url": "https://a.example.com/v1"}, {"url": "https://b.example.com/v2"}])
    spec = write(tmp_path / "servers.json", d)
    assert refused(run("build", spec)) == (
        "specgen: the document's servers disagree on the path (/v1, /v2); choose one with --server URL"
    )
    result = run("emit", "allow", spec, "--server", "https://b.example.com/v2")
    assert result.exit_code == 0, result.output
    assert result.stdout == '[\n  "GET /v2/a"\n]\n'
    result = run("emit", "allow", spec, "--server", "/v1/")
    assert result.stdout == '[\n  "GET /v1/a"\n]\n'


def test_strict_refuses_what_would_be_skipped() -> None:
    line = refused(run("build", HAZARDS, "--global", "home", "--strict"))
    assert line == (
        "specgen: --strict: cannot generate OPTIONS /api/v2/feed: host-API grants enforce only "
        "GET/PUT/POST/DELETE/PATCH (and 3 more)"
    )


def test_a_generation_error_through_the_cli(tmp_path: Path) -> None:
    d = minimal()
    d["paths"]["/b"] = {
        "get": {"operationId": "__proto__", "responses": {"200": {"description": "OK"}}}
    }
    spec = write(tmp_path / "proto.json", d)
    assert refused(run("emit", "json", spec)) == (
        'specgen: operationId "__proto__" yields method name "__proto__", a name every object '
        "inherits from Object.prototype; rename the operation"
    )


# -- input forms -------------------------------------------------------------------------------


@pytest.mark.parametrize("case", ["smart-home", "hazards"])
def test_yaml_input_gives_the_same_output_as_json(tmp_path: Path, case: str) -> None:
    spec = SMART if case == "smart-home" else HAZARDS
    as_yaml = write(
        tmp_path / "spec.yaml", yaml.safe_dump(json.loads(spec.read_text()), sort_keys=False)
    )
    from_json = run("build", spec, "--global", "home")
    from_yaml = run("build", as_yaml, "--global", "home")
    assert from_json.exit_code == from_yaml.exit_code == 0
    assert from_yaml.stdout == from_json.stdout
    assert from_yaml.stderr == from_json.stderr
    assert from_json.stdout.startswith("=== allow")


YAML_SPEC = """\
openapi: 3.0.3
info: {title: Y, version: "2024.1"}
paths:
  /reports/{day}:
    get:
      operationId: report
      summary: 2024-01-31
      parameters:
        - {name: day, in: path, required: true, schema: {type: string}}
      responses:
        200: {description: OK}
        404: {description: missing}
"""


def test_a_yaml_alias_bomb_is_refused_not_expanded(tmp_path: Path) -> None:
    """Found: nine levels of ten aliases (about 400 bytes, 10**9 values) hung build."""
    lines = ["openapi: 3.0.0", "a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    bomb = write(tmp_path / "bomb.yaml", "\n".join(lines) + "\n")
    size = bomb.stat().st_size
    assert refused(run("build", bomb)) == (
        f"specgen: {bomb}: YAML aliases expand to more than {size + 10_000} values; "
        "refusing a document that grows that much on loading"
    )


def test_yaml_anchors_reused_as_shared_schemas_still_load(tmp_path: Path) -> None:
    doc = yaml.safe_load(SMART.read_text())
    text = yaml.safe_dump(doc)
    shared = "x-shared: &shared {type: object, properties: {a: {type: string}}}\n"
    uses = "".join(f"x-use-{i}: *shared\n" for i in range(200))
    spec = write(tmp_path / "anchors.yaml", shared + uses + text)
    assert run("build", spec).exit_code == 0


def test_yaml_int_keys_and_dates_load_as_json_would(tmp_path: Path) -> None:
    # `200:` is an int key in YAML and an unquoted date is a date object; JSON has neither
    spec = write(tmp_path / "int-keys.yaml", YAML_SPEC)
    result = run("emit", "description", spec)
    assert result.exit_code == 0, result.output
    assert result.stdout.endswith("  host.report(day)  ->  GET /reports/{day}\n      2024-01-31\n")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a: &x [*x]\n", "YAML nests too deeply (or refers to itself)"),
        ("a: !!binary aGVsbG8=\n", "a YAML value of type bytes has no JSON equivalent"),
        ("? [1, 2]\n: x\n", "invalid YAML"),
    ],
)
def test_yaml_without_a_json_equivalent_is_refused(tmp_path: Path, text: str, message: str) -> None:
    spec = write(tmp_path / "odd.yaml", text)
    assert refused(run("build", spec)).startswith(f"specgen: {spec}: {message}")


def test_an_internal_error_is_one_line_too(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from specgen import cli as cli_module

    def boom(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("simulated bug")

    monkeypatch.setattr("specgen.build.generate", boom)
    # main() would switch this test process's collector off for good (specgen/oneshot.py)
    monkeypatch.setattr(cli_module, "one_shot_without_gc", lambda argv, builtin: False)
    monkeypatch.setattr(sys, "argv", ["specgen", "build", str(SMART)])
    monkeypatch.delenv("SPECGEN_DEBUG", raising=False)
    with pytest.raises(SystemExit) as exc:
        cli_module.main()
    assert exc.value.code == 1
    captured = capsys.readouterr()
    assert captured.err == "specgen: internal error: RuntimeError: simulated bug\n"
    assert captured.out == ""


def test_stdin_dash(tmp_path: Path) -> None:
    result = run("emit", "preamble", "-", "--global", "home", input=SMART.read_bytes())
    assert result.exit_code == 0, result.output
    assert result.stdout == (GOLDEN / "smart-home/preamble.js").read_text()
    line = refused(run("build", "-", input=b"{"))
    assert line.startswith("specgen: stdin: invalid JSON: ")


# -- build ------------------------------------------------------------------------------------


def test_build_writes_the_files_and_reports_on_stderr(tmp_path: Path) -> None:
    out = tmp_path / "out" / "nested"
    result = run("build", HAZARDS, "-o", out, "--global", "home", "--verbose")
    assert result.exit_code == 0, result.output
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        "specgen: skipped OPTIONS /api/v2/feed (host-API grants enforce only GET/PUT/POST/DELETE/PATCH)",
        'specgen: skipped GET /api/v2/files/{name}.json (has a parameter that is only part of a segment ("{name}.json"); a grant\'s * stands for a whole segment)',
        'specgen: skipped GET /api/v2/legacy/ (maps to route "/api/v2/legacy/", which a grant cannot hold: path must not contain empty, dot, traversal, or ";" segments)',
        'specgen: skipped GET /api/v2/search (requires query "q", which a brokered call cannot send: a grant authorizes a literal path, the broker rejects any query string, and guest code sets no headers)',
        'specgen: warning: GET /api/v2/feed: optional query "cursor" cannot be sent through the broker, so the generated method always calls the bare route',
        'specgen: warning: GET /api/v2/stock has no operationId, so its method is named "get_stock" after its verb and path; give it an operationId for a name that survives path changes',
        HEALTH_NOTE_LINE,
        "specgen: built 8 operations; 4 skipped, 2 warnings (--verbose to list)",
        f"specgen: wrote allow.json, description.txt, preamble.js, types.d.ts to {out}",
    ]
    assert folder(out) == golden("hazards")
    for name in folder(out):
        assert (out / name).stat().st_mode & 0o777 == 0o644


def test_build_replaces_files_by_rename_and_removes_a_stale_health_check(tmp_path: Path) -> None:
    out = tmp_path / "out"
    first = run("build", SMART, "-o", out, "--global", "home")
    assert first.stderr.splitlines() == [
        "specgen: built 9 operations; 0 skipped, 0 warnings",
        f"specgen: wrote allow.json, description.txt, health_check.txt, preamble.js, types.d.ts to {out}",
    ]
    assert (out / "health_check.txt").read_text() == "GET /status\n"
    inode = (out / "allow.json").stat().st_ino
    keep = write(out / "notes.md", "mine")
    second = run("build", HAZARDS, "-o", out, "--global", "home")
    assert second.exit_code == 0, second.output
    assert not (out / "health_check.txt").exists()
    assert (out / "allow.json").stat().st_ino != inode  # a new file renamed over the old one
    assert keep.read_text() == "mine"  # nothing but specgen's own files is touched
    assert folder(out) == {**golden("hazards"), "notes.md": "mine"}


def test_a_failed_write_leaves_the_old_files_and_no_temporary_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    assert run("build", SMART, "-o", out, "--global", "home").exit_code == 0
    before = folder(out)

    def disk_full(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("specgen.files.os.replace", disk_full)
    result = run("build", HAZARDS, "-o", out, "--global", "home")
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    assert result.stderr.splitlines()[-1] == (
        f"specgen: write {out / 'allow.json'}: No space left on device"  # the file, not the folder
    )
    assert folder(out) == before  # old files intact, no temporary file left behind


def test_build_without_outdir_prints_sections(tmp_path: Path) -> None:
    result = run("build", SMART, "--global", "home")
    assert result.exit_code == 0, result.output
    g = golden("smart-home")
    assert result.stdout == (
        '=== allow (paste into the grants profile\'s "allow") ===\n'
        + g["allow.json"]
        + "\n=== preamble (the profile's preamble / preamble_file) ===\n"
        + g["preamble.js"]
        + "\n=== description (the model-facing tool description) ===\n"
        + g["description.txt"]
        + "\n=== health_check (the profile's health_check backpressure probe) ===\n"
        + g["health_check.txt"]
        + "\n=== types (types.d.ts: each method's parameters, body and response in TypeScript)"
        " ===\n" + g["types.d.ts"]
    )
    # no skips, no warnings, and a health check is set: the summary alone
    assert result.stderr == "specgen: built 9 operations; 0 skipped, 0 warnings\n"
    hazards = run("build", HAZARDS, "--global", "home")
    assert "=== health_check" not in hazards.stdout
    description, types = hazards.stdout.split("\n=== types (types.d.ts: ")
    assert description.endswith(golden("hazards")["description.txt"])
    assert types.endswith(golden("hazards")["types.d.ts"])
    assert hazards.stderr.splitlines()[-2:] == [
        "specgen: note: no GET is marked x-plimsoll-health-check, so the profile gets no "
        "health_check (see docs/grants.md)",
        "specgen: built 8 operations; 4 skipped, 2 warnings (--verbose to list)",
    ]


# -- emit -------------------------------------------------------------------------------------


def test_emit_kinds_are_the_documented_ones() -> None:
    assert set(EMIT_KINDS) == {
        "allow",
        "catalog",
        "preamble",
        "description",
        "health",
        "types",
        "json",
    }


@pytest.mark.parametrize("case", ["smart-home", "hazards"])
def test_emit_every_kind(case: str) -> None:
    spec = SMART if case == "smart-home" else HAZARDS
    g = golden(case)
    out = {kind: run("emit", kind, spec, "--global", "home") for kind in EMIT_KINDS}
    assert all(r.exit_code == 0 for r in out.values())
    assert out["allow"].stdout == out["catalog"].stdout == g["allow.json"]
    assert out["preamble"].stdout == g["preamble.js"]
    assert out["description"].stdout == g["description.txt"]
    assert out["health"].stdout == g.get("health_check.txt", "")
    assert out["types"].stdout == g["types.d.ts"]
    # every kind prints the same notes on stderr, but json (which holds them) only the summary
    assert len({r.stderr for k, r in out.items() if k != "json"}) == 1
    if "json" in out:
        assert out["json"].stderr.splitlines() == [out["allow"].stderr.splitlines()[-1]]

    raw = out["json"].stdout
    bundle = json.loads(raw)
    assert raw.endswith("}\n")
    assert "=>" not in raw and "=\\u003e" in raw  # escaped like Go's encoding/json
    spec_doc = json.loads(spec.read_text())
    assert bundle["title"] == spec_doc["info"]["title"]
    assert bundle["version"] == spec_doc["info"]["version"]
    assert bundle["global"] == "home"
    assert bundle["allow"] == json.loads(g["allow.json"])
    assert bundle["preamble"] == g["preamble.js"]
    assert bundle["description"] == g["description.txt"]
    keys = ["title", "version", "global", "allow", "preamble", "description"]
    if case == "smart-home":
        assert list(bundle) == [*keys, "health_check"]
        assert bundle["health_check"] == "GET /status"
    else:
        assert list(bundle) == [*keys, "skipped", "warnings", "health_note"]
        assert (
            bundle["skipped"][0]
            == "OPTIONS /api/v2/feed: host-API grants enforce only GET/PUT/POST/DELETE/PATCH"
        )
        assert len(bundle["skipped"]) == 4
        assert len(bundle["warnings"]) == 2
        assert HEALTH_NOTE_LINE.endswith(bundle["health_note"])


# -- check ------------------------------------------------------------------------------------


def copy_golden(tmp_path: Path, case: str) -> Path:
    target = tmp_path / case
    shutil.copytree(GOLDEN / case, target)
    return target


def test_check_passes_on_golden(tmp_path: Path) -> None:
    result = run("check", SMART, GOLDEN / "smart-home", "--global", "home")
    assert result.exit_code == 0, result.output
    assert result.stdout == ""
    assert result.stderr == "specgen: up to date\n"


def assert_stale(result: Result, spec: Path, out: Path, tail: str = "") -> None:
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    assert result.stderr.splitlines()[-1] == (
        f"specgen: {out} is stale; regenerate it with: specgen build {spec} -o {out} --global home"
        + tail
    )


def test_check_fails_after_editing_a_file(tmp_path: Path) -> None:
    out = copy_golden(tmp_path, "smart-home")
    path = out / "preamble.js"
    path.write_text(path.read_text().replace('h.get("/scenes")', 'h.get("/admin")'))
    result = run("check", SMART, out, "--global", "home")
    assert_stale(result, SMART, out, " --compat reference")
    assert result.stdout.splitlines()[:2] == [
        f"--- {path} (committed)",
        f"+++ {path} (from the document)",
    ]
    assert '-  h["listScenes"] = () => h.get("/admin");' in result.stdout.splitlines()
    assert '+  h["listScenes"] = () => h.get("/scenes");' in result.stdout.splitlines()
    # the regenerate command really regenerates
    assert run("build", SMART, "-o", out, "--global", "home").exit_code == 0
    assert run("check", SMART, out, "--global", "home").exit_code == 0


def test_check_fails_on_a_stale_health_check(tmp_path: Path) -> None:
    out = copy_golden(tmp_path, "hazards")
    write(out / "health_check.txt", "GET /api/v2/feed\n")
    result = run("check", HAZARDS, out, "--global", "home")
    assert_stale(result, HAZARDS, out, " --compat reference")
    health = out / "health_check.txt"
    assert result.stdout.splitlines()[:2] == [
        f"--- {health} (committed)",
        f"+++ {health} (should not exist)",
    ]
    assert "-GET /api/v2/feed" in result.stdout.splitlines()


def test_check_fails_after_deleting_a_file(tmp_path: Path) -> None:
    out = copy_golden(tmp_path, "smart-home")
    (out / "allow.json").unlink()
    result = run("check", SMART, out, "--global", "home", full=True)
    assert_stale(result, SMART, out)
    allow = out / "allow.json"
    assert result.stdout.splitlines()[:2] == [
        f"--- {allow} (missing)",
        f"+++ {allow} (from the document)",
    ]
    assert '+  "GET /lights",' in result.stdout.splitlines()


def test_check_with_other_options_fails_and_names_them(tmp_path: Path) -> None:
    result = run(
        "check", SMART, GOLDEN / "smart-home", "--global", "house", "--server", "/v9", full=True
    )
    assert result.exit_code == 1
    assert result.stderr.splitlines()[-1].endswith(
        f"regenerate it with: specgen build {SMART} -o {GOLDEN / 'smart-home'} --global house --server /v9"
    )
    # every file differs: five diffs
    assert result.stdout.count("\n--- ") + result.stdout.startswith("--- ") == 5


# -- check --grants/--profile -----------------------------------------------------------------


SMART_ROUTES = json.loads((GOLDEN / "smart-home/allow.json").read_text())


def grants(tmp_path: Path, catalog: list[str], allow: list[str], name: str = "home") -> Path:
    profile = {"base_url": "https://home.internal", "allow": allow, "catalog": catalog}
    return write(tmp_path / "grants.json", {"profiles": {name: profile}})


def drift(tmp_path: Path, catalog: list[str], allow: list[str]) -> tuple[Result, list[str]]:
    g = grants(tmp_path, catalog, allow)
    result = run("check", SMART, "--grants", g, "--profile", "home", "--global", "home")
    head, *lines = result.stderr.splitlines()
    assert head == (f'specgen: {g}: profile "home" disagrees with {SMART} ({len(lines)} line(s)):')
    assert all(line.startswith("  ") for line in lines), lines
    return result, [line.removeprefix("  ") for line in lines]


def test_check_grants_passes_on_a_matching_profile(tmp_path: Path) -> None:
    allow = ["GET /lights/kitchen-1", "PATCH /lights/*", "GET /status", "GET /rooms/attic/lights"]
    g = grants(tmp_path, SMART_ROUTES, allow)
    result = run("check", SMART, "--grants", g, "--profile", "home", "--global", "home")
    assert result.exit_code == 0, result.output
    assert result.stderr == "specgen: up to date\n"
    both = run(
        "check",
        SMART,
        GOLDEN / "smart-home",
        "--grants",
        g,
        "--profile",
        "home",
        "--global",
        "home",
    )
    assert both.exit_code == 0, both.output


def test_check_grants_drifted_catalog(tmp_path: Path) -> None:
    catalog = [r for r in SMART_ROUTES if r not in ("GET /scenes", "PUT /lights/*")]
    result, lines = drift(tmp_path, catalog, [])
    assert result.exit_code == 1
    assert lines == [
        "catalog: + PUT /lights/* (in the document, not in the catalog)",
        "catalog: + GET /scenes (in the document, not in the catalog)",
    ]


def test_check_grants_extra_route(tmp_path: Path) -> None:
    result, lines = drift(tmp_path, [*SMART_ROUTES, "DELETE /scenes/*"], [])
    assert result.exit_code == 1
    assert lines == ["catalog: - DELETE /scenes/* (not in the document)"]


def test_check_grants_reordered_catalog(tmp_path: Path) -> None:
    result, lines = drift(tmp_path, list(reversed(SMART_ROUTES)), [])
    assert result.exit_code == 1
    assert lines == [
        "catalog: lists the document's routes in another order (emit catalog writes it)"
    ]


def test_check_grants_allow_entry_outside_the_catalog(tmp_path: Path) -> None:
    allow = ["GET /lights/1", "DELETE /scenes", "GET /lights/1/extra", "POST /lights/*"]
    result, lines = drift(tmp_path, SMART_ROUTES, allow)
    assert result.exit_code == 1
    assert lines == [
        f"allow: {entry} is not an instance of any route in the document" for entry in allow[1:]
    ]


def test_check_grants_refusals(tmp_path: Path) -> None:
    g = grants(tmp_path, SMART_ROUTES, [])
    assert refused(run("check", SMART, "--grants", g, "--profile", "nope")) == (
        f'specgen: grants {g}: no profile "nope"'
    )
    missing = tmp_path / "missing.json"
    assert refused(run("check", SMART, "--grants", missing, "--profile", "home")).startswith(
        f"specgen: grants {missing}: cannot read: "
    )
    bad = write(tmp_path / "bad.json", "{")
    assert refused(run("check", SMART, "--grants", bad, "--profile", "home")).startswith(
        f"specgen: grants {bad}: invalid JSON: "
    )
    g = grants(tmp_path, ["GET"], [])
    assert refused(run("check", SMART, "--grants", g, "--profile", "home")) == (
        'specgen: profile "home": catalog allow entry "GET" must be "METHOD /path"'
    )


# -- validate and extract through the CLI (their logic is tested with their modules) ---------


def test_validate_command(tmp_path: Path) -> None:
    ok = run("validate", SMART)
    assert ok.exit_code == 0, ok.output
    assert ok.stderr == f"specgen: {SMART}: valid\n"
    d = minimal()
    d["paths"]["/a"]["get"]["responses"] = "nope"
    bad = run("validate", write(tmp_path / "bad.json", d))
    assert bad.exit_code == 1
    assert bad.stdout.strip() != ""
    assert bad.stderr.endswith("problem(s)\n")
    assert refused(run("validate", tmp_path / "none.json")).endswith("No such file or directory")


def test_extract_command_pins_the_file(tmp_path: Path) -> None:
    import hashlib

    out = tmp_path / "cut.json"
    wrong = "0" * 64
    actual = hashlib.sha256(SMART.read_bytes()).hexdigest()
    assert refused(
        run("extract", SMART, "--sha256", wrong, "--path-prefix", "/lights", "-o", out)
    ) == (
        f"specgen: {SMART} has SHA-256 {actual}, not the pinned {wrong}; refusing to cut from any other file"
    )
    assert not out.exists()
    ok = run("extract", SMART, "--sha256", actual, "--path-prefix", "/rooms", "-o", out)
    assert ok.exit_code == 0, ok.output
    assert sorted(json.loads(out.read_text())["paths"]) == ["/rooms/{room}/lights"]


# -- the installed console script, as a real process ---------------------------------------------


def console_script() -> str:
    candidate = Path(sys.executable).with_name("specgen")
    found = str(candidate) if candidate.exists() else shutil.which("specgen")
    if not found:
        pytest.fail("the specgen console script is not installed beside this interpreter")
    return found


def proc(
    *args: str | Path, stdin: bytes | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [console_script(), *map(str, args)],
        input=stdin.decode() if stdin is not None else None,
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=60,
        env={**os.environ, "SPECGEN_DEBUG": ""},
    )


def test_console_script_build_check_and_stdin(tmp_path: Path) -> None:
    out = tmp_path / "out"
    ref = ("--compat", "reference")  # golden/smart-home is the reference's output
    built = proc("build", SMART, "-o", out, "--global", "home", *ref, cwd=tmp_path)
    assert built.returncode == 0, built.stderr
    assert folder(out) == golden("smart-home")
    checked = proc("check", SMART, out, "--global", "home", *ref)
    assert (checked.returncode, checked.stderr) == (0, "specgen: up to date\n")
    piped = proc(
        "emit",
        "allow",
        "-",
        "--global",
        "home",
        "--compat",
        "reference",
        stdin=HAZARDS.read_bytes(),
    )
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout == golden("hazards")["allow.json"]


@pytest.mark.parametrize(
    ("args", "stdin", "code", "line"),
    [
        (
            ["build", "/nonexistent/spec.json"],
            None,
            1,
            "specgen: /nonexistent/spec.json: cannot read: No such file or directory",
        ),
        (["build", "-"], b"[1, 2]", 1, "specgen: stdin: the top level must be an object, not list"),
        (
            ["emit", "json", "-"],
            b'{"openapi": "2.0"}',
            1,
            'specgen: unsupported openapi version "2.0" (need 3.x)',
        ),
    ],
)
def test_console_script_refusals_are_one_line(
    args: list[str], stdin: bytes | None, code: int, line: str
) -> None:
    done = proc(*args, stdin=stdin)
    assert done.returncode == code
    assert done.stdout == ""
    assert done.stderr == line + "\n"


def test_console_script_usage_error_exits_2() -> None:
    done = proc("build", "--no-such-flag", SMART)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert "No such option '--no-such-flag'" in done.stderr
