"""The harness can fail: its node side is node, and each compared thing can differ.

Each program asks for WebAssembly, which node has and the sandbox does not, so it
behaves differently on the two sides in exactly one of the three things compared. And a
run that never ends ends the same way on both sides, instead of hanging the suite.
"""

from __future__ import annotations

import pytest

from tests.differential.harness import Harness, harness

V8 = 'typeof WebAssembly === "object"'


def test_the_node_side_is_another_engine(differential: Harness):
    d = differential.compare("engine", "console.log(typeof WebAssembly)")
    assert d is not None
    assert (d.sandbox.stdout, d.node.stdout) == ("undefined\n", "object\n")


def test_a_different_exit_code_alone_is_a_difference(differential: Harness):
    d = differential.compare("exit", f'if ({V8}) throw new Error("v8");')
    assert d is not None
    assert (d.sandbox.stdout, d.sandbox.exit_code, d.node.stdout, d.node.exit_code) == (
        "",
        0,
        "",
        1,
    )
    assert d.sandbox.requests == d.node.requests == ()


def test_a_different_request_alone_is_a_difference(differential: Harness):
    d = differential.compare("requests", f"if ({V8}) await shop.getStats();")
    assert d is not None
    assert d.sandbox.stdout == d.node.stdout == ""
    assert (len(d.sandbox.requests), len(d.node.requests)) == (0, 1)
    assert "requests: 0 from the sandbox, 1 from node" in d.explain()


def test_a_different_body_is_a_difference(differential: Harness):
    d = differential.compare("body", f"await shop.createItem({{ v8: {V8} }});")
    assert d is not None
    assert [r.body for r in d.sandbox.requests] == [b'{"v8":false}']
    assert [r.body for r in d.node.requests] == [b'{"v8":true}']


def test_the_same_program_on_both_sides_agrees(differential: Harness):
    code = 'const r = await shop.uploadFile({ f: { filename: "a.txt", content: "x" } }); console.log(r.kind)'
    assert differential.compare("same", code) is None


@pytest.mark.parametrize(
    "code",
    [
        "while (true) {}",
        'import * as os from "qjs:os"; os.setInterval(() => {}, 5); console.log(1)',
    ],
    ids=["busy", "interval"],
)
def test_a_run_that_never_ends_times_out_on_both_sides(code: str):
    with harness(timeout_s=1.0) as h:
        sandbox, other = h.in_sandbox(code), h.in_node(code)
    assert (sandbox.exit_code, other.exit_code) == (124, 124)
    assert sandbox.stdout == other.stdout
