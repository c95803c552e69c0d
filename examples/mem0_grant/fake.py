"""A stand-in for the Mem0 Platform API on loopback, built from its OpenAPI document.

Why a fake: as in `examples.memory_grant`, the example must show the broker holding the
key with no account, no network and output that never changes. The fake takes its
routes, every request check and the shape of every answer from `mem0.openapi.json`,
the document specgen reads, so the client cannot talk to an API the document does not
describe without the fake saying so.

What it checks, before any operation runs:

* `Authorization: Token <key>`, Mem0's scheme. The document only declares an apiKey
  header named `Authorization` and puts the `Token ` prefix in prose; the fake holds the
  prose to it: `Bearer <key>` or a bare key is a 401, as upstream.
* Trailing slashes: every path of the document ends in `/`, and `/v1/memories` is not
  `/v1/memories/` (404, naming the slash), so a client that drops it is caught.
* Query parameters against the document: an undeclared name, a repeated scalar, a
  value that is not its schema's type, or a value outside the schema is a 400; arrays
  travel as repeated names (OpenAPI's default `form` style), `metadata` as
  `metadata[key]=value` (its declared `deepObject`).
* The JSON body against the operation's request schema (400 with the first error).

Every answer of a documented status is validated against that status's schema before
it leaves; a fake that drifted from the document answers 500 instead of lying.

Deliberate choices, so that a run is byte-for-byte repeatable:

* IDs are UUIDs from counters: memories `6d656d30-0000-4000-8000-<12 digits>` ("mem0" in
  hex), events `6576656e-0000-4000-8000-<12 digits>`.
* The clock is stopped at `CLOCK`.
* "Inference" keeps each `user` message of an add as one memory, verbatim; the add is
  processed at once, so its event is `SUCCEEDED` by the time it can be read.
* Search is a word match (the same `terms` and score as the memory-grant fake), not an
  embedding; ties go to the older memory. A query sharing no word finds nothing.
* Pagination links carry the public origin `https://api.mem0.ai`, not the loopback
  port, so they do not change from run to run.
* Bodies are compact JSON plus one newline.

Implemented: add (`POST /v1/memories/`), list (`GET /v1/memories/`), search
(`POST /v2/memories/search/`), read and delete one memory, read an event, ping. Every
other operation of the document is routed and its request checked, then answered 404
("not implemented by this fake") so a caller can tell it from a wrong path.
"""

from __future__ import annotations

import hmac
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

import orjson
from jsonschema.exceptions import best_match

from examples.kit.loopback import Headers, LoopbackServer, RecordedRequest, Reply, serve
from examples.memory_grant.fake import ApiDocument, ApiError, Operation, recall_score, terms

DOCUMENT = Path(__file__).with_name("mem0.openapi.json")

#: The one instant the fake's clock shows.
CLOCK = "2026-11-05T12:00:00Z"
MEMORY_ID = "6d656d30-0000-4000-8000-{:012d}"
EVENT_ID = "6576656e-0000-4000-8000-{:012d}"
#: The origin pagination links name: the public API's, never the loopback port.
PUBLIC_ORIGIN = "https://api.mem0.ai"
ENTITY_KEYS = ("user_id", "agent_id", "app_id", "run_id")
DEFAULT_PAGE_SIZE = 100
DEFAULT_LIMIT = 100
#: What the fake's ping reports about the key's owner (made up, stable).
ORG_ID = "org-example"
PROJECT_ID = "proj-example"
USER_EMAIL = "operator@example.com"

_INT = re.compile(r"-?\d{1,9}\Z")
_DEEP = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\[([^\[\]]+)\]\Z")


class Mem0Error(Exception):
    """A refusal: `message`, answered in the shape the document gives the operation's
    `status` (see `FakeMem0._error_body`), or as `body` when one is given."""

    def __init__(self, status: int, message: str, body: Any = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.body = body


def _detail(status: int, text: str) -> Mem0Error:
    return Mem0Error(status, text)


def _error_candidates(message: str) -> list[Any]:
    """The error shapes the document uses, most common first; the first one valid
    against the operation's schema for the status is sent."""
    return [
        {"detail": message},
        {"error": message},
        {"message": message},
        {"error": "400 Bad Request", "details": {"message": message}},
        [message],
        {"errors": {"request": [message]}},
    ]


class Mem0Document(ApiDocument):
    """The Mem0 document as routes and validators (the memory-grant fake's reader)."""

    URI = "urn:plimsoll:mem0-openapi"


@dataclass
class Memory:
    id: str
    memory: str
    entities: dict[str, str | None]
    metadata: dict[str, Any] | None
    categories: list[str]
    terms: frozenset[str]

    def public(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "memory": self.memory,
            "user_id": self.entities.get("user_id"),
            "metadata": self.metadata,
            "categories": self.categories,
            "created_at": CLOCK,
            "updated_at": CLOCK,
        }


@dataclass
class Event:
    id: str
    payload: dict[str, Any]
    results: list[dict[str, Any]]


@dataclass
class _Store:
    memories: dict[str, Memory] = field(default_factory=dict)
    events: dict[str, Event] = field(default_factory=dict)
    memory_counter: int = 0
    event_counter: int = 0


Handler = Callable[["FakeMem0", dict[str, str], dict[str, Any], Any], tuple[int, Any]]
_HANDLERS: dict[str, Handler] = {}


def _handles(operation_id: str) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        _HANDLERS[operation_id] = fn
        return fn

    return register


def _matches(memory: Memory, filters: dict[str, Any]) -> bool:
    """Whether a memory passes a filter object: entity IDs equal (or `in`/`ne`), every
    given metadata key equal, categories sharing one of `in`, keywords contained."""
    for key, want in filters.items():
        if key in ENTITY_KEYS:
            have = memory.entities.get(key)
            if isinstance(want, dict):
                if "in" in want and have not in want["in"]:
                    return False
                if "ne" in want and have == want["ne"]:
                    return False
            elif have != want:
                return False
        elif key == "metadata":
            meta = memory.metadata or {}
            if any(meta.get(k) != v for k, v in want.items()):
                return False
        elif key == "categories":
            wanted = want.get("in", []) if isinstance(want, dict) else want
            if wanted and not set(wanted) & set(memory.categories):
                return False
        elif key == "keywords":
            needle = want.get("icontains") or want.get("contains") or ""
            hay = memory.memory if "contains" in want else memory.memory.lower()
            if needle and (needle if "contains" in want else needle.lower()) not in hay:
                return False
    return True


def _scoped(filters: dict[str, Any]) -> bool:
    return any(filters.get(key) not in (None, "") for key in ENTITY_KEYS)


@_handles("memories_create")
def _add(fake: FakeMem0, p: dict, q: dict, body: Any) -> tuple[int, Any]:
    entities = {k: body.get(k) for k in ENTITY_KEYS if body.get(k)}
    if not entities:
        raise Mem0Error(400, "One of the filters: app_id, user_id, agent_id, run_id is required!")
    store = fake.store
    store.event_counter += 1
    event = Event(id=EVENT_ID.format(store.event_counter), payload=body, results=[])
    for message in body.get("messages") or []:
        if message.get("role") != "user" or not message.get("content"):
            continue
        store.memory_counter += 1
        memory = Memory(
            id=MEMORY_ID.format(store.memory_counter),
            memory=message["content"],
            entities=entities,
            metadata=body.get("metadata"),
            categories=[],
            terms=terms(message["content"]),
        )
        store.memories[memory.id] = memory
        event.results.append({"id": memory.id, "memory": memory.memory, "event": "ADD"})
    store.events[event.id] = event
    queued = {
        "message": "Memory processing has been queued for background execution",
        "status": "PENDING",
        "event_id": event.id,
    }
    return 200, [queued]


@_handles("event_read")
def _event(fake: FakeMem0, p: dict, q: dict, body: Any) -> tuple[int, Any]:
    event = fake.store.events.get(p["event_id"])
    if event is None:
        raise _detail(404, "Event not found.")
    return 200, {
        "id": event.id,
        "event_type": "ADD",
        "status": "SUCCEEDED",
        "payload": event.payload,
        "metadata": None,
        "results": event.results,
        "created_at": CLOCK,
        "updated_at": CLOCK,
        "started_at": CLOCK,
        "completed_at": CLOCK,
        "latency": 0,
        "graph_status": None,
        "error": None,
    }


@_handles("memories_list")
def _list(fake: FakeMem0, p: dict, q: dict, body: Any) -> tuple[int, Any]:
    filters = {k: q[k] for k in (*ENTITY_KEYS, "metadata", "categories") if k in q}
    if not _scoped(filters):
        raise Mem0Error(
            400,
            "One of the filters: app_id, user_id, agent_id, run_id is required!",
            ["One of the filters: app_id, user_id, agent_id, run_id is required!"],
        )
    if "keywords" in q:
        filters["keywords"] = {"icontains": q["keywords"]}
    items = [m.public() for m in fake.store.memories.values() if _matches(m, filters)]
    if "page" not in q or "page_size" not in q:
        limit = q.get("limit", DEFAULT_LIMIT)
        if limit < 1:
            raise Mem0Error(400, "limit must be >= 1", {"error": "limit must be >= 1"})
        return 200, items[:limit]
    page, size = q["page"], q["page_size"]
    if size < 1 or page < 1 or (page - 1) * size >= max(len(items), 1):
        raise _detail(404, "Invalid page.")
    base = {k: v for k, v in q.items() if k not in ("page", "page_size") and k != "metadata"}

    def link(number: int) -> str:
        query = urlencode({**base, "page": number, "page_size": size}, doseq=True)
        return f"{PUBLIC_ORIGIN}/v1/memories/?{query}"

    return 200, {
        "count": len(items),
        "next": link(page + 1) if page * size < len(items) else None,
        "previous": link(page - 1) if page > 1 else None,
        "results": items[(page - 1) * size : page * size],
    }


@_handles("memories_search_v2")
def _search(fake: FakeMem0, p: dict, q: dict, body: Any) -> tuple[int, Any]:
    filters = body["filters"]
    if not _scoped(filters):
        raise Mem0Error(
            400, "At least one of the filters: agent_id, user_id, app_id, run_id is required!"
        )
    query = terms(body["query"])
    threshold = body.get("threshold") or 0
    scored = [
        (recall_score(query, m.terms), m)
        for m in fake.store.memories.values()
        if _matches(m, filters)
    ]
    # sorted() is stable and memories are in creation order: ties go to the older.
    ranked = sorted(((s, m) for s, m in scored if s > 0 and s >= threshold), key=lambda x: -x[0])
    out = []
    for score, m in ranked[: max(body.get("top_k", 10), 0)]:
        item = m.public()
        item["user_id"] = m.entities.get("user_id") or ""
        item["score"] = score
        item["agent_id"] = m.entities.get("agent_id")
        item["app_id"] = m.entities.get("app_id")
        item["session_id"] = m.entities.get("run_id")
        out.append(item)
    return 200, out


def _memory(fake: FakeMem0, p: dict) -> Memory:
    memory = fake.store.memories.get(p["memory_id"])
    if memory is None:
        raise _detail(404, "Memory not found.")
    return memory


@_handles("memories_read")
def _read(fake: FakeMem0, p: dict, q: dict, body: Any) -> tuple[int, Any]:
    memory = _memory(fake, p)
    return 200, {**memory.public(), **{k: memory.entities.get(k) for k in ENTITY_KEYS}}


@_handles("memories_delete")
def _delete(fake: FakeMem0, p: dict, q: dict, body: Any) -> tuple[int, Any]:
    memory = _memory(fake, p)
    del fake.store.memories[memory.id]
    return 200, {"message": "Memory deleted successfully!"}


@_handles("ping_read")
def _ping(fake: FakeMem0, p: dict, q: dict, body: Any) -> tuple[int, Any]:
    return 200, {
        "status": "ok",
        "org_id": ORG_ID,
        "project_id": PROJECT_ID,
        "user_email": USER_EMAIL,
    }


class FakeMem0(LoopbackServer):
    """The fake API: state, request log and a loopback HTTP server around `handle`.

    In-process: `with FakeMem0(key) as api: ... api.url ... api.requests`; standalone:
    `python -m examples.mem0_grant.fake --port 8788 --token KEY`.
    """

    thread_name = "fake-mem0"
    scheme = "Token"
    key_word = "API key"

    def __init__(
        self,
        token: str,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        document: Path = DOCUMENT,
        on_request: Callable[[RecordedRequest], None] | None = None,
        check_responses: bool = True,
    ) -> None:
        super().__init__(token, host, port, on_request, check_responses)
        self.document = Mem0Document(document)
        self.store = _Store()

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

        `headers` may be a list of pairs, so a repeated `Authorization` is seen (and refused).
        """
        pairs = list(headers.items()) if isinstance(headers, dict) else list(headers)
        auth = [v for k, v in pairs if k.lower() == "authorization"]
        carried = len(auth) == 1 and hmac.compare_digest(auth[0].encode(), self._expected)
        operation_id: str | None = None
        status, payload = 500, None
        unsatisfiable = False
        with self._lock:
            try:
                if refusal is not None:
                    raise Mem0Error(refusal.status, refusal.body.decode())
                if len(auth) != 1 or not auth[0].startswith("Token "):
                    raise _detail(401, "Authentication credentials were not provided.")
                if not carried:
                    raise _detail(
                        401,
                        "Invalid API key. You can find your API key on https://app.mem0.ai/dashboard/api-keys.",
                    )
                parts = urlsplit(target)
                op, params = self._route(method, parts.path)
                operation_id = op.operation_id
                query = self._check_query(op, params, parts.query)
                data = self._check_body(op, body)
                handler = _HANDLERS.get(op.operation_id)
                if handler is None:
                    raise _detail(404, f"{op.operation_id} is not implemented by this fake.")
                status, payload = handler(self, params, query, data)
            except Mem0Error as error:
                status = error.status
                payload = error.body
                if payload is None:
                    payload, fits = self._error_body(operation_id, status, error.message)
                    # A status whose schema no body can satisfy is the document's fault,
                    # not the fake's: the refusal still goes out, not a 500.
                    unsatisfiable = not fits
            except Exception as error:  # a bug in the fake: answer, log, never hang
                status, payload = 500, {"detail": f"fake failed: {type(error).__name__}"}
            if self._check_responses and operation_id and status != 500 and not unsatisfiable:
                problem = self._response_problem(operation_id, status, payload)
                if problem:
                    status, payload = (
                        500,
                        {"detail": f"fake answered outside the document: {problem}"},
                    )
            reply = Reply(status, orjson.dumps(payload) + b"\n")
            if status == 401:
                reply.headers["WWW-Authenticate"] = 'Token realm="api"'
            record = RecordedRequest(method, target, carried, status, operation_id)
            self._log.append(record)
        if self._on_request is not None:
            self._on_request(record)
        return reply

    def _route(self, method: str, path: str) -> tuple[Operation, dict[str, str]]:
        try:
            return self.document.route(method, path)
        except ApiError as error:
            if error.status == 405:
                raise _detail(405, f'Method "{method}" not allowed.') from None
            if not path.endswith("/"):
                try:
                    self.document.route(method, path + "/")
                except ApiError:
                    pass
                else:
                    raise _detail(
                        404, f"Not found: this API's paths end in /; try {path}/"
                    ) from None
            raise _detail(404, "Not found.") from None

    def _error_body(self, operation_id: str | None, status: int, message: str) -> tuple[Any, bool]:
        """`message` in the first shape the document allows for this status of the
        operation, DRF's `{"detail": ...}` where the document says nothing; and whether
        the document admits any of the shapes (exports_create's 400 is a oneOf of two
        schemas every object satisfies at once, so it admits none)."""
        candidates = _error_candidates(message)
        if operation_id is None:
            return candidates[0], True
        op = self.document.operation(operation_id)
        key = op.response_key(status)
        if key is None:
            return candidates[0], True
        # Prefer the shape whose keys the schema names ({"error": ...} where it documents
        # "error"), not merely one it tolerates.
        named = self._property_names(op.response_pointers[key])
        ranked = sorted(
            candidates,
            key=lambda c: not (isinstance(c, dict) and set(c) <= named),
        )
        for candidate in ranked:
            if self._response_problem(operation_id, status, candidate) is None:
                return candidate, True
        return ranked[0], False

    def _property_names(self, pointer: str) -> set[str]:
        """Top-level property names of the schema at `pointer`, through oneOf/anyOf."""
        resolver = self.document.registry.resolver(self.document.URI)
        schema = resolver.lookup(f"{self.document.URI}#{pointer}").contents
        names: set[str] = set()
        for part in [schema, *schema.get("oneOf", []), *schema.get("anyOf", [])]:
            names |= set(part.get("properties", {})) if isinstance(part, dict) else set()
        return names

    def _response_problem(self, operation_id: str, status: int, payload: Any) -> str | None:
        """Why an answer contradicts the document; None when it is valid, or its status
        is one the document does not describe (a 401 or a refused body, say)."""
        op = self.document.operation(operation_id)
        if op.response_key(status) is None:
            return None
        problems = self.document.response_errors(operation_id, status, payload)
        return problems[0] if problems else None

    def _check_query(self, op: Operation, path: dict[str, str], raw: str) -> dict[str, Any]:
        declared = {p["name"]: (p, at) for p, at in op.parameters if p["in"] == "query"}
        pairs = parse_qsl(raw, keep_blank_values=True, strict_parsing=False)
        values: dict[str, list[str]] = {}
        deep: dict[str, dict[str, str]] = {}
        for name, value in pairs:
            nested = _DEEP.match(name)
            if nested and declared.get(nested[1], ({},))[0].get("style") == "deepObject":
                deep.setdefault(nested[1], {})[nested[2]] = value
                continue
            if name not in declared:
                raise _detail(400, f"unknown query parameter {name!r}")
            values.setdefault(name, []).append(value)
        query: dict[str, Any] = {}
        for name, (param, pointer) in declared.items():
            schema = param.get("schema", {})
            if name in deep:
                value: Any = deep[name]
            elif name not in values:
                if param.get("required"):
                    raise _detail(400, f"query parameter {name!r} is required")
                continue
            elif schema.get("type") == "array":
                value = values[name]
            elif len(values[name]) > 1:
                raise _detail(400, f"query parameter {name!r} given {len(values[name])} times")
            else:
                value = values[name][0]
                if schema.get("type") == "integer":
                    if not _INT.match(value):
                        raise _detail(400, f"query parameter {name!r} must be an integer")
                    value = int(value)
                elif schema.get("type") == "boolean":
                    if value not in ("true", "false"):
                        raise _detail(400, f"query parameter {name!r} must be true or false")
                    value = value == "true"
            error = best_match(self.document.validator(pointer).iter_errors(value))
            if error is not None:
                raise _detail(400, f"query parameter {name!r}: {error.message}")
            query[name] = value
        for param, pointer in op.parameters:
            if param["in"] == "path":
                error = best_match(
                    self.document.validator(pointer).iter_errors(path[param["name"]])
                )
                if error is not None:
                    raise _detail(400, f"path parameter {param['name']!r}: {error.message}")
        return query

    def _check_body(self, op: Operation, body: bytes) -> Any:
        if op.body_pointer is None:
            if body.strip():
                raise _detail(400, f"{op.method} {op.template} takes no body")
            return None
        if not body.strip():
            if op.body_required:
                raise _detail(400, "request body is required")
            return None
        try:
            payload = orjson.loads(body)
        except orjson.JSONDecodeError:
            raise _detail(400, "JSON parse error") from None
        error = best_match(self.document.validator(op.body_pointer).iter_errors(payload))
        if error is not None:
            where = "/".join(str(p) for p in error.absolute_path)
            raise _detail(400, f"request body{' at ' + where if where else ''}: {error.message}")
        return payload

    def transport_refusal(self, status: int, text: str) -> Reply:
        # Mem0's own words for an oversized body; the others have none to copy.
        return Reply(status, b"Request body too large." if status == 413 else text.encode())


def main(argv: list[str] | None = None) -> int:
    return serve(
        argv,
        make=FakeMem0,
        prog="python -m examples.mem0_grant.fake",
        api_name="Mem0 Platform",
        default_port=8788,
        token_env="MEM0_API_KEY",
    )


if __name__ == "__main__":
    sys.exit(main())
