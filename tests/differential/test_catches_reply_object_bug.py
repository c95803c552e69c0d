"""The differential suite would have caught the reply-object bug it was built after.

QuickJS-NG 0.15's JS_NewObjectFromStr grew the shape every empty object shares, so each
`{}` a guest made before a host call gained phantom `status` and `body` fields (fixed in
runtime/sandbox/bridge.py `_reply_object`). Here the bridge is given back the old way of
making the reply object, and the suite must report differences from node: for program
files of make test's sample, and for a program the generator finds by itself.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, find, settings

from runtime.sandbox import bridge
from runtime.sandbox import vm as qjs_vm
from tests.differential import generator
from tests.differential.harness import Harness, programs

#: Program files (all in make test's sample) whose output or requests the bug changed.
CAUGHT = (
    "assign_returns_target",
    "class_private_fields",
    "loop_nested_awaits",
    "obj_assign_empty_target",
    "obj_empty_after_started_calls",
    "obj_getOwnPropertyNames",
    "obj_made_inside_loop",
)


def _reply_object_from_str(vm: qjs_vm.Vm, ctx: int, status: int, body: bytes) -> int:
    """The reply object as the bridge made it before the fix: JS_NewObjectFromStr."""
    text = vm.new_string(ctx, body)
    if qjs_vm.tag_of(text) == qjs_vm.TAG_EXCEPTION:
        return text
    keys = vm.constant(bridge._REPLY_KEYS)
    props = vm.constant(struct.pack("<II", keys, keys + 7), key="reply keys")
    values = vm.scratch("reply values")
    vm.write(values, struct.pack("<qq", qjs_vm.js_int(status), text))
    return vm.call("JS_NewObjectFromStr", ctx, 2, props, values)


@pytest.fixture
def old_reply_object(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bridge, "_reply_object", _reply_object_from_str)


def test_the_old_reply_object_makes_program_files_differ(differential: Harness, old_reply_object):
    code = dict(programs())
    differing = [name for name in CAUGHT if differential.compare(name, code[name]) is not None]
    assert differing == list(CAUGHT)


def test_the_old_reply_object_shows_as_phantom_fields(differential: Harness, old_reply_object):
    difference = differential.compare(
        "obj_getOwnPropertyNames", dict(programs())["obj_getOwnPropertyNames"]
    )
    assert difference is not None
    assert difference.node.stdout == "[]\n"
    assert "status" in difference.sandbox.stdout


def test_the_generator_finds_the_old_reply_object_by_itself(
    differential: Harness, old_reply_object
):
    found = find(
        generator.programs(),
        lambda code: differential.compare("composed", code) is not None,
        settings=settings(
            max_examples=200,
            deadline=None,
            database=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )
    assert differential.compare("composed", found) is not None


def test_with_the_fix_the_same_programs_agree(differential: Harness):
    code = dict(programs())
    assert [name for name in CAUGHT if differential.compare(name, code[name]) is not None] == []
