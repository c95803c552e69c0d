"""How much of the corpus a grant can carry: the reference build against the default one.

    .venv/bin/python -m tests.benchmarks.corpus_coverage        # the tests' sample
    PLIMSOLL_CORPUS=all .venv/bin/python -m tests.benchmarks.corpus_coverage

Reads the same documents as tests/specgen/test_corpus.py (same sample), builds each in
both modes in this process, and prints, per mode, over the documents that pass the
OpenAPI schema check ("valid"):

- operations carried with every declared parameter: the operation is generated, and
  every parameter it declares is one its grant entry can name (reference: it declares
  no query, header or cookie parameter, since the reference carries paths only;
  default: no parameter was dropped, i.e. no cookie or broker-owned header, and no
  request body media type was left out);
- operations carried at all, and documents refused whole;
- tracebacks (any exception but a refusal), over every document, valid or not;
- preambles that do not parse (node, as a classic script, like `node --check`).

Numbers, not asserts: it is a measurement, and the corpus is a cached download.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specgen import build as pipeline
from specgen.errors import SpecError
from specgen.load import load
from specgen.operations import VERBS
from specgen.validate import structural_error_line

REPO = Path(__file__).resolve().parents[2]


@dataclass
class Tally:
    documents: int = 0
    operations: int = 0
    carried: int = 0
    full: int = 0
    refused: int = 0
    tracebacks: list[str] = field(default_factory=list)
    preambles: list[Path] = field(default_factory=list)
    reasons: Counter[str] = field(default_factory=Counter)
    #: Why operations are not carried whole (default build): skips and losses by kind.
    lost: Counter[str] = field(default_factory=Counter)


def _operation_count(doc: dict[str, Any]) -> int:
    """Operations the document declares (inline path items; $ref'd ones count one each)."""
    paths = doc.get("paths")
    count = 0
    for key, item in (paths if isinstance(paths, dict) else {}).items():
        if str(key).startswith("x-") or not isinstance(item, dict):
            continue
        count += sum(1 for verb in VERBS if isinstance(item.get(verb), dict))
    return count


def _short_reason(message: str) -> str:
    return message.split(":", 2)[-1].strip()[:70]


def measure(names: list[str], corpus: Path, out: Path) -> dict[str, Tally]:
    tallies = {"reference": Tally(), "default": Tally()}
    for i, name in enumerate(names):
        try:
            source = load(str(corpus / name))
            valid = isinstance(source.doc.get("openapi"), str) and not structural_error_line(
                source.name, source.doc
            )
        except SpecError:
            valid = False
            source = None
        for mode, tally in tallies.items():
            options = pipeline.Options(compat="reference" if mode == "reference" else "")
            try:
                result = pipeline.run(str(corpus / name), options)
            except SpecError as exc:
                if valid and source is not None:
                    tally.documents += 1
                    tally.refused += 1
                    tally.operations += _operation_count(source.doc)
                    tally.reasons[_short_reason(str(exc))] += 1
                continue
            except Exception as exc:  # a traceback is what is being counted
                tally.tracebacks.append(f"{name}: {type(exc).__name__}: {exc}"[:200])
                continue
            target = out / mode / f"d{i}.js"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(result.files["preamble.js"])
            tally.preambles.append(target)
            if not valid:
                continue
            gen = result.gen
            tally.documents += 1
            tally.operations += len(gen.operations) + len(gen.skipped)
            tally.carried += len(gen.operations)
            if mode == "default":
                for skip in gen.skipped:
                    tally.lost["skipped: " + _skip_kind(skip.reason)] += 1
            for op in gen.operations:
                if mode == "reference":
                    # the reference carries no query, header or cookie parameter
                    tally.full += not _declares_non_path(source, op)
                else:
                    tally.full += not op.dropped and not op.lost_bodies
                    tally.lost[_lost_reason(op)] += 1
    return tallies


def _lost_reason(op: Any) -> str:
    """What an operation loses, by kind ("" when nothing)."""
    if op.dropped:
        return "a parameter dropped: " + op.dropped[0].split(" ", 1)[0]
    if op.lost_bodies:
        return "a request body media type left out"
    return ""


def _skip_kind(reason: str) -> str:
    """A skip reason without the path or segment it names, so like ones count together."""
    return re.sub(r'"[^"]*"', '"..."', reason)[:90]


def _declares_non_path(source: Any, op: Any) -> bool:
    """Does the operation declare a query, header or cookie parameter (reference mode)?"""
    from specgen.params import merged
    from specgen.refs import Refs

    refs = Refs(source.doc, source.name)
    # the template is the server prefix + the document's path: the longest path it ends with
    candidates = [p for p in source.doc["paths"] if op.template.endswith(p)]
    for raw_path in sorted(candidates, key=len, reverse=True)[:1]:
        item = refs.deref(source.doc["paths"][raw_path], raw_path)
        entry = item.get(op.method.lower()) if isinstance(item, dict) else None
        if isinstance(entry, dict):
            params = merged(item, entry, refs, raw_path)
            return bool(params.query or params.header or params.cookie)
    return False


_NODE = textwrap.dedent(
    """
    const fs = require("fs"), vm = require("vm");
    let bad = 0;
    for (const f of JSON.parse(fs.readFileSync(0, "utf8"))) {
      try { new vm.Script(fs.readFileSync(f, "utf8")); } catch (e) { bad++; }
    }
    process.stdout.write(String(bad));
    """
)


def unparsable(files: list[Path]) -> int | None:
    node = shutil.which("node")
    if node is None:
        return None
    done = subprocess.run(
        [node, "-e", _NODE],
        input=json.dumps([str(f) for f in files]),
        capture_output=True,
        text=True,
        check=True,
    )
    return int(done.stdout)


def main() -> int:
    sys.path.insert(0, str(REPO))
    from tests.specgen import test_corpus as corpus_test

    names = corpus_test.DOCUMENTS
    with tempfile.TemporaryDirectory() as tmp:
        tallies = measure(names, corpus_test.CORPUS, Path(tmp))
        print(f"{len(names)} documents read (the tests' sample unless PLIMSOLL_CORPUS=all)")
        for mode, t in tallies.items():
            pct = 100 * t.full / t.operations if t.operations else 0.0
            print(
                f"{mode:9}  valid documents {t.documents}, refused whole {t.refused}; "
                f"operations {t.operations}, carried {t.carried} "
                f"({100 * t.carried / max(t.operations, 1):.1f}%), with every declared "
                f"parameter {t.full} ({pct:.1f}%); tracebacks {len(t.tracebacks)}; "
                f"preambles {len(t.preambles)}, not parsing {unparsable(t.preambles)}"
            )
            for reason, n in t.reasons.most_common(8):
                print(f"           refused {n}x: {reason}")
            for reason, n in sorted(t.lost.items(), key=lambda kv: -kv[1]):
                if reason:
                    print(f"           not whole {n}x: {reason}")
            for line in t.tracebacks[:5]:
                print(f"           traceback: {line}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
