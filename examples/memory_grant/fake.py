"""A stand-in for Cloudflare's Agent Memory API on loopback, built from its OpenAPI document.

Why a fake: the example must prove that the broker, not the sandbox, holds the key, and it
must do so with no account, no network and no spending, and with output that never
changes. So the fake takes its routes, its request checks and the shape of every answer
from the same `agent-memory.openapi.json` that specgen reads. If the document and the fake
disagreed, the page would show a client talking to an API that does not exist.

Deliberate choices, each so that a run is byte-for-byte repeatable:

* IDs come from a counter per instance: `01JFAKEMEM` + 16 digits (`...0001`, `...0002`),
  which fits the document's memory-ID pattern (26 Crockford base-32 characters).
* The clock is stopped at `CLOCK`; every timestamp the fake writes is that instant.
* Recall is a word match, not a language model. Text is cut into lower-case words, a short
  list of English function words is dropped, and plural endings are folded (`replies` ->
  `reply`, `wants` -> `want`). A memory is a candidate when it shares at least one word
  with the query; its score is the share of the memory's words the query has
  (3 decimals), the best candidate's content is the answer, ties go to the older memory.
  No synonyms and no "most recent" fallback: a query sharing no word finds nothing.
  "language" is not in the page's stored sentence; its two recalls match on
  "customer"/"want" (score 0.5) and on "reply" (score 0.25).
* Every body is compact JSON followed by one newline, the way Go's `json.Encoder` writes
  it. With it the page's byte counts (295, 249, 295, 250) come out exactly; without it
  each would be one byte short, so the Go fake the page was measured on evidently did
  the same.

State: the example's namespace exists from the start (an operator would have made it);
a profile comes into being with its first remember/ingest, as upstream; anything else
unknown (namespace, profile, memory, session) is a 404 in the document's error envelope.

Routing here is the API's own (path templates -> operations, parameters extracted), not
the broker's allow rules in `specgen.routes`: the fake plays the far side of the wire and
must not share the code whose decisions it is there to observe.
"""

from __future__ import annotations

import hmac
import re
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import orjson
from jsonschema.exceptions import ValidationError, best_match
from openapi_schema_validator import OAS30Validator, oas30_format_checker
from referencing import Registry
from referencing.jsonschema import DRAFT4

from examples.kit.loopback import Headers, LoopbackServer, RecordedRequest, Reply, serve

DOCUMENT = Path(__file__).with_name("agent-memory.openapi.json")

#: The one instant the fake's clock shows (RFC 3339, second precision, UTC).
CLOCK = "2026-11-05T12:00:00Z"
#: Memory IDs are this prefix plus a zero-padded counter: 26 characters in all.
MEMORY_ID_PREFIX = "01JFAKEMEM"
#: Namespace IDs use their own counter, so seeding a namespace never shifts memory IDs.
NAMESPACE_ID_PREFIX = "01JFAKENSP"

EXAMPLE_ACCOUNT = "00000000000000000000000000000042"
EXAMPLE_NAMESPACE = "support-agent"
#: The namespace the page's runs write into exists from the start, as it would in an
#: account an operator had set up; profiles are created by the first write, as upstream.
DEFAULT_NAMESPACES: tuple[tuple[str, str], ...] = ((EXAMPLE_ACCOUNT, EXAMPLE_NAMESPACE),)

DEFAULT_PER_PAGE = 20
MAX_PER_PAGE = 500

# Error codes in the envelope. 1003 "namespace not found" is the document's own example;
# 7003/10000/10405 are the codes Cloudflare's v4 API uses for no route, authentication
# and method not allowed. The rest are the fake's own, kept small and stable.
CODE_BAD_BODY = 1001
CODE_BAD_PARAMETER = 1002
CODE_NOT_FOUND = 1003
CODE_CONFLICT = 1004
CODE_NO_ROUTE = 7003
CODE_AUTH = 10000
CODE_METHOD = 10405

# English function words recall ignores: they say nothing about what a memory is about.
_STOP_TEXT = """a about after all also am an and any are as at be been before being but by can
    could did do does doing done for from had has have having he her here hers him his
    how i if in into is it its itself just may me might more most must my no nor not now
    of off on once only or other our ours out over own please same shall she should so
    some such than that the their theirs them then there these they this those through
    to too under until up us very was we were what when where which while who whom whose
    why will with would yes yet you your yours"""
_STOP_WORDS = frozenset(_STOP_TEXT.split())
_WORD = re.compile(r"[^\W_]+")


def terms(text: str) -> frozenset[str]:
    """The words recall compares: lower-cased, function words dropped, plurals folded."""
    out = set()
    for word in _WORD.findall(text.lower()):
        if word in _STOP_WORDS:
            continue
        if len(word) > 4 and word.endswith("ies"):
            word = word[:-3] + "y"
        elif len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
            word = word[:-1]
        out.add(word)
    return frozenset(out)


def recall_score(query: frozenset[str], memory: frozenset[str]) -> float:
    """Share of the memory's words that the query has; 0.0 when they share none."""
    if not memory:
        return 0.0
    return round(len(query & memory) / len(memory), 3)


def _pointer(parts: Iterable[Any]) -> str:
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def _escape(segment: str) -> str:
    return segment.replace("~", "~0").replace("/", "~1")


class ApiError(Exception):
    """A refusal the fake answers with the document's 4XX envelope."""

    def __init__(self, status: int, code: int, message: str, pointer: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.pointer = pointer
        self.headers: dict[str, str] = {}

    def envelope(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.pointer is not None:
            error["source"] = {"pointer": self.pointer}
        return {"success": False, "errors": [error], "messages": [], "result": None}


@dataclass(frozen=True)
class Operation:
    """One operation of the document, with what the fake needs to route and check it."""

    operation_id: str
    method: str
    template: str  # the document's path, after the server prefix
    segments: tuple[str, ...]
    parameters: tuple[tuple[dict[str, Any], str], ...]  # (parameter, its schema's pointer)
    body_pointer: str | None  # JSON pointer to the request-body schema, if any
    body_required: bool
    response_pointers: dict[str, str]  # status key ("200", "4XX") -> schema pointer

    @property
    def literal_segments(self) -> int:
        return sum(1 for s in self.segments if not s.startswith("{"))

    def match(self, segments: list[str]) -> dict[str, str] | None:
        if len(segments) != len(self.segments):
            return None
        params: dict[str, str] = {}
        for want, got in zip(self.segments, segments, strict=True):
            if want.startswith("{") and want.endswith("}"):
                if not got:
                    return None
                params[want[1:-1]] = unquote(got)
            elif want != got:
                return None
        return params

    def response_key(self, status: int) -> str | None:
        """The document's response entry for a status: exact code first, then `4XX`."""
        if str(status) in self.response_pointers:
            return str(status)
        wild = f"{str(status)[0]}XX"
        if wild in self.response_pointers:
            return wild
        return "default" if "default" in self.response_pointers else None


class ApiDocument:
    """The OpenAPI document as routes and validators; every schema resolves through
    `referencing`, so a `$ref` anywhere in the document would be followed too."""

    URI = "urn:plimsoll:agent-memory-openapi"

    def __init__(self, path: Path = DOCUMENT) -> None:
        self.path = path
        self.doc: dict[str, Any] = orjson.loads(path.read_bytes())
        self.registry: Registry[Any] = Registry().with_resource(
            self.URI, DRAFT4.create_resource(self.doc)
        )
        self.prefix = self._server_prefix()
        self.operations = tuple(self._operations())
        self._validators: dict[str, OAS30Validator] = {}
        self._lock = threading.Lock()

    def _server_prefix(self) -> str:
        """The path of the document's server URL: OpenAPI appends every path to it."""
        paths = {urlsplit(s["url"]).path.rstrip("/") for s in self.doc.get("servers", [])}
        if len(paths) > 1:
            raise ValueError(f"{self.path.name}: servers disagree on the path: {sorted(paths)}")
        return paths.pop() if paths else ""

    def _deref(self, node: Any) -> Any:
        while isinstance(node, dict) and "$ref" in node:
            node = self.registry.resolver(self.URI).lookup(node["$ref"]).contents
        return node

    def _parameter(self, raw: Any, pointer: str) -> tuple[dict[str, Any], str]:
        """A parameter object and the pointer to its schema, following a local `$ref`."""
        while isinstance(raw, dict) and isinstance(raw.get("$ref"), str):
            pointer = raw["$ref"].removeprefix("#")
            raw = self._deref(raw)
        return raw, f"{pointer}/schema"

    def _operations(self) -> Iterator[Operation]:
        for template, raw_item in self.doc["paths"].items():
            item = self._deref(raw_item)
            base = f"/paths/{_escape(template)}"
            shared = [
                self._parameter(p, f"{base}/parameters/{i}")
                for i, p in enumerate(item.get("parameters", []))
            ]
            for method, op in item.items():
                if method not in ("get", "put", "post", "delete", "patch"):
                    continue
                params = {(p["in"], p["name"]): (p, at) for p, at in shared}
                for i, raw in enumerate(op.get("parameters", [])):
                    p, at = self._parameter(raw, f"{base}/{method}/parameters/{i}")
                    params[(p["in"], p["name"])] = (p, at)
                body_pointer = None
                body_required = False
                if "requestBody" in op:
                    body = self._deref(op["requestBody"])
                    body_required = bool(body.get("required"))
                    body_pointer = f"{base}/{method}/requestBody/content/application~1json/schema"
                responses = {}
                for status, response in op["responses"].items():
                    if "application/json" in self._deref(response).get("content", {}):
                        responses[status] = (
                            f"{base}/{method}/responses/{_escape(status)}"
                            "/content/application~1json/schema"
                        )
                yield Operation(
                    operation_id=op["operationId"],
                    method=method.upper(),
                    template=template,
                    segments=tuple(template.split("/")[1:]),
                    parameters=tuple(params.values()),
                    body_pointer=body_pointer,
                    body_required=body_required,
                    response_pointers=responses,
                )

    def validator(self, pointer: str) -> OAS30Validator:
        """A validator for the schema at `pointer`, with the whole document resolvable."""
        with self._lock:
            if pointer not in self._validators:
                self._validators[pointer] = OAS30Validator(
                    {"$ref": f"{self.URI}#{pointer}"},
                    registry=self.registry,
                    format_checker=oas30_format_checker,
                )
            return self._validators[pointer]

    def operation(self, operation_id: str) -> Operation:
        for op in self.operations:
            if op.operation_id == operation_id:
                return op
        raise KeyError(operation_id)

    def route(self, method: str, path: str) -> tuple[Operation, dict[str, str]]:
        """The operation for a request path (server prefix included), or an ApiError."""
        if not path.startswith(self.prefix + "/"):
            raise ApiError(404, CODE_NO_ROUTE, f"no route for {method} {path}")
        segments = path[len(self.prefix) :].split("/")[1:]
        matched = [(op, p) for op in self.operations if (p := op.match(segments)) is not None]
        if not matched:
            raise ApiError(404, CODE_NO_ROUTE, f"no route for {method} {path}")
        same_method = [(op, p) for op, p in matched if op.method == method]
        if not same_method:
            allowed = sorted({op.method for op, _ in matched})
            error = ApiError(405, CODE_METHOD, f"method {method} is not allowed on {path}")
            error.headers["Allow"] = ", ".join(allowed)
            raise error
        # A literal segment beats a template parameter, as in every router.
        return max(same_method, key=lambda pair: pair[0].literal_segments)

    def response_errors(self, operation_id: str, status: int, body: Any) -> list[str]:
        """Why `body` is not a valid `status` answer of the operation ([] when it is)."""
        op = self.operation(operation_id)
        key = op.response_key(status)
        if key is None:
            return [f"{operation_id} documents no response for status {status}"]
        validator = self.validator(op.response_pointers[key])
        return [
            f"{_pointer(e.absolute_path) or '/'}: {e.message}" for e in validator.iter_errors(body)
        ]


@dataclass
class Memory:
    id: str
    type: str
    content: str
    session_id: str | None
    terms: frozenset[str]

    def full(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": self.type,
            "summary": self.content,
            "content": self.content,
            "sessionId": self.session_id,
            "createdAt": CLOCK,
            "updatedAt": CLOCK,
        }

    def metadata(self) -> dict[str, Any]:
        item = self.full()
        del item["content"]
        return item


@dataclass
class Profile:
    name: str
    memories: dict[str, Memory] = field(default_factory=dict)
    sessions: set[str] = field(default_factory=set)


@dataclass
class Namespace:
    id: str
    name: str
    profiles: dict[str, Profile] = field(default_factory=dict)

    def public(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "created_at": CLOCK, "updated_at": CLOCK}


class _Store:
    """The accounts' namespaces, profiles and memories, and the ID counters."""

    def __init__(self, namespaces: Iterable[tuple[str, str]]) -> None:
        self.accounts: dict[str, dict[str, Namespace]] = {}
        self.memory_counter = 0
        self.namespace_counter = 0
        for account, name in namespaces:
            self.create_namespace(account, name)

    def create_namespace(self, account: str, name: str) -> Namespace:
        spaces = self.accounts.setdefault(account, {})
        if name in spaces:
            raise ApiError(409, CODE_CONFLICT, f"namespace {name} already exists", "/name")
        self.namespace_counter += 1
        ns = Namespace(id=f"{NAMESPACE_ID_PREFIX}{self.namespace_counter:016d}", name=name)
        spaces[name] = ns
        return ns

    def namespace(self, account: str, name: str) -> Namespace:
        ns = self.accounts.get(account, {}).get(name)
        if ns is None:
            raise ApiError(404, CODE_NOT_FOUND, "namespace not found")
        return ns

    def profile(self, account: str, namespace: str, name: str, create: bool = False) -> Profile:
        ns = self.namespace(account, namespace)
        if name not in ns.profiles:
            if not create:
                raise ApiError(404, CODE_NOT_FOUND, "profile not found")
            ns.profiles[name] = Profile(name=name)
        return ns.profiles[name]

    def add_memory(self, profile: Profile, kind: str, content: str, session: str | None) -> Memory:
        self.memory_counter += 1
        memory = Memory(
            id=f"{MEMORY_ID_PREFIX}{self.memory_counter:016d}",
            type=kind,
            content=content,
            session_id=session,
            terms=terms(content),
        )
        profile.memories[memory.id] = memory
        if session is not None:
            profile.sessions.add(session)
        return memory


def _page(query: dict[str, Any], items: list[Any]) -> tuple[list[Any], dict[str, Any]]:
    """Cut one page; the cursor is the offset of the next page, omitted on the last."""
    per_page = query.get("per_page", DEFAULT_PER_PAGE)
    if not 1 <= per_page <= MAX_PER_PAGE:
        raise ApiError(400, CODE_BAD_PARAMETER, f"per_page must be 1 to {MAX_PER_PAGE}")
    cursor = query.get("cursor", "0")
    if not cursor.isdigit() or int(cursor) > len(items):
        raise ApiError(400, CODE_BAD_PARAMETER, "cursor is not one this API handed out")
    start = int(cursor)
    page = items[start : start + per_page]
    info: dict[str, Any] = {"count": len(page), "per_page": per_page}
    if start + per_page < len(items):
        info["cursor"] = str(start + per_page)
    return page, info


Handler = Callable[["FakeAgentMemory", dict[str, str], dict[str, Any], Any], tuple[int, dict]]
_HANDLERS: dict[str, Handler] = {}


def _handles(operation_id: str) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        _HANDLERS[operation_id] = fn
        return fn

    return register


def _ok(result: Any, status: int = 200, info: dict[str, Any] | None = None) -> tuple[int, dict]:
    envelope = {"success": True, "errors": [], "messages": [], "result": result}
    if info is not None:
        envelope["result_info"] = info
    return status, envelope


@_handles("agent-memory-namespace-list")
def _namespace_list(fake: FakeAgentMemory, p: dict, q: dict, body: Any) -> tuple[int, dict]:
    spaces = list(fake._store.accounts.get(p["account_id"], {}).values())
    key = q.get("order", "id")
    spaces.sort(key=lambda ns: getattr(ns, key), reverse=q.get("direction") == "desc")
    page, info = _page(q, [ns.public() for ns in spaces])
    return _ok(page, info=info)


@_handles("agent-memory-namespace-create")
def _namespace_create(fake: FakeAgentMemory, p: dict, q: dict, body: Any) -> tuple[int, dict]:
    return _ok(fake._store.create_namespace(p["account_id"], body["name"]).public(), 201)


@_handles("agent-memory-namespace-get")
def _namespace_get(fake: FakeAgentMemory, p: dict, q: dict, body: Any) -> tuple[int, dict]:
    return _ok(fake._store.namespace(p["account_id"], p["namespace_name"]).public())


@_handles("agent-memory-namespace-delete")
def _namespace_delete(fake: FakeAgentMemory, p: dict, q: dict, body: Any) -> tuple[int, dict]:
    fake._store.namespace(p["account_id"], p["namespace_name"])
    del fake._store.accounts[p["account_id"]][p["namespace_name"]]
    return _ok(None)


@_handles("agent-memory-profile-list")
def _profile_list(fake: FakeAgentMemory, p: dict, q: dict, body: Any) -> tuple[int, dict]:
    ns = fake._store.namespace(p["account_id"], p["namespace_name"])
    items = [{"name": name, "createdAt": CLOCK} for name in sorted(ns.profiles)]
    page, info = _page(q, items)
    return _ok(page, info=info)


@_handles("agent-memory-profile-delete")
def _profile_delete(fake: FakeAgentMemory, p: dict, q: dict, body: Any) -> tuple[int, dict]:
    fake._store.profile(p["account_id"], p["namespace_name"], p["profile_name"])
    del fake._store.namespace(p["account_id"], p["namespace_name"]).profiles[p["profile_name"]]
    return _ok(None)


@_handles("agent-memory-ingest")
def _ingest(fake: FakeAgentMemory, p: dict, q: dict, body: Any) -> tuple[int, dict]:
    # Upstream a model extracts memories from the conversation; the fake keeps each user
    # message as one event, which is deterministic and enough to recall it later.
    store = fake._store
    profile = store.profile(p["account_id"], p["namespace_name"], p["profile_name"], create=True)
    session = body.get("sessionId")
    if session is not None:
        profile.sessions.add(session)
    for message in body["messages"]:
        if message["role"] == "user":
            store.add_memory(profile, "event", message["content"], session)
    return _ok(None)


@_handles("agent-memory-memory-list")
def _memory_list(fake: FakeAgentMemory, p: dict, q: dict, body: Any) -> tuple[int, dict]:
    profile = fake._store.profile(p["account_id"], p["namespace_name"], p["profile_name"])
    items = [
        m.metadata()
        for m in profile.memories.values()
        if q.get("session_id", m.session_id) == m.session_id and q.get("type", m.type) == m.type
    ]
    page, info = _page(q, items)
    return _ok(page, info=info)


def _memory(fake: FakeAgentMemory, p: dict) -> tuple[Profile, Memory]:
    profile = fake._store.profile(p["account_id"], p["namespace_name"], p["profile_name"])
    memory = profile.memories.get(p["memory_id"])
    if memory is None:
        raise ApiError(404, CODE_NOT_FOUND, "memory not found")
    return profile, memory


@_handles("agent-memory-memory-get")
def _memory_get(fake: FakeAgentMemory, p: dict, q: dict, body: Any) -> tuple[int, dict]:
    return _ok(_memory(fake, p)[1].full())


@_handles("agent-memory-memory-delete")
def _memory_delete(fake: FakeAgentMemory, p: dict, q: dict, body: Any) -> tuple[int, dict]:
    profile, memory = _memory(fake, p)
    del profile.memories[memory.id]
    return _ok(memory.full())


@_handles("agent-memory-remember")
def _remember(fake: FakeAgentMemory, p: dict, q: dict, body: Any) -> tuple[int, dict]:
    store = fake._store
    profile = store.profile(p["account_id"], p["namespace_name"], p["profile_name"], create=True)
    memory = store.add_memory(profile, "fact", body["content"], body.get("sessionId"))
    return _ok(memory.full())


@_handles("agent-memory-recall")
def _recall(fake: FakeAgentMemory, p: dict, q: dict, body: Any) -> tuple[int, dict]:
    profile = fake._store.profile(p["account_id"], p["namespace_name"], p["profile_name"])
    query = terms(body["query"])
    scored = [(recall_score(query, m.terms), m) for m in profile.memories.values()]
    # sorted() is stable and the memories are in creation order, so ties go to the older.
    ranked = sorted(((s, m) for s, m in scored if s > 0), key=lambda pair: -pair[0])
    result: dict[str, Any] = {}
    if ranked:
        result["answer"] = ranked[0][1].content
    result["candidates"] = [
        {"id": m.id, "summary": m.content, "sessionId": m.session_id, "score": s} for s, m in ranked
    ]
    result["count"] = len(ranked)
    return _ok(result)


@_handles("agent-memory-session-delete")
def _session_delete(fake: FakeAgentMemory, p: dict, q: dict, body: Any) -> tuple[int, dict]:
    profile = fake._store.profile(p["account_id"], p["namespace_name"], p["profile_name"])
    session = p["session_id"]
    if session not in profile.sessions:
        raise ApiError(404, CODE_NOT_FOUND, "session not found")
    profile.sessions.discard(session)
    for memory_id in [m.id for m in profile.memories.values() if m.session_id == session]:
        del profile.memories[memory_id]
    return _ok(None)


@_handles("agent-memory-summary")
def _summary(fake: FakeAgentMemory, p: dict, q: dict, body: Any) -> tuple[int, dict]:
    profile = fake._store.profile(p["account_id"], p["namespace_name"], p["profile_name"])
    session = body.get("sessionId")
    if session is not None and session not in profile.sessions:
        raise ApiError(404, CODE_NOT_FOUND, "session not found")
    lines = [
        f"- {m.content}"
        for m in profile.memories.values()
        if session is None or m.session_id == session
    ]
    return _ok({"summary": "\n".join(lines) if lines else "Nothing is stored in this profile."})


class FakeAgentMemory(LoopbackServer):
    """The fake API: state, request log and a loopback HTTP server around `handle`.

    Use it in-process (`with FakeAgentMemory(token) as api: ... api.url ... api.requests`)
    or standalone (`python -m examples.memory_grant.fake --port 8787 --token TOKEN`).
    """

    thread_name = "fake-agent-memory"

    def __init__(
        self,
        token: str,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        namespaces: Iterable[tuple[str, str]] = DEFAULT_NAMESPACES,
        document: Path = DOCUMENT,
        on_request: Callable[[RecordedRequest], None] | None = None,
        check_responses: bool = True,
    ) -> None:
        super().__init__(token, host, port, on_request, check_responses)
        self.document = ApiDocument(document)
        self._store = _Store(namespaces)

    # -- one request -------------------------------------------------------------

    def handle(
        self,
        method: str,
        target: str,
        headers: dict[str, str] | Headers,
        body: bytes,
        refusal: Reply | None = None,
    ) -> Reply:
        """Answer one request and log it; independent of the HTTP server so it is testable.

        `refusal` is an answer the transport already decided (a body it would not read);
        it is still logged, so the log holds every request that arrived. Of a repeated
        header the last one counts, as in a dict of the request's headers.
        """
        named = dict(headers.items() if isinstance(headers, dict) else headers)
        auth = next((v for k, v in named.items() if k.lower() == "authorization"), None)
        carried = auth is not None and hmac.compare_digest(auth.encode(), self._expected)
        operation_id: str | None = None
        envelope: dict[str, Any] | None = None
        with self._lock:
            try:
                if refusal is not None:
                    reply = refusal
                elif auth is None or not auth.startswith("Bearer "):
                    error = ApiError(401, CODE_AUTH, "authentication required: no bearer token")
                    error.headers["WWW-Authenticate"] = 'Bearer realm="agent-memory"'
                    raise error
                elif not carried:
                    raise ApiError(403, CODE_AUTH, "authentication failed: unknown bearer token")
                else:
                    parts = urlsplit(target)
                    op, params = self.document.route(method, parts.path)
                    operation_id = op.operation_id
                    query = self._check_parameters(op, params, parts.query)
                    payload = self._check_body(op, body)
                    status, envelope = _HANDLERS[op.operation_id](self, params, query, payload)
                    reply = Reply(status, orjson.dumps(envelope) + b"\n")
            except ApiError as error:
                envelope = error.envelope()
                reply = Reply(error.status, orjson.dumps(envelope) + b"\n", error.headers)
            except Exception as error:  # a bug in the fake: answer, log, never hang the caller
                envelope = None
                reply = _plain_error(500, f"fake failed: {type(error).__name__}: {error}")
            if self._check_responses and operation_id is not None and envelope is not None:
                # Fail loudly rather than hand the client an answer the document forbids.
                problems = self.document.response_errors(operation_id, reply.status, envelope)
                if problems:
                    reply = _plain_error(500, f"fake answered outside the document: {problems[0]}")
            record = RecordedRequest(method, target, carried, reply.status, operation_id)
            self._log.append(record)
        if self._on_request is not None:
            self._on_request(record)
        return reply

    def _check_parameters(self, op: Operation, path: dict[str, str], raw_query: str) -> dict:
        query_values = {k: v[-1] for k, v in parse_qs(raw_query, keep_blank_values=True).items()}
        declared = {p["name"] for p, _ in op.parameters if p["in"] == "query"}
        for name in sorted(set(query_values) - declared):
            # A parameter the document does not declare is refused, not ignored: a client
            # sending one is talking to an API that does not exist (found by schemathesis).
            raise ApiError(400, CODE_BAD_PARAMETER, f"unknown query parameter {name!r}")
        query: dict[str, Any] = {}
        for param, schema_pointer in op.parameters:
            name, where, schema = param["name"], param["in"], param.get("schema", {})
            if where == "path":
                value: Any = path[name]
            elif where == "query" and name in query_values:
                value = query_values[name]
                if schema.get("type") == "integer":
                    if not re.fullmatch(r"-?\d{1,9}", value):
                        raise ApiError(400, CODE_BAD_PARAMETER, f"query {name} must be an integer")
                    value = int(value)
                query[name] = value
            else:
                continue
            error = best_match(self.document.validator(schema_pointer).iter_errors(value))
            if error is not None:
                raise ApiError(
                    400, CODE_BAD_PARAMETER, f"{where} parameter {name}: {error.message}"
                )
        return query

    def _check_body(self, op: Operation, body: bytes) -> Any:
        if op.body_pointer is None:
            return None
        if not body.strip():
            if op.body_required:
                raise ApiError(400, CODE_BAD_BODY, "request body is required")
            return None
        try:
            payload = orjson.loads(body)
        except orjson.JSONDecodeError:
            raise ApiError(400, CODE_BAD_BODY, "request body is not valid JSON") from None
        error: ValidationError | None = best_match(
            self.document.validator(op.body_pointer).iter_errors(payload)
        )
        if error is not None:
            at = list(error.absolute_path)
            if error.validator == "required" and isinstance(error.instance, dict):
                at += [n for n in error.validator_value if n not in error.instance][:1]
            pointer = _pointer(at)
            where = f" at {pointer}" if pointer else ""
            raise ApiError(
                400, CODE_BAD_BODY, f"request body{where}: {error.message}", pointer or None
            )
        return payload

    def transport_refusal(self, status: int, text: str) -> Reply:
        return _plain_error(status, text)


def _plain_error(status: int, message: str) -> Reply:
    return Reply(status, orjson.dumps(ApiError(status, status, message).envelope()) + b"\n")


def main(argv: list[str] | None = None) -> int:
    return serve(
        argv,
        make=FakeAgentMemory,
        prog="python -m examples.memory_grant.fake",
        api_name="Agent Memory",
        default_port=8787,
        token_env="CLOUDFLARE_API_TOKEN",
        banner_suffix=lambda api: api.document.prefix,
    )


if __name__ == "__main__":
    sys.exit(main())
