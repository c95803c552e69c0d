"""Every run ends with its audit record, whatever the guest or the host does.

A guest that slept past 2^64 ns once crashed the WASI clock (`struct.pack` overflow)
after its granted POST had reached the API: no output, no trace, no audit. These tests
drive the clock past that point, and also plant host faults at two depths (inside the
sandbox, and in the sandbox call itself) to show the session turns any of them into a
result with exit EXIT_INTERNAL plus the broker's full trace.
"""

from __future__ import annotations

import orjson
import pytest

import runtime
from runtime import EXIT_INTERNAL, Limits, RunInputError, run_with_grant
from tests.runtime.loopback import FakeAPI, profile

KEY = "key-for-the-audit-tests-0123456789"
POST = 'await host.post("/x", {a: 1});'


def _grant(api: FakeAPI):
    return profile(api.url, KEY, ("POST /x", "GET /x/*"))


def _audit(outcome: runtime.RunOutcome) -> dict:
    return orjson.loads(outcome.audit)


@pytest.mark.parametrize(
    "sleeper",
    [
        'import * as os from "qjs:os"; os.sleep(1.7e13); os.sleep(1.7e13);',
        'import * as os from "qjs:os";'
        " for (let i = 0; i < 3000; i++) os.setTimeout(() => {}, 1e13 + i);",
    ],
)
def test_sleeping_past_the_clock_ends_with_output_and_audit(api: FakeAPI, sleeper: str) -> None:
    code = f'{POST}\n{sleeper}\nconsole.log("late", Date.now() > 0, performance.now() > 0);'
    outcome = run_with_grant(code, _grant(api), limits=Limits(timeout_s=10))
    assert len(api.requests) == 1
    record = _audit(outcome)
    assert [(c["method"], c["route"], c["status"]) for c in record["calls"]] == [
        ("POST", "/x", 200)
    ]
    assert outcome.result.exit_code in (0, runtime.EXIT_TIMEOUT), outcome.result
    assert outcome.result.internal_error == ""


def test_the_clock_saturates_instead_of_overflowing() -> None:
    from runtime.sandbox import wasi

    state = wasi.WasiState(output_bytes=0, clock="fixed")
    state.sleep(1 << 70)
    state.sleep(1 << 70)
    for clock_id in range(4):
        assert state.now_ns(clock_id) == wasi.MAX_TIMESTAMP_NS


def test_a_host_fault_inside_the_sandbox_keeps_output_and_audit(
    api: FakeAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    from runtime.sandbox import wasi

    def broken(self: wasi.WasiState, ns: int) -> None:
        raise ZeroDivisionError("planted")

    code = f'import * as os from "qjs:os";\n{POST}\nconsole.log("before");\nos.sleep(5);'
    monkeypatch.setattr(wasi.WasiState, "sleep", broken)
    outcome = run_with_grant(code, _grant(api))
    assert outcome.result.exit_code == EXIT_INTERNAL
    assert outcome.result.stdout == "before\n"
    assert outcome.result.internal_error == "ZeroDivisionError"
    assert "planted" not in outcome.result.stdout + outcome.result.stderr
    assert len(_audit(outcome)["calls"]) == len(api.requests) == 1


def test_a_fault_escaping_the_sandbox_still_ends_with_the_audit(
    api: FakeAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    from runtime import session
    from runtime.contract import HostRequest

    def exploding_run(code: str, *, handler, **_: object):
        handler(HostRequest("POST", "/x", b"{}"))
        raise OverflowError("planted after a granted call")

    monkeypatch.setattr(session.sandbox, "run", exploding_run)
    outcome = run_with_grant("", _grant(api))
    assert outcome.result.exit_code == EXIT_INTERNAL
    assert outcome.result.internal_error == "OverflowError"
    assert [c["route"] for c in _audit(outcome)["calls"]] == ["/x"]


def test_refusals_inside_the_sandbox_are_counted_denied(api: FakeAPI) -> None:
    code = """
const raw = globalThis.__coderunner_host_call;
const a = raw("{not json");                      // 400, the sandbox's envelope refusal
const b = raw(JSON.stringify({method: "GET", path: "/x/" + "y".repeat(1200000)}));  // 413
const c = raw(JSON.stringify({method: "GET", path: "/nope"}));                      // 403, broker
console.log(a.status, b.status, c.status);
"""
    outcome = run_with_grant(code, _grant(api))
    assert outcome.result.stdout == "400 413 403\n"
    assert outcome.result.refused_calls == 2
    assert _audit(outcome)["denied"] == 3
    assert api.requests == []


def test_the_sandboxs_own_budget_refusals_are_counted(api: FakeAPI) -> None:
    from runtime import session

    grant = profile(api.url, KEY, ("GET /x/*",), max_calls=1)
    code = """
const raw = globalThis.__coderunner_host_call;
let n = 0;
for (let i = 0; i < 1030; i++) if (raw(JSON.stringify({method: "GET", path: "/x/1"})).status === 429) n++;
console.log(n);
"""
    outcome = run_with_grant(code, grant)
    headroom = session._SANDBOX_CALL_HEADROOM
    assert outcome.result.stdout == "1029\n"
    assert outcome.result.refused_calls == 1030 - 1 - headroom
    assert _audit(outcome)["denied"] == 1029


@pytest.mark.parametrize("memory_mb", [1])
def test_memory_below_the_engines_minimum_is_refused_up_front(memory_mb: int) -> None:
    with pytest.raises(RunInputError, match="below the engine's minimum"):
        run_with_grant(
            "", profile("http://127.0.0.1:9", KEY, ()), limits=Limits(memory_mb=memory_mb)
        )


def test_the_minimum_memory_runs() -> None:
    outcome = run_with_grant(
        "console.log([1, 2].map((x) => x * 2).join())",
        profile("http://127.0.0.1:9", KEY, ()),
        limits=Limits(memory_mb=runtime.MIN_MEMORY_MB),
    )
    assert (outcome.result.exit_code, outcome.result.stdout) == (0, "2,4\n")


@pytest.mark.parametrize(
    ("code", "where"),
    [
        # The line only: QuickJS's column for a syntax error at the end of the input
        # depends on what precedes the buffer (19 after the prelude, 1 from an image).
        ("syntax error here(", "<cmdline>:1:"),
        ("console.log(1);\nnull.x", "(<cmdline>:2:1)"),
        ('function f() { throw new Error("e") }\n\n\nf()', "(<cmdline>:4:1)"),
    ],
)
def test_errors_name_the_agents_own_line_numbers(code: str, where: str) -> None:
    """Found: a syntax error on the agent's line 1 was reported at
    `<cmdline>:127:45`, counted from the shims, client and preamble before it."""
    grant = profile("http://127.0.0.1:9", KEY, ("GET /x/*",), preamble="var a = 1;\nvar b = 2;\n")
    outcome = run_with_grant(code, grant)
    assert outcome.result.exit_code == 1
    assert where in outcome.result.stderr, outcome.result.stderr


def test_line_numbers_without_a_grant_also_start_at_the_agents_code() -> None:
    result = runtime.run_sandbox("\n\nnull.x")
    assert "(<cmdline>:3:1)" in result.stderr, result.stderr


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda p: run_with_grant(b"console.log(1)", p), "code must be a str"),  # type: ignore[arg-type]
        (lambda p: run_with_grant("", "p"), "profile must be a Profile"),  # type: ignore[arg-type]
        (lambda p: run_with_grant("", p, limits={"timeout_s": 1}), "limits must be a Limits"),  # type: ignore[arg-type]
        (lambda p: run_with_grant("", p, limits=Limits(memory_mb="64")), "memory_mb an integer"),  # type: ignore[arg-type]
        (lambda p: runtime.run_profile("", p, caller="x", timeout_s="soon"), "timeout_s must"),  # type: ignore[arg-type]
    ],
)
def test_bad_input_to_the_python_api_is_a_refusal_never_another_exception(
    call, message: str
) -> None:
    with pytest.raises(RunInputError, match=message):
        call(profile("http://127.0.0.1:9", KEY, ("GET /x/*",)))
