"""The TypeScript generator's fast paths answer exactly what the long way does.

`_Converter.expr` answers a plain `type` and an already-declared component `$ref` itself
instead of walking `_expr` -> `core` -> `plain` -> `one_type`; `_Builder.param` types a
parameter object shared through `$ref` once; `fold_line` folds ASCII text with a byte
table instead of the regex engine. The long ways are the oracles here: `general` (kept in
the module, so a converter that always takes it is the old converter), a builder that
types every parameter use on its own, and the regex fold verbatim. Random schemas, documents and texts must give the same answers, names,
declarations and counts.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from specgen import typescript
from specgen.errors import SpecError
from specgen.operations import generate
from specgen.quoting import fold_line, ts_comment, visible
from specgen.render import artifacts

#: Component names; the long one is cut by a small MAX_EXPR, the missing one never exists.
_NAMES = ["A", "B", "LongComponentName"]
_REFS = [f"#/components/schemas/{n}" for n in [*_NAMES, "Missing"]] + [
    "#/components/schemas/A/properties/a",  # a pointer into a schema: inlined, not named
    "#/components/schemas/B/items",
    "https://example.com/x.json",  # external: never loaded
]
_KINDS = ["string", "integer", "number", "boolean", "null", "object", "array", "file"]

_leaves = st.one_of(
    st.booleans(),
    st.just({}),
    st.fixed_dictionaries(
        {"type": st.sampled_from(_KINDS)},
        optional={"nullable": st.sampled_from([True, False, "yes"]), "description": st.text()},
    ),
    st.fixed_dictionaries({"$ref": st.sampled_from(_REFS)}, optional={"nullable": st.just(True)}),
    st.fixed_dictionaries({"$ref": st.sampled_from([None, 3, ["x"], {"a": 1}])}),
    st.fixed_dictionaries(
        {"enum": st.lists(st.one_of(st.text(max_size=3), st.integers(), st.none()), max_size=3)},
        optional={"type": st.sampled_from(_KINDS)},
    ),
    st.fixed_dictionaries({"const": st.one_of(st.text(max_size=3), st.booleans(), st.just([]))}),
    st.fixed_dictionaries({"type": st.lists(st.sampled_from([*_KINDS, 1]), max_size=3)}),
    st.sampled_from([None, 1, "string", [{"type": "string"}]]),
)


def _compound(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    members = st.lists(children, max_size=3)
    return st.one_of(
        st.fixed_dictionaries(
            {"type": st.sampled_from(["object", "array"])},
            optional={
                "properties": st.dictionaries(st.sampled_from(["a", "b", "c-d", "1"]), children),
                "required": st.lists(st.sampled_from(["a", "c-d", "x"])),
                "additionalProperties": st.one_of(st.booleans(), st.just({}), children),
                "items": children,
                "nullable": st.booleans(),
            },
        ),
        st.fixed_dictionaries(
            {},
            optional={
                "properties": st.dictionaries(st.sampled_from(["a", "b"]), children),
                "items": children,
                "allOf": members,
                "oneOf": members,
                "anyOf": members,
                "type": st.sampled_from(_KINDS),
                "nullable": st.booleans(),
                "$ref": st.sampled_from(_REFS),
            },
        ),
    )


_schemas = st.recursive(_leaves, _compound, max_leaves=25)


class _LongWay(typescript._Converter):
    """The converter before its fast paths: every node through `general`."""

    def expr(
        self,
        schema: Any,
        scope: typescript._Scope,
        depth: int = 0,
        seen: frozenset[str] = frozenset(),
    ) -> str:
        return self.general(schema, scope, depth, seen)


@settings(max_examples=400, deadline=None)
@given(
    st.dictionaries(st.sampled_from(_NAMES), _schemas),
    st.lists(_schemas, min_size=1, max_size=3),
    st.integers(0, typescript.MAX_DEPTH + 2),
    st.sampled_from([8, 40, typescript.MAX_EXPR]),
)
def test_fast_paths_answer_as_the_long_way(
    components: dict[str, Any], schemas: list[Any], depth: int, limit: int
) -> None:
    doc = {"components": {"schemas": components}}
    saved = typescript.MAX_EXPR
    typescript.MAX_EXPR = limit  # both paths read the cap when they run
    try:
        fast, slow = typescript._Converter(doc), _LongWay(doc)
        a, b = typescript._Scope(), typescript._Scope()
        # each schema twice: the second time its component refs are already declared
        for schema in [*schemas, *schemas]:
            assert fast.expr(schema, a, depth) == slow.expr(schema, b, depth)
        assert (a.refs, a.fallbacks) == (b.refs, b.fallbacks)
        assert fast.drain() == slow.drain()
        assert (fast.names, fast.fallbacks) == (slow.names, slow.fallbacks)
    finally:
        typescript.MAX_EXPR = saved


def test_every_plain_type_answers_as_the_long_way() -> None:
    """Each `type`, with and without `nullable` and siblings, at every depth, twice."""
    doc = {"components": {"schemas": {"A": {"type": "string"}}}}
    differ = []
    for kind in [*_KINDS, "", "Object", ["string", "null"], None]:
        for extra in [{}, {"nullable": True}, {"nullable": False}, {"nullable": "true"}]:
            for more in [{}, {"properties": {"a": {"$ref": _REFS[0]}}}, {"items": {}}]:
                schema = {"type": kind, **extra, **more}
                for depth in range(typescript.MAX_DEPTH + 2):
                    fast, slow = typescript._Converter(doc), _LongWay(doc)
                    a, b = typescript._Scope(), typescript._Scope()
                    answers = [fast.expr(schema, a, depth) for _ in range(2)]
                    if answers != [slow.expr(schema, b, depth) for _ in range(2)] or (
                        a.refs,
                        a.fallbacks,
                    ) != (b.refs, b.fallbacks):
                        differ.append((schema, depth))
    assert differ == []


def _document(shared: dict[str, Any], components: dict[str, Any], uses: int) -> dict[str, Any]:
    """`uses` operations that each take the parameter `shared` through `$ref`."""
    paths = {
        f"/r{i}/{{id}}": {
            "parameters": [{"$ref": "#/components/parameters/Id"}],
            "get": {
                "operationId": f"get{i}",
                "parameters": [{"$ref": "#/components/parameters/Q"}],
                "responses": {"200": {"description": "ok"}},
            },
        }
        for i in range(uses)
    }
    return {
        "openapi": "3.0.3",
        "info": {"title": "T", "version": "1"},
        "paths": paths,
        "components": {
            "schemas": components,
            "parameters": {
                "Q": shared,
                "Id": {"name": "id", "in": "path", "required": True, "schema": shared["schema"]},
            },
        },
    }


def _copied_out(doc: dict[str, Any]) -> dict[str, Any]:
    """`doc` with every parameter `$ref` replaced by its own copy of the parameter."""
    out = copy.deepcopy(doc)
    params = out["components"]["parameters"]
    for item in out["paths"].values():
        for owner in (item, item["get"]):
            owner["parameters"] = [
                copy.deepcopy(params[e["$ref"].rsplit("/", 1)[1]]) for e in owner["parameters"]
            ]
    return out


class _Unshared(typescript._Builder):
    """The builder before its parameter memo: every use typed on its own."""

    def param(
        self,
        param: dict[str, Any],
        name: str,
        location: str,
        required: bool,
        sent: bool,
        scope: typescript._Scope,
    ) -> typescript.Param:
        ts = self.conv.expr(self.param_schema(param), scope) if param else "string"
        doc = typescript.doc_text(param.get("description"))
        return typescript.Param(name, location, ts, required, doc, sent)


def _typed(doc: dict[str, Any], builder: type[typescript._Builder]) -> tuple[Any, ...]:
    try:
        gen = generate(doc, name="t.json")
    except SpecError as exc:
        return ("refused", str(exc))
    saved = typescript._Builder
    typescript._Builder = builder
    try:
        types = typescript.generate(doc, gen)
    finally:
        typescript._Builder = saved
    ops = [
        (t.signature("h"), t.refs, t.fallbacks, [(p, p.sent) for p in t.params])
        for t in types.operations
    ]
    return ops, types.declarations, types.fallbacks, artifacts(gen, types)["types.d.ts"]


@settings(max_examples=150, deadline=None)
@given(
    st.dictionaries(st.sampled_from(_NAMES), _schemas),
    _schemas,
    st.sampled_from(["query", "header"]),
    st.booleans(),
    st.integers(1, 3),
)
def test_a_shared_parameter_types_as_its_copies_do(
    components: dict[str, Any], schema: Any, where: str, required: bool, uses: int
) -> None:
    shared = {"name": "q", "in": where, "required": required, "schema": schema}
    shared["description"] = "Which\n\tone."
    doc = _document(shared, components, uses)
    typed = _typed(doc, typescript._Builder)
    assert typed == _typed(doc, _Unshared)
    assert typed == _typed(_copied_out(doc), typescript._Builder)


_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


def old_fold_line(value: str) -> str:
    return " ".join(_CONTROL.sub(" ", value).split())


def test_every_ascii_pair_folds_as_before() -> None:
    chars = [chr(c) for c in range(0x80)]
    differ = [
        (a, b)
        for a in chars
        for b in chars
        if fold_line(f"{a}x{a}{b} y{b}") != old_fold_line(f"{a}x{a}{b} y{b}")
    ]
    assert differ == []


@settings(max_examples=500)
@given(st.text(alphabet=st.characters(max_codepoint=0x7F)) | st.text())
def test_any_text_folds_as_before(text: str) -> None:
    assert fold_line(text) == old_fold_line(text)


def old_ts_comment(value: str) -> str:
    return visible(old_fold_line(value)).replace("*/", "*\\/")


@settings(max_examples=1000)
@given(st.text(alphabet=st.characters(max_codepoint=0x7F)) | st.text())
@example("a */ b\n\n\tc  \x7f")
@example("\u202e */\u00a0x")
def test_ts_comment_agrees_with_visible_after_the_fold(text: str) -> None:
    """ts_comment skips `visible` for folded ASCII (printable by then)."""
    assert ts_comment(text) == old_ts_comment(text)


_KEYS = st.one_of(
    st.text(max_size=4),
    st.integers(-3, 12),
    st.booleans(),
    st.floats(allow_nan=False, width=16),
    st.none(),
    st.dates(),
)


@settings(max_examples=2000)
@given(st.dictionaries(_KEYS, st.none(), max_size=6) | st.dictionaries(st.text(), st.none()))
@example({1: None, 2: None, 10: None})
@example({"b": None, 1: None, "a": None})
@example({True: None, "x": None})
def test_property_names_sort_as_their_text(props: dict[Any, None]) -> None:
    """_sorted_keys sorts string names as they are, anything else by its text."""
    assert typescript._sorted_keys(props) == sorted(props, key=str)
