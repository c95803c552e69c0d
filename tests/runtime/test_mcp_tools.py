"""The MCP tools' answers as plain data: bounded JSON, hints, the last key check, search."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runtime.mcp import tools
from runtime.mcp.runner import Call, Run
from runtime.mcp.search import Index, words
from specgen import build
from specgen.grant_view import allowed, read_grant

ROOT = Path(__file__).resolve().parents[2]


def _run(**changes: object) -> Run:
    base: dict[str, object] = {
        "stdout": "",
        "stderr": "",
        "stdout_truncated": False,
        "stderr_truncated": False,
        "exit_code": 0,
        "timed_out": False,
        "duration_s": 0.01,
        "calls": (),
        "denied": 0,
        "dropped": 0,
    }
    base.update(changes)
    return Run(**base)  # type: ignore[arg-type]


def _answer(run: Run, leaks: object = None) -> tuple[dict, bool]:
    answer = tools.execute_answer(run, max_calls=256, timeout_s=5.0, leaks=leaks)
    return json.loads(answer.text), answer.is_error


def test_output_is_cut_but_stays_valid_json_with_a_marker() -> None:
    big = 'x"\\\n' * tools.MAX_STREAM_CHARS
    out, _ = _answer(_run(stdout=big, stderr="short"))
    assert out["truncated"] is True
    assert out["stdout"] == big[: tools.MAX_STREAM_CHARS]
    assert out["stderr"] == "short"
    small, _ = _answer(_run(stdout="ok\n"))
    assert small["truncated"] is False


def test_trace_rows_beyond_the_cap_are_counted() -> None:
    calls = tuple(Call(i, "GET", "/a/*", 200, True) for i in range(tools.MAX_CALLS_SHOWN + 5))
    out, _ = _answer(_run(calls=calls, dropped=2))
    assert len(out["calls"]) == tools.MAX_CALLS_SHOWN
    assert out["calls_not_shown"] == 7 and out["truncated"] is True


def test_hints_name_the_rule() -> None:
    out, _ = _answer(_run(denied=1, refused=("budget_exhausted",)))
    assert out["hints"] == [
        "budget spent (1 call): this grant allows 256 host calls per run and the broker "
        "refused the ones after that (429); do fewer calls per run"
    ]
    printed = (
        "host api 403: parameter not granted: sort\nhost api 403: parameter not granted: sort\n"
    )
    out, _ = _answer(
        _run(
            stdout=printed,
            denied=3,
            refused=("parameter_not_granted",) * 2 + ("route_not_granted",),
        )
    )
    assert out["hints"][0].startswith("parameter not granted: sort (2 calls); the route is granted")
    assert out["hints"][1].startswith("route not granted (1 call): no allow entry")
    assert len(out["hints"]) == 2
    # the rule is named from the record even when the guest printed nothing
    out, _ = _answer(_run(denied=1, refused=("pin_differs",)))
    assert out["hints"][0].startswith("pinned value differs (1 call): the grant fixes")
    out, _ = _answer(_run(denied=2))
    assert out["hints"] == [
        "2 call(s) refused by the sandbox before the broker (its host-call limit, or an "
        "envelope too large or malformed)"
    ]
    out, _ = _answer(_run(calls=(Call(1, "GET", "/m/*", 404, True),)))
    assert out["hints"] == ["upstream answered 404 to GET /m/* (the error body went to the guest)"]
    out, _ = _answer(_run(calls=(Call(1, "GET", "/m/*", 0, False),)))
    assert out["hints"] == [
        "a call was still in flight when the run ended and was cancelled (status 0); "
        "await every call before the code finishes"
    ]
    out, error = _answer(_run(timed_out=True, exit_code=1))
    assert error and out["hints"] == ["the run hit its 5 s time limit and was stopped"]


def test_an_answer_that_would_carry_the_key_carries_no_output() -> None:
    key = "k-123-secret"
    out, _ = _answer(_run(stdout=f"leaked {key}", stderr="x"), leaks=lambda t: key in t)
    assert key not in json.dumps(out)
    assert out["stdout"] == tools.WITHHELD and out["truncated"] is True


@pytest.mark.parametrize("key", ['k-"quoted"-secret', "k-\\back\\slash", "k-\u00e9-\U0001f511"])
def test_an_answer_is_searched_for_a_key_json_would_escape(key: str) -> None:
    """The answer is JSON, where a quote or backslash of the key is escaped; the check
    (the grant's verbatim `leaks`) must still see the key the guest printed."""
    out, _ = _answer(_run(stdout="x", stderr=f"leaked {key}"), leaks=lambda t: key in t)
    assert out["stderr"] == tools.WITHHELD and out["stdout"] == tools.WITHHELD


def test_words_split_names_and_fold_plurals() -> None:
    assert words("agent_memory_memoriesList") == ["agent", "memory", "memory", "list"]
    assert words("HTTPStatus") == ["http", "status"]


def test_search_ranks_by_what_an_operation_does() -> None:
    result = build.run(
        str(ROOT / "examples/memory_grant/agent-memory.openapi.json"),
        build.Options(global_name="memory"),
    )
    ops = [t for t in result.types.operations]
    index = Index.build(ops)
    assert index.search("recall memories", 1)[0].op.name == "agent_memory_recall"
    assert index.search("delete a namespace", 1)[0].op.name == "agent_memory_namespace_delete"
    assert index.search("per_page cursor", 3)[0].op.method == "GET"
    assert index.search("zebra", 5) == []
    view = read_grant(ROOT / "examples/memory_grant/grants.json", "agent-memory")
    catalog = tools.Catalog(allowed(result, view.allow), result.types, "memory")
    assert len(catalog) == 3
    assert (
        "namespace"
        not in catalog.search("delete a namespace", 5).split("\n\n", 1)[-1].split("(")[0]
    )
    assert catalog.describe("memory.agent_memory_namespace_delete") is None


def test_a_catalog_builds_its_search_index_at_the_first_search_and_only_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The index is not part of the server's start (GitHub's takes a tenth of a second),
    and concurrent first searches build it once."""
    import threading

    result = build.run(
        str(ROOT / "examples/memory_grant/agent-memory.openapi.json"),
        build.Options(global_name="memory"),
    )
    built: list[int] = []
    real = Index.build

    def counted(ops):  # type: ignore[no-untyped-def]
        built.append(len(ops))
        return real(ops)

    monkeypatch.setattr(tools.Index, "build", staticmethod(counted))
    view = read_grant(ROOT / "examples/memory_grant/grants.json", "agent-memory")
    catalog = tools.Catalog(allowed(result, view.allow), result.types, "memory")
    assert built == []
    assert catalog.describe("memory.agent_memory_recall") is not None
    assert built == []  # describing needs no index
    answers: list[str] = []
    searchers = [
        threading.Thread(target=lambda: answers.append(catalog.search("recall memories", 1)))
        for _ in range(4)
    ]
    for t in searchers:
        t.start()
    for t in searchers:
        t.join()
    assert built == [3]
    assert len(set(answers)) == 1 and "agent_memory_recall" in answers[0]


def test_the_last_check_knows_every_secret_of_the_token_block(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """execute's answer is searched for the grant's secrets before it leaves the server:
    for a basic block that is the password as well as the user, not only a static key."""
    from runtime.mcp.runner import open_grant

    grants = tmp_path / "grants.json"
    block = {"type": "basic", "user_env": "U", "password_env": "P"}
    profile = {"base_url": "https://h.example", "allowed_callers": ["a"], "allow": ["GET /x"]}
    grants.write_text(json.dumps({"profiles": {"p": {**profile, "token": block}}}))
    monkeypatch.setenv("U", "user-7f3a")
    monkeypatch.setenv("P", "pass-9c1e")
    grant = open_grant(grants, "p", "a")
    assert grant.has_key
    assert grant.leaks("echo pass-9c1e") and grant.leaks("user-7f3a")
    assert not grant.leaks("nothing secret here")


def test_search_finds_an_operation_by_its_tag() -> None:
    from specgen import typescript
    from specgen.operations import generate

    def get(op_id: str, tags: list[str]) -> dict[str, object]:
        return {"operationId": op_id, "tags": tags, "responses": {"200": {"description": "ok"}}}

    doc = {
        "openapi": "3.0.3",
        "info": {"title": "T", "version": "1"},
        "paths": {
            "/a": {"get": get("first", ["Billing"])},
            "/b": {"get": get("second", ["Weather"])},
        },
    }
    index = Index.build(list(typescript.generate(doc, generate(doc, name="t.json")).operations))
    assert [t.op.name for t in index.search("weather", 5)] == ["second"]
    assert [t.op.name for t in index.search("billing", 5)] == ["first"]
