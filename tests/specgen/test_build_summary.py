"""A build's stderr names what an operator has to act on, not the generator's routine.

GitHub's document names every operation `repos/get-content`; mapping that to
`repos_get_content` is the fixed rule working, so it is a count in the summary and a
`--verbose` line, while the few real warnings stay listed by kind.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from click.testing import CliRunner

from specgen.cli import cli
from tests import conftest as prerequisites

REPO = Path(__file__).resolve().parents[2]
CORPUS = Path(os.environ.get("PLIMSOLL_CORPUS_DIR", REPO / ".cache" / "corpus"))
GITHUB = CORPUS / "octokit/generated/api.github.com.json"
SMART = REPO / "tests/data/smart-home.openapi.json"

_SUMMARY = re.compile(
    r"^specgen: built ([0-9,]+) operations; ([0-9,]+) skipped, ([0-9,]+) warnings"
    r"(?:, ([0-9,]+) operationId\(s\) renamed to JavaScript identifiers \(([^)]*)\))?"
)


def _number(text: str | None) -> int:
    return int((text or "0").replace(",", ""))


def _github() -> Path:
    if not GITHUB.exists():
        prerequisites.missing(f"GitHub's document ({GITHUB})", "make corpus")
    return GITHUB


def _stderr(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == 0, result.output
    return result.stderr


def test_githubs_build_summary_has_fewer_than_ten_warnings_and_counts_the_renames() -> None:
    stderr = _stderr("emit", "allow", str(_github()))
    summary = stderr.splitlines()[-1]
    found = _SUMMARY.match(summary)
    assert found, summary
    operations, warnings, renamed = (_number(found.group(i)) for i in (1, 3, 4))
    assert warnings < 10, stderr
    # nearly every GitHub operationId is `area/verb-noun`: each is counted, none warned about
    assert renamed > 1000 and renamed <= operations, summary
    assert "A-Z a-z 0-9 _ $" in found.group(5)
    assert "plain JavaScript identifier" not in stderr
    by_kind = [line for line in stderr.splitlines() if re.match(r"^ +[0-9,]+  ", line)]
    assert sum(_number(line.split()[0]) for line in by_kind) == warnings + _number(found.group(2))


def test_verbose_lists_every_rename_with_the_name_it_got() -> None:
    stderr = _stderr("emit", "allow", str(_github()), "-v")
    renames = [line for line in stderr.splitlines() if line.startswith("specgen: renamed: ")]
    found = _SUMMARY.match(stderr.splitlines()[-1])
    assert found and len(renames) == _number(found.group(4))
    assert any(
        'operationId "repos/get-content" is not a plain JavaScript identifier, so its method is '
        'named "repos_get_content"' in line
        for line in renames
    ), renames[:3]
    assert not any(
        "warning: " in line and "JavaScript identifier" in line for line in stderr.splitlines()
    )


def test_a_document_of_plain_names_says_nothing_about_renames() -> None:
    summary = _stderr("emit", "allow", str(SMART)).splitlines()[-1]
    assert "renamed" not in summary
    assert _SUMMARY.match(summary)


def test_emit_json_carries_the_renames_apart_from_the_warnings(tmp_path: Path) -> None:
    import json

    doc = {
        "openapi": "3.0.3",
        "info": {"title": "t", "version": "1"},
        "paths": {
            "/a": {
                "get": {"operationId": "things/list", "responses": {"200": {"description": "ok"}}}
            }
        },
    }
    path = tmp_path / "api.json"
    path.write_text(json.dumps(doc))
    result = CliRunner().invoke(cli, ["emit", "json", str(path)])
    assert result.exit_code == 0, result.output
    bundle = json.loads(result.stdout)
    assert "warnings" not in bundle
    assert bundle["renamed"] == [
        'GET /a: operationId "things/list" is not a plain JavaScript identifier, so its method '
        'is named "things_list"'
    ]


def test_quiet_still_prints_nothing() -> None:
    assert _stderr("emit", "allow", str(_github()), "-q") == ""
