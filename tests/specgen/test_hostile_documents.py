"""Hostile documents: small generators for inputs that made the generator slow or large.

Each test counts the work done or bounds the output instead of timing it, so it fails
on a machine of any speed when the growth comes back, and never because CI is slow.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from specgen import refs
from specgen.operations import generate
from specgen.routes import MAX_SEGMENTS


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


def colliding_paths_document(count: int, params: int | None = None) -> dict[str, Any]:
    """`count` distinct paths whose derived method names are all `get_x______`, and one
    path whose `params` (default `count`) parameters all map to the argument name `a_`."""
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
    many = "/".join(f"{{a{p}}}" for p in _distinct(count if params is None else params, "-.~!@"))
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
    params = MAX_SEGMENTS - 1  # one path's parameters: its segments are bounded
    doc = colliding_paths_document(count, params)
    size = len(orjson.dumps(doc))
    gen = generate(doc, name="collide")
    names = [op.name for op in gen.operations]
    assert len(set(names)) == len(names) == count + 1
    assert max(len(n) for n in names) <= len("get_x") + 8 + 1 + len(str(count))
    many = next(op for op in gen.operations if op.name == "many")
    assert len(set(many.args)) == params
    assert max(len(a) for a in many.args) <= len("a") + 6 + 1 + len(str(params))
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


# -- document regexes under real bounds ---------------------------------------------------

#: The address space a bounded command may use: several times what `specgen validate`
#: needs on these documents (about 60 MB resident), a fraction of what the unbounded
#: RE2 captures and Python `re` took (1.6 GB for 10,000 nested groups; hours for
#: `^(a+)+$` under unevaluatedProperties).
BOUNDED_BYTES = 512 << 20


def _bounded(*args: str) -> subprocess.CompletedProcess[str]:
    """`specgen ARGS` in a child whose memory is capped: a regression shows as a failed
    command or an expired timeout, never as the machine swapping."""
    import resource

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (BOUNDED_BYTES, BOUNDED_BYTES))

    return subprocess.run(
        [sys.executable, "-m", "specgen", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        preexec_fn=cap,
    )


def _schema_example_document(schema: dict[str, Any], example: Any) -> dict[str, Any]:
    return {
        "openapi": "3.1.0",
        "info": {"title": "t", "version": "1"},
        "paths": {},
        "components": {"schemas": {"S": {**schema, "examples": [example]}}},
    }


def test_unevaluated_properties_runs_document_patterns_in_linear_time(tmp_path: Path) -> None:
    """jsonschema's unevaluatedProperties calls Python's `re` on patternProperties: this
    400-byte document ran past 60 s. Run by RE2, it finishes and still judges the key."""
    spec = tmp_path / "redos31.json"
    schema = {
        "type": "object",
        "patternProperties": {"^(a+)+$": {}},
        "unevaluatedProperties": False,
    }
    spec.write_bytes(orjson.dumps(_schema_example_document(schema, {"a" * 32 + "!": 1})))
    proc = _bounded("validate", "--strict", str(spec))
    assert proc.returncode == 1, proc.stderr
    assert "Unevaluated properties are not allowed ('" + "a" * 32 + "!' was unexpected)" in (
        proc.stdout
    )


@pytest.mark.parametrize("groups", [10_000, 50_000])
def test_deeply_nested_groups_stay_within_bounded_memory(tmp_path: Path, groups: int) -> None:
    """n nested groups made RE2 keep captures in n squared (1.6 GB at 10,000), and the
    metaschema's `regex` format handed the pattern to Python's `re` too."""
    pattern = "(" * groups + "a" + ")" * groups
    spec = tmp_path / "nested.json"
    spec.write_bytes(
        orjson.dumps(_schema_example_document({"type": "string", "pattern": pattern}, "b"))
    )
    proc = _bounded("validate", "--strict", str(spec))
    assert proc.returncode == 1, proc.stderr
    lines = proc.stdout.splitlines()
    assert all(len(line) < 400 for line in lines), "a line quoted the whole pattern"
    if len(pattern) <= 65_536:
        assert "does not match" in proc.stdout  # evaluated, and judged
    else:
        assert f"a pattern of {len(pattern)} characters" in proc.stdout  # refused, said so
    assert "validation stopped" not in proc.stdout


def test_check_grants_pins_a_nested_pattern_within_bounded_memory(tmp_path: Path) -> None:
    """`check --grants` tests a pinned value against the parameter's pattern: with
    10,000 nested groups it used 2.3 GB."""
    pattern = "(" * 10_000 + "a" + ")" * 10_000
    param = {"name": "q", "in": "query", "schema": {"type": "string", "pattern": pattern}}
    doc = {
        "openapi": "3.0.3",
        "info": {"title": "t", "version": "1"},
        "paths": {
            "/a": {
                "get": {
                    "operationId": "a",
                    "parameters": [param],
                    "responses": {"200": {"description": "ok"}},
                }
            }
        },
    }
    spec = tmp_path / "pin.json"
    spec.write_bytes(orjson.dumps(doc))
    grants = tmp_path / "grants.json"
    profile = {
        "base_url": "https://api.example",
        "allowed_callers": ["a"],
        "allow": [{"route": "GET /a", "query": ["q=b"]}],
    }
    grants.write_bytes(orjson.dumps({"profiles": {"p": profile}}))
    proc = _bounded("check", str(spec), "--grants", str(grants), "--profile", "p")
    assert "does not match the declared pattern" in proc.stdout + proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


UNEVALUATED_CASES: list[tuple[dict[str, Any], Any]] = [
    ({"properties": {"a": {}}, "unevaluatedProperties": False}, {"a": 1, "b": 2}),
    ({"allOf": [{"properties": {"a": {}}}], "unevaluatedProperties": False}, {"a": 1}),
    ({"allOf": [{"properties": {"a": {}}}], "unevaluatedProperties": False}, {"a": 1, "c": 1}),
    (
        {"anyOf": [{"properties": {"a": {"type": "string"}}}], "unevaluatedProperties": False},
        {"a": 1},
    ),
    ({"patternProperties": {"^x-": {}}, "unevaluatedProperties": False}, {"x-a": 1, "y": 2}),
    ({"patternProperties": {"^x-": {}}, "unevaluatedProperties": {"type": "integer"}}, {"y": "s"}),
    ({"additionalProperties": {"type": "integer"}, "unevaluatedProperties": False}, {"y": "s"}),
    (
        {
            "if": {"properties": {"k": {"const": 1}}},
            "then": {"properties": {"t": {}}},
            "else": {"properties": {"e": {}}},
            "unevaluatedProperties": False,
        },
        {"k": 1, "t": 0, "e": 0},
    ),
    (
        {"dependentSchemas": {"d": {"properties": {"x": {}}}}, "unevaluatedProperties": False},
        {"d": 1, "x": 2},
    ),
    (
        {
            "$ref": "#/$defs/A",
            "$defs": {"A": {"properties": {"a": {}}}},
            "unevaluatedProperties": False,
        },
        {"a": 1, "b": 1},
    ),
]


@pytest.mark.parametrize(("schema", "instance"), UNEVALUATED_CASES)
def test_unevaluated_properties_judges_as_jsonschema_does(
    schema: dict[str, Any], instance: Any
) -> None:
    """A differential check against the library's own keyword, on patterns Python's `re`
    runs safely: the RE2 version must say the same, message included."""
    from jsonschema import Draft202012Validator

    from specgen import regex

    ours = regex.jsonschema_keywords(set())
    linear = __import__("jsonschema").validators.extend(Draft202012Validator, ours)
    theirs = [e.message for e in Draft202012Validator(schema).iter_errors(instance)]
    mine = [e.message for e in linear(schema).iter_errors(instance)]
    assert mine == theirs


def test_a_path_deeper_than_the_route_bound_is_skipped_in_a_bounded_line(tmp_path: Path) -> None:
    """The route index the client walks is as deep as the longest route; a document path
    past the bound is skipped with its reason (the loader refuses such an allow entry)."""
    from specgen import build
    from specgen.quoting import LINE_LIMIT
    from specgen.routes import ERR_DEEP, MAX_SEGMENTS

    ok = {"get": {"operationId": "ok", "responses": {"200": {"description": "ok"}}}}
    deep = {"get": {"operationId": "deep", "responses": {"200": {"description": "ok"}}}}
    doc = {
        "openapi": "3.0.3",
        "info": {"title": "t", "version": "1"},
        "servers": [{"url": "https://x.example"}],
        "paths": {"/a" * (MAX_SEGMENTS * 4): deep, "/ok": ok},
    }
    (tmp_path / "deep.json").write_text(json.dumps(doc))
    result = build.run(str(tmp_path / "deep.json"), build.Options())
    assert [op.template for op in result.gen.operations] == ["/ok"]
    (skip,) = result.gen.skipped
    assert skip.reason.endswith(ERR_DEEP)
    assert all(len(line) <= LINE_LIMIT + 40 for line in result.notes())
