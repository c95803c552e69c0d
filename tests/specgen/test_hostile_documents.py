"""Hostile documents: small generators for inputs that made the generator slow or large.

Each test counts the work done or bounds the output instead of timing it, so it fails
on a machine of any speed when the growth comes back, and never because CI is slow.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from specgen import refs
from specgen.operations import generate


def ref_chain_document(links: int, operations: int) -> dict[str, Any]:
    """`links` parameters each a `$ref` to the next, the head used by every operation."""
    params: dict[str, Any] = {
        f"p{i}": {"$ref": f"#/components/parameters/p{i + 1}"} for i in range(links)
    }
    params[f"p{links}"] = {"name": "q", "in": "query", "schema": {"type": "string"}}
    paths = {
        f"/r{j}": {
            "get": {
                "operationId": f"op{j}",
                "parameters": [{"$ref": "#/components/parameters/p0"}],
                "responses": {"200": {"description": "ok"}},
            }
        }
        for j in range(operations)
    }
    return {
        "openapi": "3.0.3",
        "info": {"title": "t", "version": "1"},
        "paths": paths,
        "components": {"parameters": params},
    }


def _count_pointer_walks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls = [0]
    real = refs.resolve_pointer

    def counting(doc: Any, fragment: str) -> Any:
        calls[0] += 1
        return real(doc, fragment)

    monkeypatch.setattr(refs, "resolve_pointer", counting)
    return calls


def test_a_long_ref_chain_used_by_every_operation_is_walked_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Before the memo every use followed the whole chain: links x operations walks
    # (4 million here); now each link is walked once.
    links, operations = 2000, 2000
    calls = _count_pointer_walks(monkeypatch)
    gen = generate(ref_chain_document(links, operations), name="chain")
    assert len(gen.operations) == operations
    assert calls[0] <= links + 1 + operations


def test_a_broken_chain_is_walked_once_however_often_it_is_used(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    doc = ref_chain_document(500, 10)
    del doc["components"]["parameters"]["p500"]
    calls = _count_pointer_walks(monkeypatch)
    resolver = refs.Refs(doc, "chain")
    for i in range(200):
        with pytest.raises(
            refs.SpecError, match=r'\$ref "#/components/parameters/p500" does not resolve'
        ):
            resolver.deref({"$ref": "#/components/parameters/p0"}, f"use {i}")
    assert calls[0] == 501


def test_a_cycle_is_refused_wherever_it_is_entered() -> None:
    doc = {"a": {"$ref": "#/b"}, "b": {"$ref": "#/c"}, "c": {"$ref": "#/b"}}
    resolver = refs.Refs(doc, "loop")
    for start in ("#/a", "#/b", "#/c", "#/a"):
        with pytest.raises(refs.SpecError, match="is circular"):
            resolver.deref({"$ref": start}, "here")


def colliding_paths_document(count: int) -> dict[str, Any]:
    """`count` distinct paths whose derived method names are all `get_x______`, and one
    path whose `count` parameters all map to the argument name `a_`."""
    punct = "-._~"
    width = 1
    while len(punct) ** width < count:
        width += 1
    paths: dict[str, Any] = {}
    for k in range(count):
        digits = []
        for _ in range(width):
            k, d = divmod(k, len(punct))
            digits.append(punct[d])
        paths["/x" + "".join(digits)] = {"get": {"responses": {"200": {"description": "ok"}}}}
    many = "/".join(f"{{a{p}}}" for p in _distinct(count, "-.~!@"))
    paths["/m/" + many] = {
        "get": {"operationId": "many", "responses": {"200": {"description": "ok"}}}
    }
    return {"openapi": "3.0.3", "info": {"title": "t", "version": "1"}, "paths": paths}


def _distinct(count: int, alphabet: str) -> list[str]:
    out = [""]
    while len(out) < count + 1:
        out = [s + c for s in out for c in alphabet] + out
    return sorted(set(out) - {""}, key=lambda s: (len(s), s))[:count]


def test_colliding_derived_names_stay_short_and_output_stays_linear() -> None:
    # Appending `_` until a name was free made name k k characters longer: 544 KB of
    # such paths wrote 62 MB. Names now grow by a counter, so output is linear.
    from specgen.render import artifacts

    count = 3000
    doc = colliding_paths_document(count)
    size = len(orjson.dumps(doc))
    gen = generate(doc, name="collide")
    names = [op.name for op in gen.operations]
    assert len(set(names)) == len(names) == count + 1
    assert max(len(n) for n in names) <= len("get_x") + 8 + 1 + len(str(count))
    many = next(op for op in gen.operations if op.name == "many")
    assert len(set(many.args)) == count
    assert max(len(a) for a in many.args) <= len("a") + 6 + 1 + len(str(count))
    written = sum(len(text.encode()) for text in artifacts(gen).values())
    assert written < 20 * size, (written, size)


def alias_bomb(values: int, padding: int) -> bytes:
    """A YAML document whose aliases expand to about `values` values, padded with one
    `padding`-byte string so that the document's own size is known."""
    lines = [
        'openapi: "3.0.3"',
        "info: {title: t, version: '1'}",
        "paths: {}",
        "x-pad: " + "p" * padding,
        "x-a0: &a0 [" + ",".join(["x"] * 10) + "]",
    ]
    for i in range(1, 4):
        lines.append(f"x-a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 10) + "]")
    per_top = 11_111  # a0 is 11 values, a1 1 + 10 * 11, a2 1,111, a3 11,111
    lines.append("x-top: [" + ",".join(["*a3"] * max(1, values // per_top)) + "]")
    return ("\n".join(lines) + "\n").encode()


def test_the_biggest_alias_expansion_load_accepts_costs_memory_like_a_plain_document() -> None:
    # Plain YAML documents in the corpus peak at about 25-30 times their size while
    # loading; the largest alias bomb load accepts must stay in that range (at 16 values
    # per byte it reached about 270 times).
    import tracemalloc

    from specgen.errors import SpecError
    from specgen.load import parse

    padding = 64_000
    accepted: list[tuple[int, int]] = []
    values = 20_000
    while values < 50_000_000:
        raw = alias_bomb(values, padding)
        tracemalloc.start()
        try:
            parse("bomb.yaml", raw)
        except SpecError as exc:
            assert "YAML aliases expand to more than" in str(exc)
            break
        finally:
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
        accepted.append((len(raw), peak))
        values = values * 3 // 2
    else:
        pytest.fail("load accepted an alias bomb of 50 million values")
    assert accepted, "even a small alias expansion was refused"
    size, peak = accepted[-1]
    assert peak <= 40 * size, (peak / size, accepted)


def backtracking_pattern_document(pattern: str, example: str) -> dict[str, Any]:
    media = {"schema": {"type": "string", "pattern": pattern}, "example": example}
    ok = {"description": "ok", "content": {"application/json": media}}
    return {
        "openapi": "3.0.3",
        "info": {"title": "t", "version": "1"},
        "paths": {"/a": {"get": {"operationId": "a", "responses": {"200": ok}}}},
    }


def test_validate_finishes_on_a_backtracking_pattern(tmp_path: Path) -> None:
    # Python's `re` needs about 2**40 steps for this (hours); RE2 is linear. The timeout is
    # a generous bound on a fixed run of about a second, not a measurement.
    spec = tmp_path / "redos.json"
    doc = backtracking_pattern_document("^(a+)+$", "a" * 40 + "!")
    spec.write_bytes(orjson.dumps(doc))
    proc = subprocess.run(
        [sys.executable, "-m", "specgen", "validate", "--strict", str(spec)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 1
    assert "does not match '^(a+)+$'" in proc.stdout


def test_a_pattern_re2_cannot_run_is_reported_not_evaluated() -> None:
    from specgen.validate import example_nits

    pattern = "^(?=a)(a+)+$"  # lookahead: RE2 refuses it
    lines = example_nits(backtracking_pattern_document(pattern, "a" * 40 + "!"), "doc")
    assert lines == [
        f'specgen: doc: nit: pattern "{pattern}" was not checked against examples or defaults: '
        "it needs backtracking (backreferences or lookaround), which can take time exponential "
        "in the value, or is too large for the linear-time engine"
    ]


def test_patterns_re2_runs_still_judge_examples_and_property_names() -> None:
    from specgen.validate import example_nits

    doc = backtracking_pattern_document("^[a-z]+$", "abc")
    assert example_nits(doc, "doc") == []
    doc = backtracking_pattern_document("^[a-z]+$", "ABC")
    assert len(example_nits(doc, "doc")) == 1
    media = doc["paths"]["/a"]["get"]["responses"]["200"]["content"]["application/json"]
    media["schema"] = {
        "type": "object",
        "patternProperties": {"^x-": {"type": "integer"}},
        "additionalProperties": False,
    }
    media["example"] = {"x-a": 1}
    assert example_nits(doc, "doc") == []
    media["example"] = {"x-a": "one"}
    assert "'one' is not of type 'integer'" in example_nits(doc, "doc")[0]
    media["example"] = {"y": 1}
    assert "'y' does not match any of the regexes: '^x-'" in example_nits(doc, "doc")[0]
