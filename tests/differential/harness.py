"""Run one agent program in the sandbox and in node, through the same broker; compare.

Sandbox side: `runtime.run_profile` with the shop grant (`api/grants.json`, its preamble
generated from `api/shop.openapi.json` by specgen), exactly as `specgen run` does.

Node side: the same module source (`runtime.sandbox.guest.compose_source`: the SHIMS
line, the client rendered from templates/client.js.j2, the preamble, the program) in a
fresh `vm` context of one long-lived node process (`node_runner.mjs`), whose
`__coderunner_host_start` / `__coderunner_host_call` post each envelope, with the call's
second argument (a text or binary body), to a loopback endpoint here. The endpoint
decodes it with the sandbox's own envelope decoder and hands it to a fresh `Broker` for
the same profile, one per program, as a session does; its answer carries what node
needs to build the bridge's reply object in the guest's realm (`Answer`: status, body,
the non-enumerable `type`, `headers` on an upstream answer, text or bytes). A string
body is encoded by node as its `fetch` sends one, and a text reply decoded as its
TextDecoder does, so those stay node's own. Both brokers call the same stateless fake
(`fake.py`).

So the only difference between the two sides is the engine and the native glue around
it, and what is compared is what an agent's operator would see: stdout (exactly), the
exit code, and every request that reached the API (method, path with query, headers,
body bytes; as a sorted list, since concurrent calls may arrive in any order, and with
the multipart boundary, which the broker draws at random, replaced by a placeholder).

What the sandbox differs in by design, and programs therefore stay off (see
`BY_DESIGN`), is listed once in this module.
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import re
import subprocess
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from runtime import Broker, Profile, load_grants, run_profile
from runtime.contract import MAX_REQUEST_BODY_BYTES
from runtime.messages import MSG_BROKER_UNAVAILABLE, MSG_ENVELOPE_REQUIRED
from runtime.sandbox import envelope as envelope_mod
from runtime.sandbox.guest import compose_source
from specgen import build, media
from tests.conftest import node
from tests.differential import fake

HERE = Path(__file__).resolve().parent
PROGRAMS = HERE / "programs"
SPEC = HERE / "api" / "shop.openapi.json"
GRANTS = HERE / "api" / "grants.json"
PROFILE, CALLER, TOKEN_ENV = "shop-agent", "differential", "SHOP_API_KEY"
TIMEOUT_S = 10.0
#: The largest reply the sandbox's bridge hands to a guest; beyond it, a 500.
MAX_REPLY_BYTES = 4 << 20
#: The most bytes of a reply's `headers` JSON the bridge hands over; beyond it, a 500.
MAX_REPLY_HEADER_BYTES = 64 * 1024

#: Where the sandbox differs from node on purpose, or QuickJS from V8 where the spec lets
#: them. Programs stay off these; where the node side imitates the sandbox instead
#: (console.log's formatting, Intl, the `qjs:os` timers), node_runner.mjs says so.
BY_DESIGN = {
    "fetch, XMLHttpRequest, process, require, setTimeout as a global": (
        "the sandbox's only way out is the host call; timers come from `qjs:os`"
    ),
    "Date.now, new Date(), performance.now, os.now": (
        "the sandbox's clock is its own (virtual while it waits on timers, or fixed)"
    ),
    "Math.random": "an unseeded generator on both sides",
    "error messages and stacks of engine errors": (
        "QuickJS and V8 word their TypeErrors differently; programs print e.name, not e.message"
    ),
    "console.log of objects": (
        "QuickJS prints ToString of each argument ([object Object]); node would inspect "
        "them, so the node side formats as QuickJS does and programs print JSON.stringify"
    ),
    "Intl beyond NumberFormat, Date#toLocaleString, String#localeCompare of non-ASCII": (
        "the QuickJS build has no Intl (the SHIMS line's en-US stand-in runs on both sides)"
    ),
    "TextEncoder, TextDecoder, URL, structuredClone": (
        "neither the sandbox nor a bare node vm context has them"
    ),
    "a comparator that is not consistent (sort)": "the order is the engine's to choose",
    "which builtins exist (feature detection)": (
        "QuickJS-NG 0.17 has some node 24 lacks (Math.sumPrecise, Uint8Array.fromBase64 and "
        "toHex, Iterator.concat; the node side provides only toBase64, which the client "
        "uses for a multipart file's bytes) and lacks some node has (Atomics)"
    ),
    "Function#toString of native functions": "whitespace inside `[native code]` differs",
    "WebAssembly": (
        "a node vm context has it, the sandbox has not; the harness's own tests ask for it "
        "to prove each compared thing can differ"
    ),
    "races (Promise.race of two calls, timers against calls)": (
        "which concurrent reply or timer comes first is the scheduler's on both sides"
    ),
    "stdout over 64 KiB": "the sandbox caps each stream (Limits.output_bytes)",
    "stderr": "error reports are worded by each engine; only stdout and the exit code count",
}

#: Programs whose difference is the engine's and cannot be fixed in the sandbox's glue,
#: each with the reason. The suite checks that each still differs, so a fixed one must
#: leave this list.
KNOWN_DIFFERENCES: dict[str, str] = {
    "regex_legacy_statics": "QuickJS has no legacy RegExp.$1..$9 (Annex B, optional)",
    "misc_sort_boolean_comparator": (
        "a comparator returning a boolean is inconsistent, so the order is the engine's: "
        "QuickJS sorts such an array partly, V8 leaves this one as it was. Models write it"
    ),
}


@dataclass(frozen=True)
class Request:
    """One request as the fake received it, normalised for comparison."""

    method: str
    path: str
    headers: tuple[tuple[str, str], ...]
    body: bytes


@dataclass(frozen=True)
class Outcome:
    stdout: str
    exit_code: int
    requests: tuple[Request, ...]
    stderr: str = ""


@dataclass(frozen=True)
class Difference:
    name: str
    sandbox: Outcome
    node: Outcome

    def explain(self) -> str:
        """Which of the three compared things differ, and how (for a failing test)."""
        lines = [f"{self.name}:"]
        s, n = self.sandbox, self.node
        if s.stdout != n.stdout:
            lines.append(f"  stdout sandbox={s.stdout!r}\n         node   ={n.stdout!r}")
        if s.exit_code != n.exit_code:
            lines.append(f"  exit sandbox={s.exit_code} node={n.exit_code}")
            lines.append(
                f"  stderr sandbox={s.stderr[-400:]!r}\n         node   ={n.stderr[-400:]!r}"
            )
        if s.requests != n.requests:
            only_s = [r for r in s.requests if r not in n.requests]
            only_n = [r for r in n.requests if r not in s.requests]
            lines.append(
                f"  requests: {len(s.requests)} from the sandbox, {len(n.requests)} from node"
            )
            lines += [f"  only sandbox: {r!r}" for r in only_s]
            lines += [f"  only node:    {r!r}" for r in only_n]
        return "\n".join(lines)


_BOUNDARY = re.compile(rb"boundary=([0-9A-Za-z'()+_,./:=?-]+)")


def normalise(seen: Sequence[fake.Seen]) -> tuple[Request, ...]:
    out = []
    for s in seen:
        body = s.body
        headers = dict(s.headers)
        found = _BOUNDARY.search(headers.get("content-type", "").encode())
        if found:
            body = body.replace(found.group(1), b"BOUNDARY")
            headers["content-type"] = headers["content-type"].replace(
                found.group(1).decode(), "BOUNDARY"
            )
        out.append(Request(s.method, s.path, tuple(sorted(headers.items())), body))
    return tuple(sorted(out, key=lambda r: (r.method, r.path, r.headers, r.body)))


def shop_profile(base_url: str) -> Profile:
    """The grant both sides run with, aimed at the fake, with specgen's preamble."""
    preamble = build.run(str(SPEC), build.Options(global_name="shop")).files["preamble.js"]
    grants = load_grants(GRANTS, environ={TOKEN_ENV: fake.TOKEN})
    return grants.select(PROFILE, CALLER).with_base_url(base_url).with_preamble(preamble)


@dataclass(frozen=True)
class Answer:
    """What a host call hands the guest, as the sandbox's bridge builds its reply object:
    `status`, `body` (text, or bytes for a Uint8Array), the non-enumerable `type`, and
    `headers` (a JSON string) only when the upstream API answered."""

    status: int
    body: bytes
    type: str = ""
    binary: bool = False
    headers: bytes | None = None


def _refusal(status: int, text: str) -> Answer:
    return Answer(status, text.encode(), "text/plain")


_BROKEN = Answer(500, b"")


def _is_binary(content_type: str, body: bytes) -> bool:
    """The bridge's documented rule (runtime/sandbox/bridge.py's module docstring): bytes
    for a binary media type, or for no type at all when the body is not UTF-8."""
    if content_type.strip():
        return media.kind(content_type) == "binary"
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


def _headers_json(headers: Sequence[tuple[str, str]]) -> bytes:
    """One JSON object of the lower-case names the broker let through (the last of a
    repeated name wins, as a dict keeps it)."""
    return json.dumps(dict(headers), separators=(",", ":"), ensure_ascii=False).encode()


class _Endpoint:
    """The node side's way to the broker: POST /run/<id>/call (the blocking host call)
    or /run/<id>/start (a started one).

    The request body is the envelope's bytes, then the payload's (the host call's second
    argument: `X-Envelope-Length` says where the envelope ends, `X-Payload` whether there
    was one: `none`, `bytes`, or `invalid` for a value that is neither a string nor a
    Uint8Array). Answers 200 always, with the reply object's parts in `X-Host-Status`,
    `X-Host-Type`, `X-Host-Binary` and (an upstream answer only) `X-Host-Headers` (its
    JSON, base64), and its body as the response body. Each run id has its own Broker,
    made by `open` and closed by `close`, as `runtime.session` makes one per sandbox
    run. As the sandbox's bridge does, a blocking call goes to the broker's `__call__`
    (429 when every slot is taken) and a started one to its `start` (decided at once,
    then sent when a slot is free).
    """

    def __init__(self, profile: Profile, timeout_s: float) -> None:
        self.profile = profile
        self.timeout_s = timeout_s
        self.brokers: dict[str, Broker] = {}
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # The head and the body are two writes; with Nagle's algorithm the body
            # waited for the client's delayed ACK, some 25 ms a call, so a program of a
            # few hundred calls timed out on the node side alone.
            disable_nagle_algorithm = True

            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                data = self.rfile.read(length)
                split = int(self.headers.get("X-Envelope-Length") or length)
                kind = self.headers.get("X-Payload", "none")
                payload: bytes | str | None = (
                    data[split:] if kind == "bytes" else None if kind == "none" else kind
                )
                _, _, run_id, how = self.path.split("/")
                got = endpoint.answer(run_id, data[:split], payload, started=how == "start")
                self.send_response(200)
                self.send_header("X-Host-Status", str(got.status))
                self.send_header("X-Host-Type", got.type)
                self.send_header("X-Host-Binary", "1" if got.binary else "0")
                if got.headers is not None:
                    self.send_header("X-Host-Headers", base64.b64encode(got.headers).decode())
                self.send_header("Content-Length", str(len(got.body)))
                self.end_headers()
                self.wfile.write(got.body)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._thread.start()

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def open(self, run_id: str) -> None:
        self.brokers[run_id] = Broker(
            self.profile,
            deadline=time.monotonic() + self.timeout_s,
            caller=CALLER,
            run_timeout_s=self.timeout_s,
        )

    def close(self, run_id: str) -> None:
        broker = self.brokers.pop(run_id, None)
        if broker is not None:
            broker.close()

    def answer(
        self, run_id: str, raw: bytes, payload: bytes | str | None, *, started: bool
    ) -> Answer:
        """What the sandbox's bridge answers for one call: its own refusals of a bad
        payload (`payload` a str: `invalid`) or envelope, else the broker's reply (500 for
        a broken handler, a reply too big or headers too long)."""
        if isinstance(payload, str):
            return _refusal(envelope_mod.STATUS_INVALID, envelope_mod.TEXT_INVALID)
        if payload is not None and len(payload) > MAX_REQUEST_BODY_BYTES:
            return _refusal(envelope_mod.STATUS_TOO_LARGE, envelope_mod.TEXT_BODY_TOO_LARGE)
        decoded = envelope_mod.decode(raw, payload)
        if isinstance(decoded, envelope_mod.EnvelopeRefusal):
            return _refusal(decoded.status, decoded.text)
        broker = self.brokers.get(run_id)
        if broker is None:
            return _refusal(503, MSG_BROKER_UNAVAILABLE + "\n")
        try:
            reply = broker.start(decoded)() if started else broker(decoded)
            headers = _headers_json(reply.headers) if reply.upstream is True else None
        except Exception:
            return _BROKEN
        body = bytes(reply.body)
        if len(body) > MAX_REPLY_BYTES or len(headers or b"") > MAX_REPLY_HEADER_BYTES:
            return _BROKEN
        kind = media.essence(reply.content_type).encode("ascii", "replace").decode()
        return Answer(reply.status, body, kind, _is_binary(reply.content_type, body), headers)

    def shutdown(self) -> None:
        self._server.shutdown()
        self._server.server_close()


class Harness:
    """The fake, the endpoint and one node process, shared by many programs.

    Programs run one at a time (the fake's log is sliced per program)."""

    def __init__(self, timeout_s: float = TIMEOUT_S) -> None:
        self.timeout_s = timeout_s
        self.fake = fake.start()
        self.profile = shop_profile(self.fake.url)
        self.endpoint = _Endpoint(self.profile, timeout_s)
        self._ids = itertools.count()
        self._node = subprocess.Popen(
            [
                node(),
                "--experimental-vm-modules",
                "--no-warnings",
                str(HERE / "node_runner.mjs"),
                self.endpoint.url,
                MSG_ENVELOPE_REQUIRED,
                str(timeout_s),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            encoding="utf-8",
        )
        self._lock = threading.Lock()

    def close(self) -> None:
        if self._node.stdin:
            self._node.stdin.close()
        try:
            self._node.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._node.kill()
            self._node.wait()
        self.endpoint.shutdown()
        self.fake.close()

    def source(self, code: str) -> str:
        return compose_source(
            code,
            global_name=self.profile.global_name,
            allow=self.profile.allow,
            preamble=self.profile.preamble,
        )

    def in_sandbox(self, code: str) -> Outcome:
        before = len(self.fake.requests)
        outcome = run_profile(code, self.profile, caller=CALLER, timeout_s=self.timeout_s)
        r = outcome.result
        return Outcome(r.stdout, r.exit_code, normalise(self.fake.requests[before:]), r.stderr)

    def in_node(self, code: str) -> Outcome:
        run_id = f"r{next(self._ids)}"
        before = len(self.fake.requests)
        self.endpoint.open(run_id)
        try:
            assert self._node.stdin and self._node.stdout
            self._node.stdin.write(json.dumps({"id": run_id, "source": self.source(code)}) + "\n")
            self._node.stdin.flush()
            line = self._answer()
        finally:
            self.endpoint.close(run_id)
        if not line:
            raise RuntimeError(f"the node runner ended (exit {self._node.poll()})")
        got: dict[str, Any] = json.loads(line)
        return Outcome(
            got["stdout"], got["exit_code"], normalise(self.fake.requests[before:]), got["stderr"]
        )

    def _answer(self) -> str:
        """The node runner's next line; it ends each run itself after timeout_s, so one
        that says nothing for much longer is stuck and is killed rather than waited on."""
        assert self._node.stdout
        got: list[str] = []
        reader = threading.Thread(target=lambda: got.append(self._node.stdout.readline()))
        reader.daemon = True
        reader.start()
        reader.join(self.timeout_s * 3)
        if not got:
            self._node.kill()
            raise RuntimeError("the node runner did not answer; it was killed")
        return got[0]

    def compare(self, name: str, code: str) -> Difference | None:
        """Run `code` on both sides; the difference, or None when they agree."""
        with self._lock:
            sandbox = self.in_sandbox(code)
            other = self.in_node(code)
        if (sandbox.stdout, sandbox.exit_code, sandbox.requests) == (
            other.stdout,
            other.exit_code,
            other.requests,
        ):
            return None
        return Difference(name, sandbox, other)


@contextlib.contextmanager
def harness(timeout_s: float = TIMEOUT_S) -> Iterator[Harness]:
    h = Harness(timeout_s)
    try:
        yield h
    finally:
        h.close()


def programs() -> list[tuple[str, str]]:
    """Every program file, (name, code), by name."""
    return [(p.stem, p.read_text(encoding="utf-8")) for p in sorted(PROGRAMS.glob("*.js"))]
