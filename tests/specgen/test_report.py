"""What build, emit and validate say on stderr: a summary, grouped warnings, or every line."""

from __future__ import annotations

import io
import json
import time
from pathlib import Path

from click.testing import CliRunner, Result

from specgen.cli import cli
from specgen.report import Progress, groups, kind, split_severities

ROOT = Path(__file__).resolve().parents[2]
HAZARDS = ROOT / "tests/data/hazards.openapi.json"
SMART = ROOT / "tests/data/smart-home.openapi.json"


def run(*args: str | Path) -> Result:
    return CliRunner().invoke(cli, [str(a) for a in args])


def test_default_output_groups_by_kind_and_ends_with_a_summary() -> None:
    # The reference mode skips and warns the most on this document, so every group shows.
    result = run("emit", "allow", HAZARDS, "--compat", "reference")
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines() == [
        "specgen: 4 skipped, by kind:",
        "      1  have a parameter that is only part of a segment (e.g. GET /api/v2/files/{name}.json)",
        "      1  map to a route a grant cannot hold (e.g. GET /api/v2/legacy/)",
        "      1  require a query or header parameter a brokered call cannot send (e.g. GET /api/v2/search)",
        "      1  use a verb grants do not enforce (e.g. OPTIONS /api/v2/feed)",
        "specgen: 2 warnings, by kind:",
        "      1  no operationId (the method is named after its verb and path) (e.g. GET /api/v2/stock)",
        "      1  optional query or header parameters the broker cannot send (the method calls the bare route) (e.g. GET /api/v2/feed)",
        "specgen: note: no GET is marked x-plimsoll-health-check, so the profile gets no health_check (see docs/grants.md)",
        "specgen: built 8 operations; 4 skipped, 2 warnings (--verbose to list)",
    ]


def test_quiet_prints_nothing_but_errors(tmp_path: Path) -> None:
    ok = run("build", HAZARDS, "-o", tmp_path / "out", "-q")
    assert ok.exit_code == 0 and ok.stderr == ""
    bad = run("build", tmp_path / "missing.json", "-q")
    assert bad.exit_code == 1 and bad.stderr.startswith("specgen: ")


def test_verbose_lists_every_line() -> None:
    lines = run("emit", "allow", HAZARDS, "--compat", "reference", "--verbose").stderr.splitlines()
    assert sum(line.startswith("specgen: skipped ") for line in lines) == 4
    assert sum(line.startswith("specgen: warning: ") for line in lines) == 2
    assert sum("x-plimsoll-health-check" in line for line in lines) == 1


def test_quiet_and_verbose_together_is_a_usage_error() -> None:
    assert run("build", HAZARDS, "-q", "-v").exit_code == 2


def test_emit_json_does_not_repeat_its_content_on_stderr() -> None:
    result = run("emit", "json", HAZARDS, "--compat", "reference")
    bundle = json.loads(result.stdout)
    assert len(bundle["skipped"]) == 4 and len(bundle["warnings"]) == 2
    assert (
        result.stderr == "specgen: built 8 operations; 4 skipped, 2 warnings (--verbose to list)\n"
    )


def test_unknown_kinds_are_grouped_by_shape() -> None:
    a = 'GET /a: parameter "x" is renamed "y"'
    b = 'PUT /b/{id}: parameter "long" is renamed "l"'
    assert kind(a) == kind(b) == 'parameter "…" is renamed "…"'
    [group] = groups([a, b])
    assert (group.count, group.example) == (2, a)


def test_optional_parameter_lists_of_any_length_are_one_kind() -> None:
    one = 'GET /a: optional query "x" cannot be sent through the broker, so ...'
    three = 'GET /b: optional query "x", query "y", header "z" cannot be sent through the broker, so ...'
    assert kind(one) == kind(three)


def test_split_severities_keeps_nits_as_warnings() -> None:
    lines = ["specgen: f: bad thing at /x", "specgen: f: nit: example at /y contradicts ..."]
    assert split_severities(lines) == ([lines[0]], [lines[1]])


def _doc_with_a_nit(tmp_path: Path) -> Path:
    doc = json.loads(SMART.read_text())
    doc.setdefault("components", {}).setdefault("schemas", {})["N"] = {
        "type": "integer",
        "example": "one",
    }
    path = tmp_path / "nit.json"
    path.write_text(json.dumps(doc))
    return path


def test_validate_nits_are_warnings_unless_strict(tmp_path: Path) -> None:
    spec = _doc_with_a_nit(tmp_path)
    lenient = run("validate", spec)
    assert lenient.exit_code == 0, lenient.output
    assert ": warning: example at /components/schemas/N/example" in lenient.stdout
    assert "valid; 1 warning(s)" in lenient.stderr
    strict = run("validate", spec, "--strict")
    assert strict.exit_code == 1
    assert ": nit: example at /components/schemas/N/example" in strict.stdout
    as_json = run("validate", spec, "--json")
    record = json.loads(as_json.stdout)
    assert (record["valid"], record["errors"], len(record["warnings"])) == (True, [], 1)
    assert as_json.exit_code == 0 and as_json.stderr == ""
    strict_json = json.loads(run("validate", spec, "--json", "--strict").stdout)
    assert strict_json["valid"] is False


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_only_on_a_terminal_and_cleared_after() -> None:
    tty = _Tty()
    with Progress("validating x", after_s=0.01, stream=tty):
        time.sleep(0.1)
    assert "specgen: validating x… 0 s" in tty.getvalue()
    assert tty.getvalue().endswith("\r\x1b[K")
    pipe = io.StringIO()
    with Progress("validating x", after_s=0.01, stream=pipe):
        time.sleep(0.05)
    assert pipe.getvalue() == ""
