"""The differential suite catches a reply object that corrupts the guest's other objects.

The suite was built after a real bug: QuickJS-NG 0.15's JS_NewObjectFromStr, which the
bridge then used to make the reply object, added the reply's `status` and `body` to the
shape every empty object shares, so each `{}` the guest still held empty when a reply
arrived gained phantom `status` and `body` fields (stale heap values), and a POST of such
an object sent them upstream. Measured on the 0.15 engine with that old reply object, 47
of the 310 program files then in tests/differential/programs differed from node.

The engine is now QuickJS-NG 0.17 built from source (docs/engine.md), where that call
keeps shapes apart (tests/runtime/test_reply_object_shape.py), so putting the old
builder back no longer shows anything and cannot prove the suite would catch the bug.
Here the bridge is instead given a reply-object builder that does to the guest what the
bug did, for real, through the engine's own structures: it builds the true reply, then
walks the runtime's list of every GC object (in the engine's linear memory), picks each
plain object that still has the empty shape a fresh `JS_NewObject` gets (exactly the
objects the bug reached: `{}`, `JSON.parse("{}")`, a class field's `{}`, a default
parameter's `{}`), and gives it own enumerable `status` and `body` data properties with
`JS_DefinePropertyValueStr`. The suite must report differences from node for program
files, and the generator must find one by itself. Measured with this builder on 0.17:
44 of the 369 program files differ from node (besides the known differences), the
simulation reaching the same kinds of program the bug did.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, find, settings

from runtime.contract import HostReply
from runtime.sandbox import bridge
from runtime.sandbox import vm as qjs_vm
from tests.differential import generator
from tests.differential.harness import Harness, programs

#: Program files whose output or requests the 0.15 bug changed (a sample of the 47).
CAUGHT = (
    "assign_returns_target",
    "class_private_fields",
    "loop_nested_awaits",
    "obj_assign_empty_target",
    "obj_empty_after_started_calls",
    "obj_getOwnPropertyNames",
    "obj_made_inside_loop",
)

#: Where QuickJS-NG 0.17's JSObject (wasm32) keeps what the walk reads, relative to the
#: pointer in a JSValue: the GC list link (next, prev), the class id, the shape.
_NEXT, _PREV, _CLASS_ID, _SHAPE = 0, 4, 10, 12
JS_CLASS_OBJECT = 1
_OBJECT_TAG = 0xFFFFFFFF << 32
#: The two names the bug added, NUL-terminated, as JS_DefinePropertyValueStr reads them.
_PHANTOM_KEYS = b"status\0body"
_TRUE_REPLY_OBJECT = bridge._reply_object


def _class_id(vm: qjs_vm.Vm, ptr: int) -> int:
    return struct.unpack("<H", vm.read(ptr + _CLASS_ID, 2))[0]


def _empty_plain_objects(vm: qjs_vm.Vm, ctx: int) -> list[int]:
    """Every live object of class Object whose shape is the shared empty one.

    Two fresh objects find the layout's landmarks: the newer links to the older, both
    have the same (empty) shape and the plain-object class. If the engine's layout
    changed, these checks fail the run loudly rather than corrupt the wrong bytes."""
    older, newer = vm.call("JS_NewObject", ctx), vm.call("JS_NewObject", ctx)
    a, b = older & 0xFFFFFFFF, newer & 0xFFFFFFFF
    try:
        if not (
            vm.u32(b + _NEXT) == a
            and vm.u32(a + _PREV) == b
            and vm.u32(a + _SHAPE) == vm.u32(b + _SHAPE)
            and _class_id(vm, a) == JS_CLASS_OBJECT
        ):
            raise AssertionError("QuickJS-NG's JSObject layout is not the one this test walks")
        empty = vm.u32(a + _SHAPE)
        found = []
        node = vm.u32(a + _NEXT)
        while node != b:  # the list is circular: round to the newest object
            if vm.u32(node + _SHAPE) == empty and _class_id(vm, node) == JS_CLASS_OBJECT:
                found.append(node)
            node = vm.u32(node + _NEXT)
        return found
    finally:
        vm.call("JS_FreeValue", ctx, newer)
        vm.call("JS_FreeValue", ctx, older)


def _corrupting_reply_object(vm: qjs_vm.Vm, ctx: int, reply: HostReply) -> int:
    """The true reply object, after giving every empty plain object the guest holds
    own `status` and `body` fields (the reply's, as the bug's stale values were)."""
    obj = _TRUE_REPLY_OBJECT(vm, ctx, reply)
    if qjs_vm.tag_of(obj) == qjs_vm.TAG_EXCEPTION:
        return obj
    keys = vm.constant(_PHANTOM_KEYS)
    for target in _empty_plain_objects(vm, ctx):
        value = qjs_vm.s64(_OBJECT_TAG | target)
        text = vm.new_string(ctx, bridge._well_formed(reply.body[:64]))
        vm.call("JS_DefinePropertyValueStr", ctx, value, keys, qjs_vm.js_int(reply.status), 7)
        vm.call("JS_DefinePropertyValueStr", ctx, value, keys + 7, text, 7)
    return obj


@pytest.fixture
def corrupting_reply_object(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(bridge, "_reply_object", _corrupting_reply_object)
    yield


def test_a_corrupting_reply_object_makes_program_files_differ(
    differential: Harness, corrupting_reply_object: None
):
    code = dict(programs())
    differing = [name for name in CAUGHT if differential.compare(name, code[name]) is not None]
    assert differing == list(CAUGHT)


def test_the_corruption_shows_as_phantom_fields(
    differential: Harness, corrupting_reply_object: None
):
    difference = differential.compare(
        "obj_getOwnPropertyNames", dict(programs())["obj_getOwnPropertyNames"]
    )
    assert difference is not None
    assert (difference.sandbox.stdout, difference.node.stdout) == ('["status","body"]\n', "[]\n")


def test_a_corrupted_object_posted_upstream_shows_in_the_requests(
    differential: Harness, corrupting_reply_object: None
):
    code = (
        "const draft = {}; await shop.getStats(); draft.name = 'x'; await shop.createItem(draft);"
    )
    difference = differential.compare("posted", code)
    assert difference is not None
    posted = {r.body for r in difference.sandbox.requests if r.method == "POST"}
    assert posted == {
        b'{"status":200,"body":"{\\"count\\":42,\\"by_tag\\":{\\"red\\":3,\\"sale\\":2},\\"empty\\":{},\\"none\\":[]}","name":"x"}'
    }
    assert {r.body for r in difference.node.requests if r.method == "POST"} == {b'{"name":"x"}'}


def test_the_generator_finds_the_corruption_by_itself(
    differential: Harness, corrupting_reply_object: None
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


def test_with_the_true_reply_object_the_same_programs_agree(differential: Harness):
    code = dict(programs())
    assert [name for name in CAUGHT if differential.compare(name, code[name]) is not None] == []
