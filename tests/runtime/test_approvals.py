"""Calls the grant holds for a person's approval, through the real sandbox and broker.

Every run is real agent code against a real loopback API (tests/runtime/loopback.py),
the independent witness of what was sent: "never reached the API" is what the server
saw, and "exactly the previewed body" compares the server's bytes with the question's.
The approvers here are scripted people; the MCP and terminal channels have their own
tests (test_mcp_approvals.py, and the CLI cases below).
"""

from __future__ import annotations

import hashlib
import json
import os
import termios
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime import (
    Answer,
    CannotAsk,
    GrantsError,
    Limits,
    Question,
    RunOutcome,
    load_grants,
    run_with_grant,
    sandbox,
)
from runtime.approvers import TerminalApprover
from runtime.broker.approval import PREVIEW_BYTES, escape
from tests.runtime.loopback import FakeAPI

KEY = "approval-key-5c1d"
CALLER = "ops"


class Person:
    """A scripted approver: answers each question with the next answer, after `delay_s`."""

    channel = "test"

    def __init__(self, *answers: Answer | None, delay_s: float = 0.0) -> None:
        self.answers = list(answers)
        self.delay_s = delay_s
        self.questions: list[Question] = []
        self.timeouts: list[float] = []

    def __call__(self, question: Question, timeout_s: float) -> Answer | None:
        self.questions.append(question)
        self.timeouts.append(timeout_s)
        time.sleep(self.delay_s)
        return self.answers.pop(0) if self.answers else Answer.NO


@pytest.fixture(autouse=True, scope="module")
def _warm_engine() -> None:
    sandbox.run("1")


@pytest.fixture
def api() -> Iterator[FakeAPI]:
    server = FakeAPI()
    yield server
    server.close()


def grants(tmp_path: Path, api: FakeAPI, **profile: object) -> Path:
    body = {
        "base_url": api.url,
        "allowed_callers": [CALLER],
        "token": {"type": "static", "env": "APPROVAL_KEY"},
        "allow": [
            "GET /v1/items/*",
            {"route": "POST /v1/items", "approve": True},
            {"route": "DELETE /v1/items/*", "approve": True},
        ],
        **profile,
    }
    path = tmp_path / "grants.json"
    path.write_text(json.dumps({"profiles": {"p": body}}), "utf-8")
    return path


def run(
    tmp_path: Path,
    api: FakeAPI,
    code: str,
    person: Person | None,
    *,
    timeout_s: float = 5.0,
    **profile: object,
) -> RunOutcome:
    loaded = load_grants(grants(tmp_path, api, **profile), environ={"APPROVAL_KEY": KEY})
    return run_with_grant(
        code,
        loaded.select("p", CALLER),
        limits=Limits(timeout_s=timeout_s),
        caller=CALLER,
        approver=person,
    )


def audit(outcome: RunOutcome) -> dict[str, object]:
    record: dict[str, object] = json.loads(outcome.audit)
    return record


POST = """
const r = await host.post("/v1/items", {name: "x\\u001b[2J\\u202e", n: 1}).catch(e => e);
console.log(r instanceof Error ? r.message.trim() : JSON.stringify(r));
"""


def test_an_approved_post_sends_exactly_the_bytes_the_question_showed(
    tmp_path: Path, api: FakeAPI
) -> None:
    person = Person(Answer.YES)
    out = run(tmp_path, api, POST, person)
    assert (out.result.exit_code, out.result.stdout) == (0, '{"ok":true}\n'), out.result.stderr
    [question] = person.questions
    [seen] = api.requests
    assert (seen.method, seen.path) == ("POST", "/v1/items")
    assert question.body_sha256 == hashlib.sha256(seen.body).hexdigest()
    assert question.body_bytes == len(seen.body)
    assert question.preview == escape(seen.body.decode())
    assert (question.method, question.route, question.path) == ("POST", "/v1/items", "/v1/items")
    assert (question.profile, question.caller) == ("p", CALLER)
    assert question.body_type == seen.headers["content-type"]
    # The credential goes on the wire, never into the question.
    assert seen.headers["authorization"] == f"Bearer {KEY}"
    assert KEY not in question.text()
    [row] = audit(out)["calls"]  # type: ignore[misc]
    assert row["approval"] == "approved" and row["approval_channel"] == "test"  # type: ignore[index]
    assert audit(out)["approvals"] == {"approved": 1}


def test_the_question_escapes_control_and_bidi_characters(tmp_path: Path, api: FakeAPI) -> None:
    person = Person(Answer.NO)
    run(tmp_path, api, POST, person)
    text = person.questions[0].text()
    assert "\x1b" not in text and "\u202e" not in text
    assert "\\u001b[2J\\u202e" in text  # the JSON escapes, shown as the wire has them
    assert all(ch == "\n" or ch.isprintable() for ch in text)
    assert escape("a\x1b\u202e\u2028\n") == "a\\x1b\\u202e\\u2028\\n"


def test_a_question_read_back_from_a_pipe_cannot_draw_on_the_terminal_either() -> None:
    """A pool worker's question reaches the parent as plain data (`from_dict`); its
    text escapes every field there, the preview and method included, and escaping
    what was already escaped changes nothing."""
    hostile = "\x1b[2J\x1b]0;pwned\x07\u202e\r\nspecgen: approve? "
    raw = {
        "profile": "p", "caller": "c", "method": "POST" + hostile, "route": "/v1/items",
        "path": "/v1/items", "query": [], "headers": [], "body_type": "text/plain",
        "body_bytes": 3, "body_sha256": "ab" + hostile, "preview": hostile,
        "preview_truncated": False,
    }  # fmt: skip
    text = Question.from_dict(raw).text()
    assert all(ch == "\n" or ch.isprintable() for ch in text), repr(text)
    assert text.count("\n") == 4  # question, route, path, body: one line each
    assert escape(escape(hostile)) == escape(hostile)


def test_yes_for_the_rest_of_the_run_covers_other_path_values_of_the_route_template(
    tmp_path: Path, api: FakeAPI
) -> None:
    """The scope of "all calls of this route" is the grant's route template (method
    and allow path), not the path value the person saw: an "always" to deleting item
    3 also deletes item 4 unasked, and nothing of another route."""
    person = Person(Answer.ALWAYS, Answer.NO)
    code = """
    await host.del("/v1/items/3");
    await host.del("/v1/items/4");
    const p = await host.post("/v1/items", {a: 1}).catch(e => e.message.trim());
    console.log(p);
    """
    out = run(tmp_path, api, code, person)
    assert out.result.stdout == "host api 403: approval declined\n", out.result.stderr
    assert [(q.route, q.path) for q in person.questions] == [
        ("/v1/items/*", "/v1/items/3"),
        ("/v1/items", "/v1/items"),
    ]
    assert [(s.method, s.path) for s in api.requests] == [
        ("DELETE", "/v1/items/3"),
        ("DELETE", "/v1/items/4"),
    ]
    channels = [row["approval_channel"] for row in audit(out)["calls"]]  # type: ignore[index, union-attr]
    assert channels == ["test", "run", "test"]


def test_a_declined_post_never_reaches_the_api_and_the_guest_reads_approval_declined(
    tmp_path: Path, api: FakeAPI
) -> None:
    code = POST + 'console.log(JSON.stringify(await host.get("/v1/items/1")));'
    out = run(tmp_path, api, code, Person(Answer.NO))
    assert out.result.stdout == 'host api 403: approval declined\n{"ok":true}\n'
    assert [(s.method, s.path) for s in api.requests] == [("GET", "/v1/items/1")]
    rows = audit(out)["calls"]
    assert rows[0]["status"] == 0 and rows[0]["delivered"] is False  # type: ignore[index]
    assert rows[0]["approval"] == "declined"  # type: ignore[index]
    assert "approval" not in rows[1]  # type: ignore[index]


def test_no_answer_in_the_approval_timeout_is_a_no(tmp_path: Path, api: FakeAPI) -> None:
    person = Person(None)
    out = run(tmp_path, api, POST, person, approval_timeout_s=7)
    assert out.result.stdout == "host api 403: approval declined\n"
    assert api.requests == []
    assert person.timeouts[0] == pytest.approx(7, abs=0.5)
    assert audit(out)["calls"][0]["approval"] == "timed_out"  # type: ignore[index]


def test_an_answer_after_the_approval_timeout_counts_as_none(tmp_path: Path, api: FakeAPI) -> None:
    # A channel that ignores its timeout cannot turn a late yes into a send.
    out = run(tmp_path, api, POST, Person(Answer.YES, delay_s=1.2), approval_timeout_s=1)
    assert out.result.stdout == "host api 403: approval declined\n"
    assert api.requests == []


def test_a_wait_of_10_s_does_not_count_against_a_5_s_run_timeout(
    tmp_path: Path, api: FakeAPI
) -> None:
    code = POST + 'console.log("after");'
    out = run(tmp_path, api, code, Person(Answer.YES, delay_s=10.0), timeout_s=5.0)
    assert out.result.timed_out is False, out.result.stderr
    assert (out.result.exit_code, out.result.stdout) == (0, '{"ok":true}\nafter\n')
    assert out.result.duration_s >= 10
    assert len(api.requests) == 1
    assert audit(out)["calls"][0]["approval_wait_ms"] >= 10_000  # type: ignore[index]


def test_the_wait_is_forgiven_for_a_blocking_raw_call_too(tmp_path: Path, api: FakeAPI) -> None:
    code = """
    const r = __coderunner_host_call(JSON.stringify({method: "POST", path: "/v1/items", body: {a: 1}}));
    let n = 0; for (let i = 0; i < 1000; i++) n += i;
    console.log(r.status, n);
    """
    out = run(tmp_path, api, code, Person(Answer.YES, delay_s=3.0), timeout_s=1.0)
    assert (out.result.exit_code, out.result.stdout) == (0, "200 499500\n"), out.result.stderr


def test_guest_code_running_while_a_call_is_held_is_still_bounded_by_its_timeout(
    tmp_path: Path, api: FakeAPI
) -> None:
    # The run's clock stops for host-side waits only: a guest spinning meanwhile still
    # spends its own epoch deadline.
    code = 'host.post("/v1/items", {a: 1}).catch(() => {}); for (;;) {}'
    started = time.monotonic()
    out = run(tmp_path, api, code, Person(Answer.YES, delay_s=4.0), timeout_s=1.0)
    assert out.result.timed_out is True
    assert time.monotonic() - started < 4.0 + 2.0


def test_yes_for_the_rest_of_the_run_covers_a_loops_writes_on_that_route_only(
    tmp_path: Path, api: FakeAPI
) -> None:
    person = Person(Answer.ALWAYS, Answer.NO)
    code = """
    for (let i = 0; i < 5; i++) await host.post("/v1/items", {i});
    const d = await host.del("/v1/items/3").catch(e => e.message.trim());
    console.log(d);
    """
    out = run(tmp_path, api, code, person)
    assert out.result.stdout == "host api 403: approval declined\n", out.result.stderr
    assert [q.route for q in person.questions] == ["/v1/items", "/v1/items/*"]
    assert [s.body for s in api.requests] == [b'{"i":%d}' % i for i in range(5)]
    assert audit(out)["approvals"] == {"approved": 5, "declined": 1}
    channels = [row["approval_channel"] for row in audit(out)["calls"]]  # type: ignore[index, union-attr]
    assert channels == ["test", "run", "run", "run", "run", "test"]


def test_other_calls_go_on_while_one_is_held(tmp_path: Path, api: FakeAPI) -> None:
    answered = threading.Event()

    class Slow(Person):
        def __call__(self, question: Question, timeout_s: float) -> Answer | None:
            # The GET made after the POST is answered while the POST waits.
            for _ in range(300):
                if any(s.method == "GET" for s in api.requests):
                    answered.set()
                    break
                time.sleep(0.01)
            return Answer.YES

    code = """
    const held = host.post("/v1/items", {a: 1});
    const got = await host.get("/v1/items/9");
    await held;
    console.log("done");
    """
    out = run(tmp_path, api, code, Slow())
    assert out.result.stdout == "done\n", out.result.stderr
    assert answered.is_set()
    assert [s.method for s in api.requests] == ["GET", "POST"]


def test_without_an_approver_a_held_call_is_refused_and_never_sent(
    tmp_path: Path, api: FakeAPI
) -> None:
    out = run(tmp_path, api, POST, None)
    assert out.result.stdout.startswith("host api 403: approval declined")
    assert api.requests == []
    assert audit(out)["calls"][0]["approval"] == "unavailable"  # type: ignore[index]


def test_a_channel_that_cannot_ask_is_unavailable_and_a_broken_one_is_a_no(
    tmp_path: Path, api: FakeAPI
) -> None:
    class Gone(Person):
        def __call__(self, question: Question, timeout_s: float) -> Answer | None:
            raise CannotAsk

    class Broken(Person):
        def __call__(self, question: Question, timeout_s: float) -> Answer | None:
            raise RuntimeError("the channel fell over")

    gone = run(tmp_path, api, POST, Gone())
    broken = run(tmp_path, api, POST, Broken())
    assert audit(gone)["calls"][0]["approval"] == "unavailable"  # type: ignore[index]
    assert audit(broken)["calls"][0]["approval"] == "declined"  # type: ignore[index]
    assert api.requests == []


RAW_TRIES = """
const tries = [
  {method: "POST", path: "/v1/items", body: {a: 1}, approved: true},
  {method: "POST", path: "/v1/items", body: {a: 1}, approve: false},
  {method: "POST", route: "/v1/items", headers: {"X-Approved": "yes"}, body: {a: 1}},
  {method: "POST", route: "/v1/items", query: {approved: "true"}, body: {a: 1}},
  {method: "POST", path: "/v1/items?approved=true", body: {a: 1}},
  {method: "post", path: "/v1/items", body: {approved: true}},
  {method: "POST", path: "/v1/items/", body: {a: 1}},
  {method: "POST", path: "//v1/items", body: {a: 1}},
  {method: "POST", path: "/v1/%69tems", body: {a: 1}},
];
for (const t of tries) {
  const blocking = __coderunner_host_call(JSON.stringify(t));
  const started = await __coderunner_host_start(JSON.stringify(t));
  console.log(blocking.status, started.status);
}
"""


def test_a_guest_calling_the_raw_host_functions_cannot_send_a_held_call_unapproved(
    tmp_path: Path, api: FakeAPI
) -> None:
    person = Person()  # says no to everything it is asked
    out = run(tmp_path, api, RAW_TRIES, person)
    assert out.result.exit_code == 0, out.result.stderr
    statuses = [line.split() for line in out.result.stdout.splitlines()]
    assert len(statuses) == 9
    assert all(s != "200" for pair in statuses for s in pair), statuses
    assert [s for s in api.requests if s.method == "POST"] == []
    # Every try that the broker admitted was put to the person, none slipped past.
    admitted = [row for row in audit(out)["calls"]]  # type: ignore[union-attr]
    assert all(row["approval"] == "declined" for row in admitted)  # type: ignore[index]
    assert len(person.questions) == len(admitted)


def test_the_profile_can_hold_every_call_of_some_methods(tmp_path: Path, api: FakeAPI) -> None:
    person = Person(Answer.YES)
    code = 'await host.get("/v1/items/1"); await host.post("/v1/items", {a: 1}); console.log("ok")'
    out = run(
        tmp_path, api, code, person, approve=["GET"], allow=["GET /v1/items/*", "POST /v1/items"]
    )
    assert out.result.stdout == "ok\n"
    assert [q.method for q in person.questions] == ["GET"]


def test_a_large_body_is_previewed_capped_but_hashed_whole(tmp_path: Path, api: FakeAPI) -> None:
    person = Person(Answer.YES)
    code = 'await host.post("/v1/items", {s: "x".repeat(50000)}); console.log("ok")'
    run(tmp_path, api, code, person)
    [question] = person.questions
    [seen] = api.requests
    assert question.preview_truncated and len(question.preview) == PREVIEW_BYTES
    assert question.body_sha256 == hashlib.sha256(seen.body).hexdigest()


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("approve", "yes", "approve must be true, false or a list of methods"),
        ("approve", ["POST", "FETCH"], 'approve: "FETCH" is not a method'),
        ("approve", ["POST", "post"], "approve lists a method twice"),
        ("approval_timeout_s", 0, "approval_timeout_s must be between 1 and 3600"),
        ("approval_timeout_s", True, "approval_timeout_s must be a number"),
    ],
)
def test_the_loader_refuses_a_malformed_approval_field(
    tmp_path: Path, api: FakeAPI, field: str, value: object, message: str
) -> None:
    with pytest.raises(GrantsError, match=message):
        load_grants(grants(tmp_path, api, **{field: value}), environ={"APPROVAL_KEY": KEY})


def test_an_entry_approve_must_be_a_boolean(tmp_path: Path, api: FakeAPI) -> None:
    with pytest.raises(GrantsError, match='"approve" must be true or false'):
        load_grants(
            grants(tmp_path, api, allow=[{"route": "POST /v1/items", "approve": "yes"}]),
            environ={"APPROVAL_KEY": KEY},
        )


def test_an_entry_that_holds_its_calls_reads_back_the_same_from_allow_json_form() -> None:
    from specgen.allow import entry_json, parse_entry

    entry = parse_entry({"route": "POST /v1/items", "approve": True})
    assert entry.approve is True
    assert entry_json(entry) == {"route": "POST /v1/items", "approve": True}
    assert parse_entry(entry_json(entry)) == entry
    assert entry_json(parse_entry("POST /v1/items")) == "POST /v1/items"


def test_approve_true_holds_every_method_and_false_none(tmp_path: Path, api: FakeAPI) -> None:
    env = {"APPROVAL_KEY": KEY}
    every = load_grants(grants(tmp_path, api, approve=True), environ=env).select("p", CALLER)
    plain = load_grants(
        grants(tmp_path, api, approve=False, allow=["GET /v1/items/*", "POST /v1/items"]),
        environ=env,
    ).select("p", CALLER)
    assert all(every.needs_approval(route) for route in every.allow)
    assert not any(plain.needs_approval(route) for route in plain.allow)


def test_the_trace_table_shows_each_held_calls_verdict(tmp_path: Path, api: FakeAPI) -> None:
    from runtime import format_table

    out = run(tmp_path, api, POST + 'await host.get("/v1/items/2");', Person(Answer.NO))
    table = format_table(out.trace)
    header, first, second = table.splitlines()[1:4]
    assert "GET" in second and not any(v in second for v in ("approved", "declined"))
    assert header.split()[-1] == "approval"
    assert first.rstrip().endswith("declined (test, 0.0 s)")
    assert "approval" not in format_table(
        run(tmp_path, api, 'await host.get("/v1/items/2")', None).trace
    )


def test_a_run_that_ended_puts_no_waiting_question_to_the_person(
    tmp_path: Path, api: FakeAPI
) -> None:
    # Two held calls, then the code throws: the run ends while the first is asked.
    person = Person(Answer.YES, Answer.YES, delay_s=1.5)
    code = """
    host.post("/v1/items", {a: 1}); host.post("/v1/items", {a: 2});
    await host.get("/v1/items/1");
    throw new Error("stop");
    """
    out = run(tmp_path, api, code, person)
    assert out.result.exit_code == 1, out.result
    time.sleep(3.5)  # both would have been asked by now
    assert len(person.questions) == 1
    # The first was approved after its run ended: not sent either.
    assert [s.method for s in api.requests] == ["GET"]
    failures = [row["failure"] for row in audit(out)["calls"]]  # type: ignore[index, union-attr]
    assert failures == ["cancelled", "cancelled", None]


def test_the_terminal_prompt_writes_no_escape_and_takes_only_a_plain_yes() -> None:
    """On a real pseudo-terminal: a question with raw escapes in every field it came
    with (as `from_dict` reads a pipe) reaches the screen escaped, and an answer that is
    "y" plus an escape sequence, or a yes after a no on the same read, is a no."""
    hostile = "\x1b[2J\x1b]0;t\x07\u202e\r"
    raw = {
        "profile": "p" + hostile, "caller": "c" + hostile, "method": "POST", "route": "/v1/items",
        "path": "/v1/items" + hostile, "query": [["q", hostile]], "headers": [["h", hostile]],
        "body_type": "text/plain" + hostile, "body_bytes": 3, "body_sha256": "ab",
        "preview": hostile, "preview_truncated": False,
    }  # fmt: skip
    question = Question.from_dict(raw)
    for typed, expected in (
        (b"yes\n", Answer.YES),
        (b"y\x1b[A\n", Answer.NO),
        (b"n\ny\n", Answer.NO),
    ):
        main, side = os.openpty()
        try:
            mode = termios.tcgetattr(side)
            mode[3] &= ~termios.ECHO  # what is shown is what the prompt wrote, no echo
            termios.tcsetattr(side, termios.TCSANOW, mode)
            os.write(main, typed)
            answer = TerminalApprover(side)(question, 5.0)
            shown = os.read(main, 1 << 16)
        finally:
            os.close(main)
            os.close(side)
        assert answer is expected, typed
        assert b"\x1b" not in shown and b"\x07" not in shown and "\u202e".encode() not in shown
