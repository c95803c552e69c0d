"""LICENSE is the licence pyproject.toml declares, and NOTICE names the work of others the
project runs or carries: the engine, and every document under examples/ with the licence
file beside it."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_license_is_the_declared_bsd_3_clause_of_the_authors() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "BSD-3-Clause"
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("BSD 3-Clause License\n")
    assert "Copyright (c) 2026, plimsoll-specgen authors" in text
    assert "Neither the name of the copyright holder" in text  # clause 3 is there


def test_notice_names_the_engine_and_its_licence() -> None:
    notice = (ROOT / "NOTICE").read_text()
    pins = json.loads((ROOT / "runtime/sandbox/engine_build/pins.json").read_text())
    version = ".".join(pins["quickjs_ng"]["version"].split(".")[:3])
    assert f"QuickJS-NG {version}" in notice and "MIT License" in notice
    assert "`quickjs-ng` sdist" in notice


def test_notice_names_every_example_document_and_a_licence_file_that_exists() -> None:
    notice = (ROOT / "NOTICE").read_text()
    documents = sorted(ROOT.glob("examples/**/*.openapi.json"))
    assert documents
    for document in documents:
        assert str(document.relative_to(ROOT)) in notice, document
    for named in re.findall(r"examples/[\w/.-]+", notice):
        assert (ROOT / named.rstrip(".;,")).exists(), named
