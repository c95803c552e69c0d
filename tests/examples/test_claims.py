"""Each claim of the memory-grant page, falsified on its own.

`examples/memory_grant/claims.py` turns what the runs observed into the claims the page
prints. A claim that no variant can make fail says nothing, so every check gets a copy of
the real result broken in exactly the way the claim rules out, and the test asserts that
this claim, and no other, is reported.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import replace

import pytest

from examples.kit.runs import ExampleResult, RunRecord
from examples.memory_grant.claims import failed_claims
from examples.memory_grant.fake import RecordedRequest
from examples.memory_grant.runner import run_example

Breakage = Callable[[ExampleResult], None]


@pytest.fixture(scope="module")
def result() -> ExampleResult:
    return run_example(scan_memory=True)


def _run(result: ExampleResult, number: int) -> RunRecord:
    return next(run for run in result.runs if run.number == number)


def _drop_run_5(r: ExampleResult) -> None:
    r.runs = [run for run in r.runs if run.number != 5]


def _run_1_prints_another_line(r: ExampleResult) -> None:
    run = _run(r, 1)
    run.stdout = run.stdout.replace("Spanish", "French", 1)


def _run_1_sends_other_bytes(r: ExampleResult) -> None:
    run = _run(r, 1)
    run.rows = [replace(run.rows[0], bytes_sent=run.rows[0].bytes_sent + 1), *run.rows[1:]]


def _run_3_is_not_denied(r: ExampleResult) -> None:
    _run(r, 3).denied = 0


def _run_4_refusal_reached_the_api(r: ExampleResult) -> None:
    _run(r, 4).requests = [
        RecordedRequest("DELETE", "/client/v4/x", carried_token=True, status=200, operation_id=None)
    ]


def _run_3_refusal_was_traced(r: ExampleResult) -> None:
    _run(r, 3).rows = [replace(_run(r, 1).rows[1], seq=1)]


def _run_2_trace_row_outside_the_grant(r: ExampleResult) -> None:
    run = _run(r, 2)
    run.rows = [replace(run.rows[0], route="/client/v4/accounts/*/agent-memory/namespaces")]


def _a_request_without_the_key(r: ExampleResult) -> None:
    r.api_log = [replace(r.api_log[0], carried_token=False), *r.api_log[1:]]


def _no_request_reached_the_api(r: ExampleResult) -> None:
    r.api_log = []


def _key_in_run_2_audit_line(r: ExampleResult) -> None:
    _run(r, 2).audit_line += r.token


def _key_in_run_1_memory(r: ExampleResult) -> None:
    _run(r, 1).memory_hits = 3


CASES: dict[str, tuple[Breakage, str]] = {
    "runs": (_drop_run_5, "the page shows runs [1, 2, 3, 4, 5], got [1, 2, 3, 4]"),
    "printed": (
        _run_1_prints_another_line,
        "run 1 printed ['stored 01JFAKEMEM0000000000000001', "
        "'recalled: The customer wants replies in French.', "
        "'read back by ID: The customer wants replies in Spanish.']",
    ),
    "bytes": (_run_1_sends_other_bytes, "run 1 sent [74, 50, 0] bytes per call, the page says"),
    "denied": (_run_3_is_not_denied, "run 3: the broker denied 0 calls, the page says 2"),
    "reached": (_run_4_refusal_reached_the_api, "run 4: 1 request(s) reached the API"),
    "traced": (_run_3_refusal_was_traced, "run 3: the trace recorded 1 call(s)"),
    "grant": (_run_2_trace_row_outside_the_grant, "run 2: trace row 1 holds"),
    "key carried": (_a_request_without_the_key, "1 of 4 requests at the API lacked the key"),
    "api reached": (_no_request_reached_the_api, "0 of 0 requests at the API lacked the key"),
    "key in audit": (_key_in_run_2_audit_line, "run 2: the key is in its audit line"),
    "key in memory": (_key_in_run_1_memory, "run 1: the key is in the guest's memory (3 hits)"),
}


@pytest.mark.parametrize("claim", CASES)
def test_each_claim_fails_alone_on_a_variant_that_breaks_it(
    result: ExampleResult, claim: str
) -> None:
    assert failed_claims(result) == []
    breakage, message = CASES[claim]
    broken = copy.deepcopy(result)
    breakage(broken)
    failures = failed_claims(broken)
    assert len(failures) == 1 and failures[0].startswith(message), failures


def test_a_key_printed_by_a_run_is_named(result: ExampleResult) -> None:
    broken = copy.deepcopy(result)
    _run(broken, 4).stdout += broken.token + "\n"
    failures = failed_claims(broken)
    # The extra line breaks run 4's printed-lines claim as well; both must be reported.
    assert "run 4: the key is in its stdout" in failures
    assert any(f.startswith("run 4 printed") for f in failures)
    assert len(failures) == 2, failures
