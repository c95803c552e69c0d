"""Records `specgen.frozen.make` builds are the records the classes' own `__init__` builds.

`make` skips a frozen dataclass's generated `__init__` for speed; that is only sound if
every call passes every field and the class's `__init__` does nothing else. Every golden
case (both build modes, hostile documents included) is derived here, and each operation,
parameter, route, allow entry and permit is compared with the one its class makes from
the same fields: equal, equally hashed, still frozen. (Parameter lists and schema
summaries are NamedTuples, built by their own constructors.)
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from specgen.build import Options, run
from specgen.frozen import make
from specgen.operations import Operation

ROOT = Path(__file__).resolve().parents[2]
CASES: dict[str, dict[str, Any]] = json.loads((ROOT / "golden" / "cases.json").read_text())


def _same_as_init(record: object) -> None:
    cls = type(record)
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    assert set(vars(record)) == names, f"{cls.__name__} made without every field"
    rebuilt = cls(**vars(record))
    assert rebuilt == record
    assert vars(rebuilt) == vars(record)
    if cls.__hash__ is not None:
        assert hash(rebuilt) == hash(record)


def _options(args: list[str]) -> Options:
    compat = args[args.index("--compat") + 1] if "--compat" in args else ""
    name = args[args.index("--global") + 1] if "--global" in args else "host"
    return Options(global_name=name, compat=compat)


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_record_equals_what_its_init_makes(name: str) -> None:
    case = CASES[name]
    result = run(str(ROOT / case["spec"]), _options(case.get("args", [])))
    assert result.gen.operations
    for op in result.gen.operations:
        _same_as_init(op)
        for p in op.params.all():
            _same_as_init(p)
    for route in result.gen.allow:
        _same_as_init(route)
    for entry in result.gen.catalog:
        _same_as_init(entry)
        _same_as_init(entry.route)
        for permit in (*entry.query, *entry.headers):
            _same_as_init(permit)


def test_a_made_record_is_still_frozen() -> None:
    fields = {f.name: f.default for f in dataclasses.fields(Operation)}
    fields.update(method="GET", template="/a", route="/a", name="a", args=(), has_body=False)
    fields.update(summary="", params=None)
    op = make(Operation, dict(fields))
    with pytest.raises(dataclasses.FrozenInstanceError):
        op.method = "POST"  # type: ignore[misc]
    assert op == Operation(**fields)
