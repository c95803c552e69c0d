"""Quotas that span runs: counted across brokers, processes and replicas, in SQLite and
in a real `redis-server`, refused with 429 and the seconds to wait, and fail closed.

Every call goes to an httpx.MockTransport that counts what reached "the API", so a
test asserts what was sent, not what the broker says it sent.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from runtime import Broker, GrantsError, HostRequest, Profile, Secret, audit_line, load_grants
from runtime.broker import quotas
from runtime.broker.quotas import Quota, SqliteStore
from specgen.routes import Route
from tests.conftest import missing

REPO = Path(__file__).resolve().parents[2]
ITEMS = Route("/items/*", "GET")
NOTES = Route("/notes", "POST")


class Counting:
    """A transport that answers 200 and counts the requests that reached it."""

    def __init__(self) -> None:
        self.sent: list[str] = []
        self._lock = threading.Lock()

    def __call__(self, request: httpx.Request) -> httpx.Response:
        with self._lock:
            self.sent.append(request.url.path)
        return httpx.Response(200, json={"ok": True})


def _profile(*limits: Quota, name: str = "q") -> Profile:
    return Profile(
        name=name,
        base_url="https://api.example.test",
        global_name="api",
        allowed_callers=("*",),
        allow=(ITEMS, NOTES),
        token=Secret("quota-key"),
        quotas=limits,
    )


def _calls(profile: Profile, store: quotas.QuotaStore, n: int, caller: str = "alice"):
    api = Counting()
    replies = []
    with Broker(
        profile, transport=httpx.MockTransport(api), caller=caller, quota_store=store
    ) as broker:
        for i in range(n):
            replies.append(broker(HostRequest("GET", f"/items/{i}", None)))
        trace = broker.trace.snapshot()
    return api, replies, trace


def test_a_quota_lets_exactly_its_calls_through_across_runs(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "q.sqlite3")
    profile = _profile(Quota(5, "minute"))
    api1, replies1, _ = _calls(profile, store, 3)
    api2, replies2, trace2 = _calls(profile, store, 4)  # a second run, a new broker
    assert len(api1.sent) + len(api2.sent) == 5
    refused = [r for r in replies1 + replies2 if r.status != 200]
    assert len(refused) == 2
    for reply in refused:
        assert reply.status == 429
        text = reply.body.decode()
        assert "quota reached" in text and "5 per minute by profile" in text
        assert "retry after" in text
    assert trace2.denied == 2
    assert [r.rule for r in trace2.refused] == ["quota", "quota"]


def _quota_record(trace) -> list[dict[str, object]]:  # type: ignore[no-untyped-def]
    """The audit line's quota state, as a reader of the line gets it."""
    return json.loads(audit_line("q", trace))["quotas"]


def test_the_audit_line_says_what_each_quota_took_refused_and_has_left(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "q.sqlite3")
    profile = _profile(Quota(5, "hour"), Quota(100, "day", "caller"))
    _, _, first = _calls(profile, store, 3)
    _, _, second = _calls(profile, store, 4)  # a second run: 2 left in the hour, then none
    assert _quota_record(first) == [
        {"quota": "100 per day by caller", "taken": 3, "refused": 0, "left": 97},
        {"quota": "5 per hour by profile", "taken": 3, "refused": 0, "left": 2},
    ]
    assert _quota_record(second) == [
        {"quota": "100 per day by caller", "taken": 2, "refused": 0, "left": 95},
        {"quota": "5 per hour by profile", "taken": 2, "refused": 2, "left": 0},
    ]
    no_quotas = json.loads(audit_line("q", _calls(_profile(), store, 1)[2]))
    assert "quotas" not in no_quotas  # a profile without quotas keeps the line it had


def test_by_caller_gives_each_caller_its_own_count(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "q.sqlite3")
    profile = _profile(Quota(2, "hour", "caller"))
    a, _, _ = _calls(profile, store, 3, caller="alice")
    b, _, _ = _calls(profile, store, 3, caller="bob")
    again, _, _ = _calls(profile, store, 1, caller="alice")
    assert (len(a.sent), len(b.sent), len(again.sent)) == (2, 2, 0)


def test_a_route_quota_counts_only_its_route(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "q.sqlite3")
    profile = _profile(Quota(1, "day", "profile", NOTES))
    api, _, _ = _calls(profile, store, 3)  # GET /items/*: not the quota's route
    assert len(api.sent) == 3
    with Broker(profile, transport=httpx.MockTransport(api), quota_store=store) as broker:
        first = broker(HostRequest("POST", "/notes", b"{}"))
        second = broker(HostRequest("POST", "/notes", b"{}"))
    assert (first.status, second.status) == (200, 429)
    assert "POST /notes" in second.body.decode()


def test_a_call_one_limit_refuses_uses_no_other_limits_room(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "q.sqlite3")
    tight, loose = Quota(1, "minute"), Quota(3, "hour")
    profile = _profile(tight, loose)
    clock = [1_000_000.0]
    for _ in range(3):  # one call taken, two refused by the minute limit
        quotas.take(store, profile.quotas, "q", "alice", ITEMS, clock=lambda: clock[0])
    clock[0] += 60
    results = [
        quotas.take(store, profile.quotas, "q", "alice", ITEMS, clock=lambda: clock[0]).ok
        for _ in range(2)
    ]
    # The hour limit had 2 units left, not 0: the refused calls took none of it.
    assert results == [True, False]


def test_the_window_rolls_over_on_the_clock_and_says_how_long_to_wait(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "q.sqlite3")
    limit = (Quota(2, "minute"),)
    now = [6_000_000.0 + 45.5]  # 45.5 s into a minute
    took = [quotas.take(store, limit, "q", "c", ITEMS, clock=lambda: now[0]) for _ in range(3)]
    assert [t.ok for t in took] == [True, True, False]
    assert took[2].retry_after_s == 15  # 14.5 s to the window's end, rounded up
    now[0] += 15
    assert quotas.take(store, limit, "q", "c", ITEMS, clock=lambda: now[0]).ok


_WORKER = """
import sys, httpx
sys.path.insert(0, {root!r})
from runtime import Broker, HostRequest, Profile, Secret
from runtime.broker import quotas
from runtime.broker.quotas import Quota
from specgen.routes import Route
sent = []
profile = Profile(name="q", base_url="https://api.example.test", global_name="api",
    allowed_callers=("*",), allow=(Route("/items/*", "GET"),), token=Secret("k"),
    quotas=(Quota(20, "minute"),))
def answer(request):
    sent.append(1)
    return httpx.Response(200, json={{}})
store = quotas.open_store({url!r})
with Broker(profile, transport=httpx.MockTransport(answer), caller="a", quota_store=store) as b:
    statuses = [b(HostRequest("GET", f"/items/{{i}}", None)).status for i in range(20)]
print(len(sent), statuses.count(429), *sorted(set(statuses) - {{200, 429}}))
"""


def _in_processes(url: str, n: int = 2) -> list[tuple[int, int]]:
    script = _WORKER.format(root=str(REPO), url=url)
    procs = [
        subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
        for _ in range(n)
    ]
    out = []
    for proc in procs:
        stdout, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0
        sent, refused, *other = (int(x) for x in stdout.split())
        assert other == [], f"statuses other than 200 and 429: {other}"
        out.append((sent, refused))
    return out


def test_sqlite_counts_across_processes_of_one_machine(tmp_path: Path) -> None:
    results = _in_processes(f"sqlite://{tmp_path / 'shared.sqlite3'}")
    assert sum(sent for sent, _ in results) == 20  # 40 calls, one quota of 20
    assert sum(refused for _, refused in results) == 20


def test_an_unwritable_sqlite_store_refuses_the_calls(tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    store = SqliteStore(blocked / "q.sqlite3")
    api, replies, trace = _calls(_profile(Quota(5, "hour")), store, 2)
    assert api.sent == []
    assert {r.status for r in replies} == {503}
    assert "quota store unavailable" in replies[0].body.decode()
    assert [r.rule for r in trace.refused] == ["quota_store_down"] * 2


def test_a_profile_without_quotas_never_opens_a_store(tmp_path: Path) -> None:
    class Exploding:
        def take(self, keys):  # type: ignore[no-untyped-def]
            raise AssertionError("the store was asked")

    api, _, _ = _calls(_profile(), Exploding(), 3)  # type: ignore[arg-type]
    assert len(api.sent) == 3


# -- the grant field -----------------------------------------------------------------


def _grants(tmp_path: Path, quota: object) -> Path:
    path = tmp_path / "grants.json"
    profile = {
        "base_url": "https://api.example.test",
        "allowed_callers": ["alice"],
        "allow": ["GET /items/*", "POST /notes"],
        "quotas": quota,
    }
    path.write_text(json.dumps({"profiles": {"q": profile}}))
    return path


def test_the_grant_field_loads_into_limits(tmp_path: Path) -> None:
    raw = [
        {"calls": 20, "per": "minute"},
        {"calls": 100, "per": "day", "by": "caller", "route": "POST /notes"},
    ]
    profile = load_grants(_grants(tmp_path, raw)).select("q", "alice")
    assert profile.quotas == (Quota(20, "minute"), Quota(100, "day", "caller", NOTES))


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        ({"calls": 1, "per": "minute"}, "quotas must be a list"),
        ([{"calls": 0, "per": "minute"}], "calls must be between 1"),
        ([{"calls": True, "per": "minute"}], "calls must be a whole number"),
        ([{"calls": 5, "per": "week"}], "per must be one of minute, hour, day"),
        ([{"calls": 5, "per": "hour", "by": "ip"}], "by must be one of profile, caller"),
        ([{"calls": 5, "per": "hour", "route": "GET /other"}], "is not an entry of allow"),
        ([{"calls": 5, "per": "hour", "burst": 2}], 'unknown field "burst"'),
        ([{"calls": 5, "per": "hour"}, {"calls": 5, "per": "hour"}], "repeats an earlier"),
    ],
)
def test_a_bad_quota_is_one_line_naming_it(tmp_path: Path, raw: object, says: str) -> None:
    with pytest.raises(GrantsError) as caught:
        load_grants(_grants(tmp_path, raw))
    line = str(caught.value)
    assert says in line and "\n" not in line


def test_a_bad_store_url_is_refused_before_anything_runs(tmp_path: Path) -> None:
    (tmp_path / "code.js").write_text("print(1)")
    env = dict(os.environ)
    proc = subprocess.run(
        [
            str(Path(sys.executable).parent / "specgen"),
            "run",
            str(tmp_path / "code.js"),
            "--grants",
            str(_grants(tmp_path, [{"calls": 1, "per": "minute"}])),
            "--profile",
            "q",
            "--caller",
            "alice",
            "--quota-store",
            "memcached://127.0.0.1:11211",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert proc.returncode != 0
    assert proc.stderr.count("\n") == 1 and "--quota-store" in proc.stderr
    assert "Traceback" not in proc.stderr


# -- Redis: a real redis-server on a loopback port ------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def redis_url(tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    server = shutil.which("redis-server")
    if server is None:
        missing("redis-server", "apt-get install redis-server")
    port = _free_port()
    proc = subprocess.Popen(
        [server, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}/0"
    deadline = time.monotonic() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                pytest.fail("redis-server did not start")
            time.sleep(0.05)
    yield url, proc
    proc.kill()
    proc.wait()


def test_redis_counts_across_processes(redis_url: tuple[str, subprocess.Popen[bytes]]) -> None:
    url, _ = redis_url
    results = _in_processes(url)
    assert sum(sent for sent, _ in results) == 20
    assert sum(refused for _, refused in results) == 20


def test_redis_gives_the_same_quota_state_as_sqlite(
    redis_url: tuple[str, subprocess.Popen[bytes]],
) -> None:
    url, _ = redis_url
    profile = _profile(Quota(5, "hour"), Quota(100, "day", "caller"))
    store = quotas.open_store(url)
    _calls(profile, store, 3)
    _, _, trace = _calls(profile, store, 4)
    assert _quota_record(trace) == [
        {"quota": "100 per day by caller", "taken": 2, "refused": 0, "left": 95},
        {"quota": "5 per hour by profile", "taken": 2, "refused": 2, "left": 0},
    ]


def test_redis_counters_expire_with_their_window(
    redis_url: tuple[str, subprocess.Popen[bytes]],
) -> None:
    import redis

    url, _ = redis_url
    store = quotas.RedisStore(url)
    assert quotas.take(store, (Quota(1, "minute"),), "q", "c", ITEMS).ok
    (key,) = redis.Redis.from_url(url).keys("plimsoll-quota*")
    ttl = redis.Redis.from_url(url).ttl(key)
    assert 0 < ttl <= 65
    assert b"c" not in key.split(b"\x1f")  # a by-profile counter names no caller


def test_redis_down_refuses_every_call_and_sends_none(
    redis_url: tuple[str, subprocess.Popen[bytes]],
) -> None:
    url, proc = redis_url
    store = quotas.RedisStore(url)
    profile = _profile(Quota(100, "minute"))
    api, replies, _ = _calls(profile, store, 2)
    assert len(api.sent) == 2
    proc.kill()
    proc.wait()
    api, replies, trace = _calls(profile, store, 2)
    assert api.sent == []
    assert {r.status for r in replies} == {503}
    assert [r.rule for r in trace.refused] == ["quota_store_down"] * 2
    assert "127.0.0.1" not in replies[0].body.decode()


# -- two `specgen mcp --http` replicas sharing one redis-server ------------------------

_RECALL = """
var A = "00000000000000000000000000000042", NS = "support-agent", ME = "customer-42";
async function main() {
  var seen = [];
  for (var i = 0; i < 4; i++) {
    try { await memory.agent_memory_recall(A, NS, ME, {query: "q" + i}); seen.push(200); }
    catch (e) { seen.push(String(e.message).slice(0, 80)); }
  }
  console.log(JSON.stringify(seen));
}
main();
"""


def test_two_replicas_sharing_redis_let_exactly_the_quota_through(
    tmp_path: Path, redis_url: tuple[str, subprocess.Popen[bytes]]
) -> None:
    """The done-when case: a quota of 20 calls per minute on a profile, two `specgen mcp
    --http` replicas (real processes, bearer tokens, the official SDK client) sharing one
    redis-server, 40 calls sent alternately through both: exactly 20 reach the API."""
    import anyio

    from examples.memory_grant.fake import FakeAgentMemory
    from examples.memory_grant.runner import GRANTS, PROFILE, TOKEN
    from tests.runtime import test_mcp_auth as mcp_auth

    url, _ = redis_url
    grants = json.loads(GRANTS.read_text())
    grants["profiles"][PROFILE]["quotas"] = [{"calls": 20, "per": "minute"}]
    (tmp_path / "grants.json").write_text(json.dumps(grants))
    shutil.copy(GRANTS.parent / "preamble.js", tmp_path / "preamble.js")
    # Forty calls take a few seconds; a minute boundary in between would open a new window.
    if time.time() % 60 > 40:
        time.sleep(61 - time.time() % 60)
    with FakeAgentMemory(TOKEN) as fake:
        servers = [
            mcp_auth.auth_server(
                fake,
                tmp_path,
                tmp_path / f"audit-{n}.jsonl",
                "127.0.0.1:0",
                "--quota-store",
                url,
                grants=tmp_path / "grants.json",
            )
            for n in range(2)
        ]
        with servers[0] as first, servers[1] as second:
            outputs = []
            for i in range(10):
                result = anyio.run(
                    mcp_auth._call,
                    (first, second)[i % 2],
                    mcp_auth.ALLOWED_TOKEN,
                    "execute",
                    {"code": _RECALL},
                )
                outputs.append(mcp_auth._text(result))
        recalls = [r for r in fake.requests if r.path.endswith("/recall")]
    assert len(recalls) == 20, outputs
    answers = [json.loads(out) for out in outputs]
    seen = [s for a in answers for s in json.loads(a["stdout"])]
    refused = [s for s in seen if s != 200 and s.startswith("host api 429: host api quota")]
    assert len(seen) == 40 and len(refused) == 20, seen
    assert all("20 per minute by profile" in s for s in refused)
    assert sum(a["denied"] for a in answers) == 20
    # Both replicas refused some: the count is shared, not kept in each process.
    assert all(a["denied"] for a in answers[-2:])
