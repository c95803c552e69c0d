"""Every golden preamble.js, executed by a real JS engine against a recording fake client.

Reading the generated text is not enough: what matters is which verb, path and body the
agent's call turns into. One node process runs all cases (fast); each case gets a fresh
V8 context whose global holds a client that records its calls.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

from specgen.build import Options, run
from specgen.operations import Generated, generate
from specgen.render import artifacts
from tests import conftest as prerequisites

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "golden"
CASES: dict[str, dict[str, Any]] = json.loads((GOLDEN / "cases.json").read_text())
CLIENT_METHODS = ["call", "del", "get", "patch", "post", "put"]
#: Lines of the default build's preamble besides its rows (templates/preamble.js.j2):
#: a document adds a row per operation and nothing else.
TABLE_LINES = 41

HARNESS = r"""
const vm = require("vm");
const input = JSON.parse(require("fs").readFileSync(0, "utf8"));
const OWN = ["call", "del", "get", "patch", "post", "put"];
const out = [];
for (const c of input) {
  const calls = [];
  const client = {};
  for (const verb of OWN) {
    client[verb] = function (...args) {
      if (verb === "call" && args[0] !== null && typeof args[0] === "object") {
        // the default build's structured call: spec, values, body, options
        calls.push({verb: verb, structured: true, nargs: args.length, spec: args[0],
                    values: args[1] === undefined ? [] : args[1],
                    body: args.length > 2 && args[2] !== undefined ? args[2] : null,
                    options: args.length > 3 && args[3] !== undefined ? args[3] : null});
        return "returned-" + verb;
      }
      // h.call("HEAD", path): the verb first, then what the verb methods take
      const method = verb === "call" ? args.shift() : null;
      calls.push({verb: verb, method: method, nargs: args.length, path: args[0],
                  body: args.length > 1 ? args[1] : null});
      return "returned-" + verb;
    };
  }
  const ctx = vm.createContext({});
  ctx[c.global] = client;
  new vm.Script(c.src, {filename: c.name + "/preamble.js"}).runInContext(ctx);
  const results = [];
  for (const m of c.calls) {
    calls.length = 0;
    const fn = client[m.name];
    if (typeof fn !== "function") { results.push({name: m.name, missing: true}); continue; }
    const ret = fn.apply(null, m.args);
    results.push({name: m.name, arity: fn.length, fname: fn.name, calls: calls.slice(), ret: ret});
  }
  // Without the generic client the preamble must do nothing, and never throw.
  const empty = vm.createContext({});
  let threw = null;
  try { new vm.Script(c.src).runInContext(empty); } catch (e) { threw = String(e); }
  out.push({
    name: c.name,
    methods: Object.keys(client).filter((k) => !OWN.includes(k)),
    results: results,
    pwned: typeof ctx.PWNED,
    emptyPwned: typeof empty.PWNED,
    emptyKeys: Object.keys(empty),
    threw: threw,
  });
}
process.stdout.write(JSON.stringify(out));
"""


def node() -> str:
    return prerequisites.node()


def plan(name: str, gen: Generated, src: str) -> dict[str, Any]:
    """One case for the harness: every method called with distinct argument values."""
    calls = []
    for op in gen.operations:
        values = [f"v{i}-{op.name}" for i in range(len(op.args))]
        args: list[Any] = list(values)
        if op.has_body:
            args.append({"body_of": op.name})
        if op.has_options:
            args.append({"options_of": op.name})
        calls.append({"name": op.name, "args": args})
    return {"name": name, "global": gen.global_name, "src": src, "calls": calls}


def expected_path(template: str, values: list[str]) -> str:
    it = iter(values)
    return re.sub(r"\{[^{}]*\}", lambda _: next(it), template)


def execute(cases: list[dict[str, Any]], tmp_path: Path) -> dict[str, dict[str, Any]]:
    script = tmp_path / "harness.js"
    script.write_text(HARNESS)
    done = subprocess.run(
        [node(), str(script)],
        input=json.dumps(cases),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return {r["name"]: r for r in json.loads(done.stdout)}


def golden_cases() -> list[tuple[str, Generated, str]]:
    out = []
    for name, case in sorted(CASES.items()):
        args = [str(a) for a in case.get("args", [])]
        global_name = args[args.index("--global") + 1] if "--global" in args else "host"
        server = args[args.index("--server") + 1] if "--server" in args else None
        compat = args[args.index("--compat") + 1] if "--compat" in args else ""
        options = Options(global_name=global_name, server=server, compat=compat)
        result = run(str(ROOT / case["spec"]), options)
        src = (GOLDEN / name / "preamble.js").read_text()
        out.append((name, result.gen, src))
    return out


def check_case(gen: Generated, src: str, got: dict[str, Any]) -> None:
    assert got["threw"] is None
    assert got["emptyKeys"] == []
    assert got["pwned"] == got["emptyPwned"] == "undefined"
    # exactly one method per operation, in operation order, on the client itself
    assert got["methods"] == [op.name for op in gen.operations]
    # one line per operation: a row of the table, or a function of the reference build
    if any(op.structured for op in gen.operations):
        assert len(re.findall(r"^    \[.*\],$", src, re.M)) == len(gen.operations)
        assert src.count("\n") == len(gen.operations) + TABLE_LINES
    else:
        assert src.count("\n") == len(gen.operations) + 5
    assert src.endswith("})();\n")
    for op, res in zip(gen.operations, got["results"], strict=True):
        assert res["name"] == op.name
        values = [f"v{i}-{op.name}" for i in range(len(op.args))]
        assert res["arity"] == len(op.arg_list)
        assert len(res["calls"]) == 1, res
        call = res["calls"][0]
        if op.structured:
            assert res["fname"] == op.name  # a stack trace names the method
            check_structured(op, values, call)
            assert res["ret"] == "returned-call"
            continue
        assert call["verb"] == op.client_method, op
        assert call["method"] == (op.method if op.client_method == "call" else None), op
        assert call["path"] == expected_path(op.template, values), op
        if op.has_body:
            assert (call["nargs"], call["body"]) == (2, {"body_of": op.name})
        else:
            assert (call["nargs"], call["body"]) == (1, None)
        # the method returns what the client returns (the promise, in the real client)
        assert res["ret"] == f"returned-{op.client_method}"


def check_structured(op: Any, values: list[str], call: dict[str, Any]) -> None:
    """A structured call names the route pattern, and its values fill it to the path."""
    assert call["verb"] == "call" and call["structured"], op
    spec = call["spec"]
    assert spec["method"] == op.method and spec["route"] == op.route, op
    assert spec.get("query", []) == list(op.query_names)
    assert spec.get("headers", []) == list(op.header_names)
    assert call["values"] == values
    it = iter(values)
    assert re.sub(r"\*", lambda _: next(it), op.route) == expected_path(op.template, values)
    assert call["body"] == ({"body_of": op.name} if op.has_body else None), op
    assert call["options"] == ({"options_of": op.name} if op.has_options else None), op


def test_every_golden_preamble_runs_and_calls_the_right_route(tmp_path: Path) -> None:
    cases = golden_cases()
    results = execute([plan(name, gen, src) for name, gen, src in cases], tmp_path)
    assert sorted(results) == sorted(CASES)
    verbs_seen: set[str] = set()
    for name, gen, src in cases:
        check_case(gen, src, results[name])
        verbs_seen |= {"call" if op.structured else op.client_method for op in gen.operations}
    # the goldens exercise every client method a preamble can call (HEAD/OPTIONS use call)
    assert verbs_seen == {"get", "put", "post", "del", "patch", "call"}


def test_hostile_version_title_and_global_cannot_run_code(tmp_path: Path) -> None:
    """The hazard document's version tries to close the header comment; a global name and
    a title try to break out of their strings. None of it may execute."""
    doc = json.loads((ROOT / "tests/data/hazards.openapi.json").read_text())
    assert doc["info"]["version"] == "1 */ globalThis.PWNED=1; /*"
    hostile = json.loads(json.dumps(doc))
    hostile["info"]["title"] = (
        '"; globalThis.PWNED=1; "</script><script>globalThis.PWNED=1</script>'
    )
    cases = []
    for name, d, global_name in [
        ("version", doc, "home"),
        ("title", hostile, "home"),
        ("global", doc, 'x"]; globalThis.PWNED=1; //'),
        ("global-u2028", doc, "x\u2028globalThis.PWNED=1"),
    ]:
        gen = generate(d, name=name, global_name=global_name, prefix="/api/v2")
        src = artifacts(gen)["preamble.js"]
        cases.append((name, gen, src))
    results = execute([plan(name, gen, src) for name, gen, src in cases], tmp_path)
    for name, gen, src in cases:
        check_case(gen, src, results[name])


def test_hostile_route_literals_stay_strings(tmp_path: Path) -> None:
    doc = {
        "openapi": "3.0.3",
        "info": {"title": "t", "version": "1"},
        "paths": {
            "/a&b/{id}/x=1": {"get": {"operationId": "semi"}},
            "/q/$x/{id}/c,d:e@f+g": {"post": {"operationId": "weird", "requestBody": {}}},
        },
    }
    gen = generate(doc, name="routes", global_name="api")
    src = artifacts(gen)["preamble.js"]
    assert [op.name for op in gen.operations] == ["semi", "weird"]
    assert '"/a\\u0026b/*/x=1"' in src
    results = execute([plan("routes", gen, src)], tmp_path)
    check_case(gen, src, results["routes"])
