"""The runtime's rooms, drawn from their imports (ast, no import executed).

`runtime/sandbox` never imports `runtime/broker` and vice versa, so the engine could move
to another process than the key; `runtime/cli.py` and `runtime/mcp/runner.py` (the MCP
server's one door into the runtime) import nothing from the runtime but its public API
(`from runtime import ...`). The engine process's side of the tiers
(`runtime.tiers.engine_process` and the `runtime.tiers.wire` framing it uses) imports
nothing of the broker's, the session's or the pool's, directly or through any module
it loads (and a fresh interpreter that imports it is looked at: no broker module, no
httpx). A test that fails when the claim is false: the drawing is checked against
planted violations too.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RUNTIME = ROOT / "runtime"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(source: str, module: str) -> set[str]:
    """Every module `source` imports, absolute; `from X import name` also yields X.name."""
    package = module if module.endswith("__init__") else module.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def graph() -> dict[str, set[str]]:
    return {
        _module_name(path): imports_of(path.read_text(encoding="utf-8"), _module_name(path))
        for path in sorted(RUNTIME.rglob("*.py"))
    }


def _inside(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


#: Modules an engine process loads; none may reach what holds or decides on the key.
ENGINE_SIDE = ("runtime.tiers.engine_process", "runtime.tiers.wire")
#: What holds the grants and keys, or composes them with the engine in one process.
KEY_SIDE = ("runtime.broker", "runtime.session", "runtime.pool", "runtime.tiers.boundary")


def _runtime_imports(source: str, module: str) -> set[str]:
    """What `source` imports when it runs: `if TYPE_CHECKING:` blocks import nothing."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            node.body = [ast.Pass()]
    return imports_of(ast.unparse(tree), module)


def run_graph() -> dict[str, set[str]]:
    return {
        _module_name(path): _runtime_imports(path.read_text(encoding="utf-8"), _module_name(path))
        for path in sorted(RUNTIME.rglob("*.py"))
    }


def reached(edges: dict[str, set[str]], start: str) -> set[str]:
    """Every runtime module loading `start` loads: its imports, theirs, and each
    module's parent packages (importing a.b.c runs a/__init__ and a/b/__init__)."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        parts = name.split(".")
        todo += [".".join(parts[:i]) for i in range(1, len(parts))]
        todo += [t for t in edges.get(name, ()) if t in edges]
    return seen


def engine_violations(edges: dict[str, set[str]]) -> list[str]:
    out = []
    for start in ENGINE_SIDE:
        out += [
            f"{start} reaches {name}"
            for name in sorted(reached(edges, start))
            if any(_inside(name, key) for key in KEY_SIDE)
        ]
    return out


def violations(edges: dict[str, set[str]]) -> list[str]:
    out = []
    for module, targets in edges.items():
        for target in sorted(targets):
            if _inside(module, "runtime.sandbox") and _inside(target, "runtime.broker"):
                out.append(f"{module} -> {target}")
            if _inside(module, "runtime.broker") and _inside(target, "runtime.sandbox"):
                out.append(f"{module} -> {target}")
            if module in ("runtime.cli", "runtime.mcp.runner") and _inside(target, "runtime"):
                public = target == "runtime" or (
                    target.count(".") == 1 and target.split(".")[1] in _public_names()
                )
                if not public:
                    out.append(f"{module} -> {target}")
    return out


def _public_names() -> set[str]:
    import runtime

    return set(runtime.__all__)


def test_the_graph_sees_every_room() -> None:
    edges = graph()
    assert "runtime.sandbox.runner" in edges and "runtime.broker.handler" in edges
    assert "runtime.sandbox" in edges["runtime.session"]
    assert "runtime.broker" in edges["runtime.session"]


def test_sandbox_and_broker_never_import_each_other_and_cli_uses_only_the_public_api() -> None:
    assert violations(graph()) == []


@pytest.mark.parametrize(
    ("module", "source"),
    [
        ("runtime.sandbox.bridge", "from runtime.broker.handler import Broker\n"),
        ("runtime.sandbox.runner", "import runtime.broker\n"),
        ("runtime.broker.policy", "from runtime.sandbox import run\n"),
        ("runtime.broker.handler", "from ..sandbox import runner\n"),
        ("runtime.cli", "from runtime.session import run_with_grant\n"),
        ("runtime.cli", "from runtime.broker import Broker\n"),
        ("runtime.mcp.runner", "from runtime.session import run_profile\n"),
    ],
)
def test_a_planted_violation_is_found(module: str, source: str) -> None:
    edges = graph()
    edges[module] = edges[module] | imports_of(source, module)
    assert violations(edges), source


def test_the_engine_process_reaches_nothing_that_holds_the_key() -> None:
    edges = run_graph()
    assert "runtime.tiers.engine_process" in edges
    assert "runtime.sandbox.runner" in reached(edges, "runtime.tiers.engine_process")
    assert engine_violations(edges) == []


@pytest.mark.parametrize(
    ("module", "source"),
    [
        ("runtime.tiers.engine_process", "from runtime.broker import Broker\n"),
        ("runtime.tiers.wire", "import runtime.session\n"),
        ("runtime.sandbox.vm", "from runtime.pool import RunPool\n"),  # reached through sandbox
        ("runtime", "from runtime.broker import Broker\n"),  # the package runs first
    ],
)
def test_a_planted_engine_side_violation_is_found(module: str, source: str) -> None:
    edges = run_graph()
    edges[module] = edges[module] | imports_of(source, module)
    assert engine_violations(edges), source


def test_a_fresh_interpreter_importing_the_engine_process_loads_no_broker() -> None:
    probe = (
        "import sys, runtime.tiers.engine_process\n"
        "print(sorted(m for m in sys.modules if m.startswith(('runtime.broker', 'runtime.session',"
        " 'runtime.pool', 'runtime.tiers.boundary', 'httpx'))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert out.stdout.strip() == "[]"
