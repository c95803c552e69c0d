"""The wall between agent code and the key, tried from the wrong side.

Each isolated tier's engine process is started with the test-only escape hook, which
runs Python source inside it: a stand-in for an escape from QuickJS and wasmtime
(arbitrary native code in that process; Python there has ctypes). From there, and
from outside (its process tree's memory, read as root), the tests check what the wall
must hold: the key's bytes are in none of its memory, environment, files or descriptors; it
cannot connect to the loopback fake or resolve a name; it cannot read the grants file
or write outside its scratch space; killing it mid-run leaves the run's audit line in
the broker with every call already admitted; a malformed frame ends the run the same
way. The `process` tier gets the same probes run in this process (where its engine
runs) and they show the opposite, so docs/security.md cannot claim more for it.

No tier is skipped: a machine without bwrap or runsc fails these tests (under CI,
.ci/run installs both).
"""

from __future__ import annotations

import errno
import json
import os
import secrets
import shutil
import signal
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from runtime import EXIT_INTERNAL, Limits, load_grants
from runtime.tiers import wire
from runtime.tiers.boundary import ENGINE_DIED, ENGINE_PROTOCOL, EngineProcess, run_isolated
from tests.runtime.loopback import FakeAPI
from tests.runtime.test_run_cli import KEY, MINE, grants_file
from tests.runtime.wall import memory_count, process_tree

CALLER = "support-agent"
#: The probes' own copy of the key: XOR-masked, so sending a probe puts no key byte in
#: the engine process before the memory has been looked at; the probe unmasks it.
MASK = secrets.token_bytes(len(KEY))
MASKED = bytes(a ^ b for a, b in zip(KEY.encode(), MASK, strict=True))


@dataclass
class Walled:
    tier: str
    engine: EngineProcess
    api: FakeAPI
    grants: Path
    profile: Any
    marker: str


def escape(engine: EngineProcess, source: str) -> Any:
    """Run `source` inside the engine process; what it left in `result`."""
    engine.send({"t": "escape", "source": source})
    frame, _ = engine.read(time.monotonic() + 120)
    assert frame["t"] == "escaped", frame
    return frame["result"]


def _visible_grants_file() -> Path:
    """A grants file inside a folder every engine process sees (the venv), so covering
    it is what hides it, not its being elsewhere."""
    folder = Path(sys.prefix) / f"plimsoll-wall-{secrets.token_hex(4)}"
    folder.mkdir()
    return grants_file(folder)


@pytest.fixture(scope="module", params=["worker", "gvisor"])
def walled(request: pytest.FixtureRequest) -> Iterator[Walled]:
    mp = pytest.MonkeyPatch()
    mp.setenv("CLOUDFLARE_API_TOKEN", KEY)
    api = FakeAPI()
    grants = _visible_grants_file()
    engine: EngineProcess | None = None
    try:
        profile = load_grants(grants).select("agent-memory", CALLER).with_base_url(api.url)
        engine = EngineProcess(request.param, hidden=[grants], escape_hook=True)
        marker = f"wall-marker-{secrets.token_hex(8)}"
        # A run whose call the broker sends with the key attached, so the key has been
        # used by this run when the engine process is searched.
        code = f'const m = "{marker}"; await memory.post("{MINE}/recall", {{query: m}}); print(m);'
        outcome = run_isolated(engine, code, profile, caller=CALLER)
        assert outcome.result.exit_code == 0, outcome.result.stderr
        assert api.requests[-1].headers["authorization"] == f"Bearer {KEY}"
        yield Walled(request.param, engine, api, grants, profile, marker)
    finally:  # the planted folder goes even when setting up failed
        if engine is not None:
            engine.close()
        api.close()
        shutil.rmtree(grants.parent)
        mp.undo()


PROBE_SECRETS = """
import os, sys
key = bytes(a ^ b for a, b in zip(bytes.fromhex(MASKED), bytes.fromhex(MASK)))
found = []
if key in b"\\0".join(k.encode() + b"=" + v.encode() for k, v in os.environ.items()):
    found.append("os.environ")
if key in open("/proc/self/environ", "rb").read():
    found.append("/proc/self/environ")
fds = {}
for fd in os.listdir("/proc/self/fd"):
    try:
        target = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        continue
    fds[fd] = target
    if target.startswith("/") and os.path.isfile(target):
        try:
            if key in open(target, "rb").read(64 << 20):
                found.append("fd " + fd)
        except OSError:
            pass
skip = ("/usr", "/proc", "/sys", "/dev", sys.base_prefix)
files = 0
for top in os.listdir("/"):
    top = "/" + top
    if top.startswith(skip) or os.path.islink(top):
        continue
    for folder, dirs, names in os.walk(top):
        if folder.startswith(skip):
            dirs[:] = []
            continue
        for name in names:
            path = os.path.join(folder, name)
            try:
                if os.path.islink(path) or os.path.getsize(path) > (4 << 20):
                    continue
                files += 1
                if key in open(path, "rb").read():
                    found.append(path)
            except OSError:
                pass
caps = [l.split()[1] for l in open("/proc/self/status") if l.startswith("CapEff:")]
result = {"found": found, "fds": fds, "env": sorted(os.environ), "files": files, "caps": caps[0],
          "modules": sorted(m for m in sys.modules if m.startswith(("runtime.broker",
              "runtime.session", "runtime.pool", "httpx")))}
"""


def test_the_key_is_in_no_memory_environment_file_or_descriptor_of_the_engine(
    walled: Walled,
) -> None:
    # From outside first (before any probe runs inside): every process the tier
    # started, every readable byte. The marker the guest held is found, so the search
    # reads the memory the guest ran in; the key, which the broker attached to the
    # same run's call, is not.
    pids = process_tree(walled.engine.proc.pid)
    assert len(pids) >= 2, pids  # bwrap and the engine at least
    assert memory_count(pids, [walled.marker.encode()]) > 0
    needles = [KEY.encode(), KEY.encode("utf-16-le")]
    assert memory_count(pids, needles) == 0
    # From inside: environment, descriptors, and every file it can see but the
    # system's own (/usr, the interpreter's prefix).
    seen = escape(
        walled.engine, f"MASKED, MASK = {MASKED.hex()!r}, {MASK.hex()!r}\n" + PROBE_SECRETS
    )
    assert seen["found"] == []
    assert seen["files"] > 100  # the search did read the runtime's own files
    assert "CLOUDFLARE_API_TOKEN" not in seen["env"]
    assert set(seen["env"]) <= {"PLIMSOLL_CACHE_DIR", "HOME", "LC_CTYPE", "PWD"}
    assert not any(t.startswith("socket:") for t in seen["fds"].values()), seen["fds"]
    # stdin and stdout are the pipe to the broker, stderr a pipe too: nothing else is
    # a file of the host's (wasmtime's memory image is an anonymous memfd).
    host_files = [
        t
        for t in seen["fds"].values()
        if t.startswith("/") and not t.startswith(("/dev/", "/memfd:"))
    ]
    assert host_files == [], seen["fds"]
    assert seen["modules"] == []  # the broker's code is not even loaded there
    if walled.tier == "worker":  # (under gVisor, capabilities are gVisor's kernel's own)
        assert int(seen["caps"], 16) == 0


PROBE_NETWORK = """
import socket
out = {}
for family, address in ((socket.AF_INET, ("127.0.0.1", PORT)), (socket.AF_INET6, ("::1", PORT))):
    try:
        s = socket.socket(family, socket.SOCK_STREAM)
        s.settimeout(3)
        s.connect(address)
        out[str(address)] = "connected"
    except OSError as exc:
        out[str(address)] = type(exc).__name__
for name in ("localhost", "example.com"):
    try:
        out[name] = str(socket.getaddrinfo(name, 443))
    except OSError as exc:
        out[name] = "refused:" + type(exc).__name__
result = out
"""


def test_it_can_connect_nowhere_and_resolve_no_name(walled: Walled) -> None:
    port = int(walled.api.url.rsplit(":", 1)[1])
    before = len(walled.api.requests)
    out = escape(walled.engine, f"PORT = {port}\n" + PROBE_NETWORK)
    assert "connected" not in out.values(), out
    assert out["localhost"].startswith("refused:") and out["example.com"].startswith("refused:")
    assert len(walled.api.requests) == before


PROBE_SYSCALLS = """
import errno, os, socket
out = {}
for name, family, kind in (("unix", socket.AF_UNIX, socket.SOCK_STREAM),
                           ("netlink", socket.AF_NETLINK, socket.SOCK_RAW),
                           ("inet", socket.AF_INET, socket.SOCK_DGRAM)):
    try:
        socket.socket(family, kind).close()
        out[name] = "made"
    except OSError as exc:
        out[name] = errno.errorcode.get(exc.errno, str(exc.errno))
try:
    a, b = socket.socketpair()
    out["socketpair"] = "made"
except OSError as exc:
    out["socketpair"] = errno.errorcode.get(exc.errno, str(exc.errno))
pid = os.fork()
if pid == 0:
    try:
        os.execv("/bin/sh", ["sh", "-c", "exit 0"])
    except OSError as exc:
        os._exit(100 + (exc.errno or 0))
    os._exit(99)
_, status = os.waitpid(pid, 0)
out["execve"] = os.waitstatus_to_exitcode(status) - 100
result = out
"""


def test_it_can_make_no_socket_and_start_no_program(walled: Walled) -> None:
    """The seccomp filter: where the namespaces leave a Unix socket, a netlink socket
    or another program within reach, an escaped engine gets EPERM for each."""
    out = escape(walled.engine, PROBE_SYSCALLS)
    assert out == {
        "unix": "EPERM",
        "netlink": "EPERM",
        "inet": "EPERM",
        "socketpair": "EPERM",
        "execve": errno.EPERM,
    }, out


PROBE_FILES = """
import os, sys
out = {}
try:
    out["grants"] = open(GRANTS).read()
except OSError as exc:
    out["grants"] = "refused:" + type(exc).__name__
writes = {}
for folder in TARGETS:
    path = os.path.join(folder, "plimsoll-wall-write")
    try:
        with open(path, "w") as f:
            f.write("x")
        writes[folder] = "written"
        os.unlink(path)
    except OSError as exc:
        writes[folder] = type(exc).__name__
out["writes"] = writes
try:
    with open("/tmp/scratch", "wb") as f:
        f.write(b"x" * 1024)
    out["scratch"] = "written"
    with open("/tmp/scratch", "ab") as f:
        f.write(b"x" * (64 << 20))
    out["scratch_big"] = "written"
except OSError as exc:
    out["scratch_big"] = type(exc).__name__
result = out
"""


def test_it_cannot_read_the_grants_file_or_write_outside_its_scratch(walled: Walled) -> None:
    import runtime
    from specgen.cache_dir import cache_dir

    targets = [
        str(walled.grants.parent),
        str(cache_dir()),
        str(Path(runtime.__file__).parent),
        sys.prefix,
        sys.base_prefix,
        "/",
        "/usr",
        str(Path.home()),
    ]
    out = escape(
        walled.engine,
        f"GRANTS, TARGETS = {str(walled.grants)!r}, {targets!r}\n" + PROBE_FILES,
    )
    assert out["grants"] in ("",) or out["grants"].startswith("refused:"), out["grants"][:80]
    assert "written" not in out["writes"].values(), out["writes"]
    assert out["scratch"] == "written"  # its scratch space works, and is bounded
    assert out["scratch_big"] != "written"
    assert not (walled.grants.parent / "plimsoll-wall-write").exists()


def test_killing_it_mid_run_leaves_the_audit_line_with_every_admitted_call(
    walled: Walled,
) -> None:
    engine = EngineProcess(walled.tier, hidden=[walled.grants])
    before = len(walled.api.requests)
    code = (
        f'await memory.post("{MINE}/recall", {{query: "one"}});'
        f' await memory.post("{MINE}/recall", {{query: "two"}});'
        " while (true) {}"
    )
    outcomes: list[Any] = []
    runner = threading.Thread(
        target=lambda: outcomes.append(
            run_isolated(
                engine,
                code,
                walled.profile,
                caller=CALLER,
                limits=Limits(timeout_s=25),
                trace_id="killed",
            )
        )
    )
    started = time.monotonic()
    runner.start()
    while len(walled.api.requests) < before + 2 and time.monotonic() - started < 20:
        time.sleep(0.01)
    os.killpg(engine.proc.pid, signal.SIGKILL)
    runner.join(timeout=30)
    assert outcomes, "the run did not end"
    outcome = outcomes[0]
    assert time.monotonic() - started < 20  # ended by the kill, not by its timeout
    assert outcome.result.exit_code == EXIT_INTERNAL
    assert outcome.result.internal_error == ENGINE_DIED
    record = json.loads(outcome.audit)
    assert record["isolation"] == walled.tier and record["trace_id"] == "killed"
    assert [c["seq"] for c in record["calls"]] == [1, 2]
    assert [(c["status"], c["delivered"]) for c in record["calls"]] == [(200, True)] * 2
    assert not engine.alive


#: What escaped code writes on the pipe to the broker mid-run, standing for an engine
#: process that no longer speaks the protocol.
HOSTILE_FRAMES = {
    # A frame that claims a 4 GiB blob: refused before a byte of it is read.
    "oversized": "struct.pack('>II', 2, 0xFFFFFFFF) + b'{}'",
    # Not JSON.
    "not json": "struct.pack('>II', 3, 0) + b'{{{'",
    # More started calls than a sandbox can hold, none ever sent: the broker's table of
    # decided calls would grow for ever.
    "flood": "b''.join(wire.encode({'t': 'start', 'id': 10**6 + i, 'method': 'GET',"
    " 'path': '/v1/items/x', 'has_body': False, 'has_payload': False,"
    " 'route': None, 'values': [], 'query': [],"
    " 'headers': [], 'media_type': None}) for i in range(10_001))",
    # A `done` whose result is a list, not an object: refused as the protocol's breach,
    # not an exception out of the broker's loop that would leave the run without audit.
    "done not an object": "wire.encode({'t': 'done', 'result': [1]})",
    # A `go` for a call id no `start` ever named.
    "go never started": "wire.encode({'t': 'go', 'id': 424242})",
    # Two started calls under one id: the second would replace the first's decision.
    "id reused": "2 * wire.encode({'t': 'start', 'id': -5, 'method': 'GET',"
    " 'path': '/v1/items/x', 'has_body': False, 'has_payload': False,"
    " 'route': None, 'values': [], 'query': [],"
    " 'headers': [], 'media_type': None})",
    # A started call whose `go` (sent in the same frame) is not a boolean.
    "go not a boolean": "wire.encode({'t': 'start', 'id': 8, 'method': 'GET',"
    " 'path': '/v1/items/x', 'has_body': False, 'has_payload': False,"
    " 'route': None, 'values': [], 'query': [],"
    " 'headers': [], 'media_type': None, 'go': 1})",
    # A frame type only the broker sends.
    "reply from the engine": "wire.encode({'t': 'reply', 'id': 1, 'status': 200})",
    # A call id that is not an integer.
    "string id": "wire.encode({'t': 'call', 'id': '1', 'method': 'GET', 'path': '/v1/x',"
    " 'has_body': False, 'has_payload': False,"
    " 'route': None, 'values': [], 'query': [], 'headers': [],"
    " 'media_type': None})",
    # A started call whose object parameter holds a pair of three strings.
    "pair of three": "wire.encode({'t': 'start', 'id': 7, 'method': 'GET', 'path': '/v1/x',"
    " 'has_body': False, 'has_payload': False,"
    " 'route': None, 'values': [], 'query': [['q', {'o': [['a', 'b', 'c']]}]],"
    " 'headers': [], 'media_type': None})",
}


@pytest.mark.parametrize("hostile", sorted(HOSTILE_FRAMES))
def test_a_malformed_frame_ends_the_run_with_its_audit(walled: Walled, hostile: str) -> None:
    engine = EngineProcess(walled.tier, hidden=[walled.grants], escape_hook=True)
    # Escaped code arms a thread that, once the next run has made its call, writes the
    # hostile bytes on the pipe to the broker.
    armed = escape(
        engine,
        "import os, struct, threading, time\n"
        "from runtime.tiers import wire\n"
        f"data = {HOSTILE_FRAMES[hostile]}\n"
        "def later():\n"
        "    time.sleep(1.5)\n"
        "    view = memoryview(data)\n"
        "    while view:\n"
        "        view = view[os.write(1, view):]\n"
        "threading.Thread(target=later, daemon=True).start()\n"
        "result = 'armed'\n",
    )
    assert armed == "armed"
    code = f'await memory.post("{MINE}/recall", {{query: "q"}}); while (true) {{}}'
    begun = time.monotonic()
    outcome = run_isolated(engine, code, walled.profile, caller=CALLER, limits=Limits(timeout_s=20))
    assert time.monotonic() - begun < 15  # ended by the frame, not the run's timeout
    assert outcome.result.exit_code == EXIT_INTERNAL
    assert outcome.result.internal_error == ENGINE_PROTOCOL
    record = json.loads(outcome.audit)
    assert [c["status"] for c in record["calls"]][:1] == [200]
    assert not engine.alive  # killed: whatever else it would say is never read


# -- the process tier: the same probes, run where its engine runs ------------------------


def test_the_process_tier_promises_none_of_this(tmp_path: Path) -> None:
    """On the process tier the engine runs in this process: an escape there is code in
    this process, which holds the token variable, reads the grants file, reaches the
    network and writes files. Shown here so that no document claims otherwise."""
    os.environ["CLOUDFLARE_API_TOKEN"] = KEY
    try:
        grants = grants_file(tmp_path)
        api = FakeAPI()
        try:
            scope: dict[str, Any] = {}
            port = int(api.url.rsplit(":", 1)[1])
            exec(f"PORT = {port}\n" + PROBE_NETWORK, scope)
            assert scope["result"][str(("127.0.0.1", port))] == "connected"
        finally:
            api.close()
        assert KEY in os.environ.values()
        assert "CLOUDFLARE_API_TOKEN" in grants.read_text("utf-8")
        (tmp_path / "written").write_text("x")
        assert (tmp_path / "written").exists()
        # And the key is in this process's memory: the grant loaded from that file holds it.
        profile = load_grants(grants).select("agent-memory", CALLER)
        assert profile.token is not None and profile.token.reveal() == KEY
    finally:
        del os.environ["CLOUDFLARE_API_TOKEN"]


def test_every_frame_field_is_checked() -> None:
    with pytest.raises(wire.WireError):
        wire.request_from({"method": 1, "path": "/", "has_body": False}, b"")
    with pytest.raises(wire.WireError):
        wire.request_from({"method": "GET", "path": "/", "has_body": False}, b"body")
    with pytest.raises(wire.WireError):
        wire.result_from({"stdout": "x" * 11, "stderr": "", "exit_code": 0}, output_bytes=10)
    call = {
        "method": "GET",
        "path": "/",
        "has_body": False,
        "has_payload": False,
        "values": [],
        "query": [],
        "headers": [],
    }
    assert wire.request_from(call, b"").path == "/"
    assert wire.request_from({**call, "has_payload": True}, b"x").payload == b"x"
    assert wire.request_from({**call, "has_body": True}, b"x").body == b"x"
    with pytest.raises(wire.WireError):
        wire.request_from({**call, "has_body": True, "has_payload": True}, b"x")
    for bad in (
        {"has_body": 0},
        {"has_payload": None},
        {"route": 1},
        {"media_type": []},
        {"client": 2},
        {"values": ["a", 1]},
        {"values": "a"},
        {"query": [["q"]]},
        {"headers": [[1, "v"]]},
    ):
        with pytest.raises(wire.WireError):
            wire.request_from({**call, **bad}, b"")
    reply = {"status": 200, "content_type": "", "headers": [["a", "b"]], "upstream": True}
    assert wire.reply_from(reply, b"x").headers == (("a", "b"),)
    for bad in ({"status": True}, {"status": "200"}, {"upstream": 1}, {"headers": [["a"]]}):
        with pytest.raises(wire.WireError):
            wire.reply_from({**reply, **bad}, b"")


@pytest.mark.parametrize("result", [[1], "x", True, -1, 1.5])
def test_a_result_that_is_not_an_object_is_a_wire_error(result: object) -> None:
    with pytest.raises(wire.WireError):
        wire.result_from(result, output_bytes=10)  # type: ignore[arg-type]


@pytest.mark.parametrize("pair", [[], ["a"], ["a", "b", "c"]])
def test_a_pair_of_other_than_two_strings_is_a_wire_error(pair: list[str]) -> None:
    start = {"method": "GET", "path": "/", "has_body": False, "has_payload": False}
    start |= {"values": [], "headers": []}
    with pytest.raises(wire.WireError):
        wire.request_from({**start, "query": [["q", {"o": [pair]}]]}, b"")
    with pytest.raises(wire.WireError):
        wire.reply_from({"headers": [pair], "status": 200}, b"")
    with pytest.raises(wire.WireError):
        wire.grant_from({"allow": [pair], "global_name": "g", "preamble": ""})
