"""Mismatches and edges a new user hits: each one refused (or named) in one clear line.

Each case here was accepted silently, or refused with a message that pointed at the
wrong thing, before.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from specgen.cli import cli

ROOT = Path(__file__).resolve().parents[2]
SMART = ROOT / "tests/data/smart-home.openapi.json"


def run(*args: str | Path) -> Result:
    return CliRunner().invoke(cli, [str(a) for a in args])


def refused(result: Result) -> str:
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def usage_error(result: Result) -> str:
    """click's usage error: exit 2 and one `Error:` line naming the option."""
    assert result.exit_code == 2, result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error: ")]
    assert len(errors) == 1, result.stderr
    return errors[0]


def minimal(**top: Any) -> dict[str, Any]:
    d: dict[str, Any] = {
        "openapi": "3.0.3",
        "info": {"title": "t", "version": "1"},
        "paths": {"/a": {"get": {"operationId": "a", "responses": {"200": {"description": "OK"}}}}},
    }
    d.update(top)
    return d


def write(path: Path, data: Any) -> Path:
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("not valid!", "is not a JS identifier"),
        ("1abc", "is not a JS identifier"),
        ("", "is not a JS identifier"),
        ("class", "is a reserved word in JS"),
        ("undefined", "is a global JS does not let a script replace"),
    ],
)
def test_global_must_be_a_js_identifier(name: str, why: str) -> None:
    line = usage_error(run("build", SMART, "--global", name))
    assert line == f"Error: Invalid value for '--global': {json.dumps(name)} {why}" + (
        " ([A-Za-z_$][A-Za-z0-9_$]*)" if "identifier" in why else ""
    )


@pytest.mark.parametrize("name", ["host", "memory", "_x", "$api", "gh2"])
def test_identifiers_pass(name: str) -> None:
    assert run("emit", "allow", SMART, "--global", name).exit_code == 0


@pytest.mark.parametrize("url", ["notaurl", "ftp://api.example.com/v1", "https://", "http:///v1"])
def test_server_must_be_http_with_a_host(url: str) -> None:
    line = usage_error(run("emit", "allow", SMART, "--server", url))
    assert line == (
        f"Error: Invalid value for '--server': {json.dumps(url)} is not an http or https URL "
        "with a host (or a /path)"
    )


def test_duplicate_json_key_is_refused_with_where(tmp_path: Path) -> None:
    text = (
        '{"openapi": "3.0.3", "info": {"title": "t", "version": "1"}, "paths": {'
        '"/a": {"get": {"responses": {"200": {"description": "one"}}}},'
        '"/a": {"post": {"responses": {"200": {"description": "two"}}}}}}'
    )
    spec = write(tmp_path / "dup.json", text)
    assert refused(run("build", spec)) == (
        f'specgen: {spec}: duplicate key "/a" in the object at /paths'
    )


def test_duplicate_nested_json_key_names_its_pointer(tmp_path: Path) -> None:
    doc = json.dumps(minimal()).replace(
        '"description": "OK"', '"description": "OK", "description": "x"'
    )
    spec = write(tmp_path / "dup.json", doc)
    assert refused(run("build", spec)) == (
        f'specgen: {spec}: duplicate key "description" in the object at /paths/~1a/get/responses/200'
    )


def test_duplicate_yaml_key_is_refused_with_its_line(tmp_path: Path) -> None:
    text = (
        "openapi: 3.0.3\n"
        "info: {title: t, version: '1'}\n"
        "paths:\n"
        "  /a:\n"
        "    get: {responses: {'200': {description: one}}}\n"
        "    get: {responses: {'200': {description: two}}}\n"
    )
    spec = write(tmp_path / "dup.yaml", text)
    assert refused(run("build", spec)) == (
        f'specgen: {spec}: invalid YAML: duplicate key "get" (line 6, column 5)'
    )


def test_yaml_merge_keys_may_still_override(tmp_path: Path) -> None:
    text = (
        "openapi: 3.0.3\n"
        "info: {title: t, version: '1'}\n"
        "x-base: &base {description: base}\n"
        "paths:\n"
        "  /a:\n"
        "    get:\n"
        "      operationId: a\n"
        "      responses:\n"
        "        '200': {<<: *base, description: mine}\n"
    )
    assert run("emit", "allow", write(tmp_path / "merge.yaml", text)).exit_code == 0


def test_swagger_2_is_named(tmp_path: Path) -> None:
    spec = write(tmp_path / "s.json", {"swagger": "2.0", "info": {}, "paths": {}})
    assert refused(run("build", spec)) == (
        f'specgen: {spec} is a Swagger "2.0" document; specgen reads OpenAPI 3.x only, '
        "so convert it to OpenAPI 3 first"
    )
    assert refused(run("validate", spec)).startswith(f"specgen: {spec} is a Swagger")


def test_webhooks_only_document_says_so(tmp_path: Path) -> None:
    hook = {"post": {"responses": {"200": {"description": "OK"}}}}
    d = {"openapi": "3.1.0", "info": {"title": "t", "version": "1"}, "webhooks": {"ping": hook}}
    spec = write(tmp_path / "hooks.json", d)
    assert refused(run("build", spec)) == (
        f"specgen: {spec} declares only webhooks (requests the API sends, not calls to it) "
        "and no paths, so there is nothing to generate a client for"
    )


def test_extract_reads_yaml(tmp_path: Path) -> None:
    import yaml

    whole = tmp_path / "whole.yaml"
    whole.write_text(yaml.safe_dump(json.loads(SMART.read_text()), sort_keys=False))
    pin = hashlib.sha256(whole.read_bytes()).hexdigest()
    out = tmp_path / "cut.json"
    result = run("extract", whole, "--sha256", pin, "--path-prefix", "/rooms", "-o", out)
    assert result.exit_code == 0, result.output
    assert sorted(json.loads(out.read_text())["paths"]) == ["/rooms/{room}/lights"]


def test_extract_into_a_missing_folder_is_refused(tmp_path: Path) -> None:
    pin = hashlib.sha256(SMART.read_bytes()).hexdigest()
    out = tmp_path / "missing" / "cut.json"
    line = refused(run("extract", SMART, "--sha256", pin, "--path-prefix", "/rooms", "-o", out))
    assert line == f"specgen: {out.parent} does not exist (extract creates no folders)"
    assert not out.parent.exists()


def test_check_against_a_missing_folder_says_missing(tmp_path: Path) -> None:
    out = tmp_path / "nope"
    assert refused(run("check", SMART, out)) == (
        f"specgen: {out} does not exist; write it with: specgen build {SMART} -o {out}"
    )
