"""Hypothesis strategies that compose new agent programs for the differential suite.

Two ways, mixed by `programs()`:

- `steps()`: a small grammar of what agent code does around host calls. Objects are made
  in every way models make them (`{}`, `JSON.parse("{}")`, `Object.fromEntries([])`, a
  class field, a default parameter, a spread, `Object.assign`), then calls of every kind
  (awaited, started and awaited later, `Promise.all`/`allSettled`, a caught 404 or 500, a
  broker 403, a client refusal, the blocking raw call, a JSON or form body of one of the
  objects, the `$response` form with its headers, a binary download and upload, a CSV
  upload, the started call's own reply object) are interleaved with filling and printing those objects. Every drawn program
  is valid JS by construction, and prints every object it made at the end, so an object
  that gained or lost anything across a call shows in stdout or in a request body.
- `corpus_blocks()`: two to four of the program files (tests/differential/programs),
  each in its own block, after objects made as above and filled between the blocks, so
  the objects of one part meet the calls of the next.

Nothing here knows the expected output: the harness compares the two engines.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

from hypothesis import strategies as st

from tests.differential.harness import KNOWN_DIFFERENCES, PROGRAMS

#: Expressions that make a fresh object, the ways agent code does.
MAKERS = (
    "{}",
    'JSON.parse("{}")',
    "Object.fromEntries([])",
    "Object.assign({}, {})",
    "{ ...{} }",
    "new Bag().data",
    "fresh()",
    "Object.create(Object.prototype)",
    "{ kind: 'seeded' }",
    "new Map()",
    "[]",
    "new Set()",
)
#: What every drawn program starts with: the helpers the makers and steps use.
PRELUDE = (
    "class Bag { data = {}; }\n"
    "function fresh(opts = {}) { return opts; }\n"
    "const show = (v) => v instanceof Map ? JSON.stringify([...v]) : v instanceof Set ? "
    "JSON.stringify([...v]) : JSON.stringify(v);\n"
)
_IDS = st.sampled_from(["a1", "b2", "c3", "empty", "x-9", "café"])
_KEYS = st.sampled_from(["name", "count", "status", "body", "id", "0", "tags", "k"])
_VALUES = st.sampled_from(
    ["1", '"text"', "null", "true", "[]", "{}", "[1, {}]", "-0", "1.5e3", '"é✓"']
)


def _fill(var: str, kind: str, key: str, value: str, form: int) -> str:
    """One statement that adds to object `var` (a Map, Set, array or plain object)."""
    k = json.dumps(key)
    if kind == "map":
        return f"{var}.set({k}, {value});"
    if kind == "set":
        return f"{var}.add({k});"
    if kind == "array":
        return f"{var}.push({value});"
    return {
        0: f"{var}[{k}] = {value};",
        1: f"{var}[{k}] = ({var}[{k}] || 0) + 1;",
        2: f"Object.assign({var}, {{ [{k}]: {value} }});",
        3: f"{var}.{'_' + key} ??= {value};",
    }[form]


def _kind(maker: str) -> str:
    return (
        "map"
        if maker == "new Map()"
        else "set"
        if maker == "new Set()"
        else "array"
        if maker == "[]"
        else "object"
    )


def _call(draw: st.DrawFn, objects: list[tuple[str, str]], n: int) -> str:
    """One host call statement (or a few), numbered `n` for its own names."""
    item = json.dumps(draw(_IDS))
    plain = [v for v, kind in objects if kind == "object"]
    choices = [
        f"await shop.getItem({item});",
        f"const r{n} = await shop.getItem({item}); console.log(show(r{n}.meta ?? r{n}));",
        f"const r{n} = await shop.getItem({item}); r{n}.attrs = {{ ...r{n}.attrs, seen: {n} }};"
        f" console.log(show(r{n}.attrs));",
        f"await Promise.all([shop.getItem({item}), shop.getStats(), shop.listItems({{ limit: 2 }})]);",
        f"const s{n} = await Promise.allSettled([shop.getItem('missing-{n}'), shop.getItem({item})]);"
        f" console.log(s{n}.map((x) => x.status).join());",
        f"try {{ await shop.getItem('boom-{n}'); }} catch (e) {{ console.log(e.message); }}",
        "try { await shop.listUsers({ org: 'other' }); } catch (e) { console.log(e.message.slice(0, 12)); }",
        "try { await shop.adminReset({}); } catch (e) { console.log(e.message); }",
        f"const b{n} = __coderunner_host_call(JSON.stringify({{ method: 'GET', path: '/v1/stats' }}));"
        f" console.log(b{n}.status, Object.keys(b{n}).join());",
        f"const p{n} = shop.getItem({item}); const q{n} = {{}}; q{n}.got = (await p{n}).id; console.log(show(q{n}));",
        f"for (const id of ['l{n}a', 'l{n}b']) await shop.getItem(id);",
        f"const t{n} = await shop.getStats(); console.log(show(t{n}.empty), show(t{n}.none));",
        f"console.log((await shop.getNote({item})).length);",
        f"const h{n} = await shop.$response.listItems({{ limit: 2 }});"
        f" console.log(h{n}.status, Object.keys(h{n}.headers).sort().join(), /next/.test(h{n}.headers.link));",
        f"const m{n} = await shop.$response.getItem('missing-{n}'); console.log(m{n}.status, show(m{n}.body));",
        f"const d{n} = await shop.download('n-{n}'); console.log(d{n} instanceof Uint8Array, d{n}.length, d{n}.join());",
        f"console.log(show(await shop.putBlob('g{n}', new Uint8Array([{n}, 0, 255]))));",
        f"console.log(show(await shop.importCsv('a,b\\n{n},x\\n')));",
        f"const k{n} = await __coderunner_host_start(JSON.stringify({{ method: 'GET', path: '/v1/stats' }}));"
        f" console.log(JSON.stringify(Object.keys(k{n})), k{n}.type, typeof k{n}.headers);",
    ]
    if plain:
        var = draw(st.sampled_from(plain))
        choices += [
            f"console.log(show((await shop.createItem({var})).created));",
            f"console.log(show((await shop.updateItem({item}, {var})).changed));",
            f"await shop.submitForm({{ from: 'gen', ...{var}, n: '{n}' }});",
        ]
    return draw(st.sampled_from(choices))


@st.composite
def steps(draw: st.DrawFn) -> str:
    """A program drawn from the grammar above (see the module docstring)."""
    lines = [PRELUDE]
    objects: list[tuple[str, str]] = []
    for n in range(draw(st.integers(3, 14))):
        action = draw(st.sampled_from(["make", "call", "call", "fill", "show"]))
        if action == "make" or not objects:
            maker = draw(st.sampled_from(MAKERS))
            var = f"v{len(objects)}"
            objects.append((var, _kind(maker)))
            lines.append(f"const {var} = {maker};")
        elif action == "call":
            lines.append(_call(draw, objects, n))
        elif action == "fill":
            var, kind = draw(st.sampled_from(objects))
            lines.append(_fill(var, kind, draw(_KEYS), draw(_VALUES), draw(st.integers(0, 3))))
        else:
            var, _ = draw(st.sampled_from(objects))
            lines.append(
                draw(
                    st.sampled_from(
                        [
                            f"console.log(show({var}));",
                            f"console.log(Object.keys({var}).join(), 'status' in {var}, 'body' in {var});",
                            f"console.log(JSON.stringify(Object.entries({var})));",
                        ]
                    )
                )
            )
    lines += [f"console.log({json.dumps(v)}, show({v}));" for v, _ in objects]
    return "\n".join(lines) + "\n"


def _composable(path: Path) -> bool:
    """Program files that can sit in a block among others: no import (a module-level
    statement), no deliberate non-zero exit (which would end the composed program), and
    none of the known differences."""
    if path.name.startswith("exit_") or path.stem in KNOWN_DIFFERENCES:
        return False
    return "import " not in path.read_text(encoding="utf-8")


@functools.cache
def composable_programs() -> tuple[str, ...]:
    """Read once per process, so every example of a run draws from the same pool."""
    return tuple(
        p.read_text(encoding="utf-8") for p in sorted(PROGRAMS.glob("*.js")) if _composable(p)
    )


@st.composite
def corpus_blocks(draw: st.DrawFn) -> str:
    """Two to four program files, each in its own block, with objects made before the
    first and filled between the blocks, then printed at the end."""
    pool = composable_programs()
    picked = draw(st.lists(st.sampled_from(pool), min_size=2, max_size=4))
    makers = draw(st.lists(st.sampled_from(MAKERS), min_size=1, max_size=3))
    objects = [(f"g{i}", _kind(m)) for i, m in enumerate(makers)]
    parts = [PRELUDE] + [f"const {v} = {m};\n" for (v, _), m in zip(objects, makers, strict=True)]
    for i, code in enumerate(picked):
        parts.append(f"console.log('-- block {i}');\n{{\n{code}}}\n")
        var, kind = draw(st.sampled_from(objects))
        form = draw(st.integers(0, 3))
        parts.append(_fill(var, kind, draw(_KEYS), draw(_VALUES), form) + "\n")
    parts += [f"console.log({json.dumps(v)}, show({v}));\n" for v, _ in objects]
    return "".join(parts)


def programs() -> st.SearchStrategy[str]:
    """A new program: from the grammar, or composed of program files."""
    return st.one_of(steps(), corpus_blocks())
