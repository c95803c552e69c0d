"""Agent programs give the same stdout, exit code and API requests in the sandbox and in node.

`make test` runs a sample (every 8th program file and a bounded hypothesis run);
`make differential` (PLIMSOLL_DIFFERENTIAL=all) runs every program file and thousands of
composed programs (PLIMSOLL_DIFFERENTIAL_EXAMPLES, default 2000). What the two sides
share and what they may differ in is said in tests/differential/harness.py.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings

from tests.differential import generator
from tests.differential.harness import KNOWN_DIFFERENCES, Harness, programs

FULL = os.environ.get("PLIMSOLL_DIFFERENTIAL") == "all"
EXAMPLES = int(os.environ.get("PLIMSOLL_DIFFERENTIAL_EXAMPLES", "2000" if FULL else "10"))
SAMPLE_EVERY = 1 if FULL else 8

ALL = programs()
SAMPLE = ALL[::SAMPLE_EVERY]


def test_the_suite_has_hundreds_of_programs():
    assert len(ALL) >= 300
    assert not set(KNOWN_DIFFERENCES) - {name for name, _ in ALL}


@pytest.mark.parametrize(("name", "code"), SAMPLE, ids=[name for name, _ in SAMPLE])
def test_program_agrees_with_node(differential: Harness, name: str, code: str):
    difference = differential.compare(name, code)
    if name in KNOWN_DIFFERENCES:
        assert difference is not None, f"{name} agrees now: take it off KNOWN_DIFFERENCES"
        return
    assert difference is None, difference.explain()


def test_generated_methods_agree_with_node_under_planted_prototypes(differential: Harness):
    """Always run (not only in every 8th sample): the generated client's own defence."""
    (code,) = [c for name, c in ALL if name == "preamble_planted_prototypes"]
    difference = differential.compare("preamble_planted_prototypes", code)
    assert difference is None, difference.explain()


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(code=generator.programs())
def test_composed_program_agrees_with_node(differential: Harness, code: str):
    difference = differential.compare("composed", code)
    assert difference is None, difference.explain() + "\n--- program:\n" + code
