"""A stand-in for Stripe's Customers API on loopback, holding callers to Stripe's documented rules.

Routes, parameters and answers come from `stripe-customers.openapi.json` (cut from
APIs.guru's copy of Stripe's own `spec3`, see PROVENANCE.md). What the document cannot
say, the fake takes from Stripe's API reference (docs.stripe.com/api):

* Authentication (docs.stripe.com/api/authentication): the secret key as the Basic
  user with an empty password (`curl -u sk_test_...:`), or as `Bearer`. No key is a 401
  "You did not provide an API key..."; another key is a 401 "Invalid API Key provided"
  with the key masked, as Stripe masks it.
* Bodies are `application/x-www-form-urlencoded` with Stripe's brackets
  (docs.stripe.com/api/metadata, /api/expanding_objects): `metadata[plan]=pro`,
  `expand[]=tax`, `address[city]=Lisbon`. A JSON body is refused, an unknown parameter is
  "Received unknown parameter: NAME". Metadata holds at most 50 keys, each at most 40
  characters, values at most 500; an empty value unsets a key.
* `expand[]` names only fields the object marks expandable (`x-expandableFields`).
* Idempotency (docs.stripe.com/api/idempotent_requests): a POST with an
  `Idempotency-Key` saves its status and body; the same key with the same parameters
  gets the saved answer again (`Idempotent-Replayed: true`), with other parameters a 400
  of type `idempotency_error`.
* Lists (docs.stripe.com/api/pagination): `limit` 1-100, default 10, newest first;
  `starting_after` / `ending_before` take an object ID; the answer is
  `{"object": "list", "data", "has_more", "url"}`.
* Errors are `{"error": {"type", "message", "param"?, "code"?, "doc_url"?}}`: 400/404
  `invalid_request_error`, `resource_missing` for an unknown ID.

Deterministic: IDs `cus_fake000001`..., `created` is `CREATED`, request IDs count.
Implemented: create, list, retrieve, update and delete a customer; every other
operation of the document is routed, checked and answered 404 ("Unrecognized request
URL ...: not implemented by this fake").
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import orjson

from examples.kit.fakes.openapi import Document, Operation, Refusal
from examples.kit.loopback import Headers, LoopbackServer, RecordedRequest, Reply, serve

DOCUMENT = Path(__file__).with_name("stripe-customers.openapi.json")
CREATED = 1793880000  # 2026-11-05T12:00:00Z, the instant every example fake shows
DEFAULT_LIMIT, MAX_LIMIT = 10, 100
METADATA_KEYS, METADATA_KEY_LENGTH, METADATA_VALUE_LENGTH = 50, 40, 500
NO_KEY = (
    "You did not provide an API key. You need to provide your API key in the "
    "Authorization header, using Bearer auth (e.g. 'Authorization: Bearer "
    "YOUR_SECRET_KEY'). See https://stripe.com/docs/api#authentication for details, or "
    "we can help at https://support.stripe.com/."
)


class StripeError(Exception):
    def __init__(
        self,
        status: int,
        message: str,
        *,
        kind: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        error: dict[str, Any] = {"message": message, "type": kind}
        if param is not None:
            error["param"] = param
        if code is not None:
            error["code"] = code
            error["doc_url"] = f"https://stripe.com/docs/error-codes/{code.replace('_', '-')}"
        self.body = {"error": error}


def _missing(kind: str, ident: str, param: str = "id") -> StripeError:
    return StripeError(404, f"No such {kind}: {ident!r}", param=param, code="resource_missing")


class FakeStripe(LoopbackServer):
    """In-process: `with FakeStripe("sk_test_...") as api: ...`; standalone:
    `python -m examples.kit.fakes.stripe --port 8790 --token sk_test_...`."""

    thread_name = "fake-stripe"
    key_word = "secret key"

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
        basic = base64.b64encode(f"{token}:".encode()).decode()
        self._accepted = (f"Bearer {token}".encode(), f"Basic {basic}".encode())
        self._token = token
        self.document = Document(document, "urn:plimsoll:stripe-customers-openapi")
        self.customers: dict[str, dict[str, Any]] = {}
        self._next_id = 1
        self._requests = 0
        #: Idempotency-Key -> (method and path, parameters' fingerprint, saved reply).
        self._saved: dict[str, tuple[str, str, Reply]] = {}
        #: Every request's body as received, for the tests.
        self.bodies: list[bytes] = []

    def handle(
        self, method: str, target: str, headers: Headers, body: bytes, refusal: Reply | None
    ) -> Reply:
        pairs = {k.lower(): v for k, v in headers}
        auth = [v for k, v in headers if k.lower() == "authorization"]
        carried = len(auth) == 1 and any(
            hmac.compare_digest(auth[0].encode(), want) for want in self._accepted
        )
        op_id = None
        with self._lock:
            self.bodies.append(body)
            self._requests += 1
            try:
                if refusal is not None:  # already Stripe's error JSON (transport_refusal)
                    reply = refusal
                else:
                    reply, op_id = self._answer(method, target, pairs, auth, carried, body)
            except StripeError as error:
                reply = Reply(error.status, orjson.dumps(error.body))
            except Exception as error:  # a bug in the fake: answer, log, never hang
                reply = Reply(
                    500, orjson.dumps({"error": {"type": "api_error", "message": repr(error)}})
                )
            reply.headers.setdefault("Request-Id", f"req_fake{self._requests:06d}")
            record = RecordedRequest(method, target, carried, reply.status, op_id)
            self._log.append(record)
        if self._on_request is not None:
            self._on_request(record)
        return reply

    def _answer(
        self,
        method: str,
        target: str,
        headers: dict[str, str],
        auth: list[str],
        carried: bool,
        body: bytes,
    ) -> tuple[Reply, str | None]:
        if not auth:
            raise StripeError(401, NO_KEY)
        if not carried:
            scheme, _, shown = auth[0].partition(" ")
            if scheme == "Basic":
                with contextlib.suppress(ValueError):
                    shown = base64.b64decode(shown, validate=True).decode().split(":", 1)[0]
            raise StripeError(401, f"Invalid API Key provided: {shown[:8]}****{shown[-4:]}")
        parts = urlsplit(target)
        try:
            op, params = self.document.route(method, parts.path)
        except Refusal:
            raise StripeError(404, f"Unrecognized request URL ({method}: {parts.path}).") from None
        args = self._arguments(op, parts.query, headers.get("content-type"), body)
        key = headers.get("idempotency-key")
        if method == "POST" and key is not None:
            where = f"{method} {parts.path}"
            fingerprint = hashlib.sha256(
                orjson.dumps(args, option=orjson.OPT_SORT_KEYS)
            ).hexdigest()
            saved = self._saved.get(key)
            if saved is not None:
                if saved[:2] != (where, fingerprint):
                    raise StripeError(
                        400,
                        "Keys for idempotent requests can only be used with the same "
                        "parameters they were first used with. Try using a key other than "
                        f"{key!r} if you meant to execute a different request.",
                        kind="idempotency_error",
                    )
                reply = saved[2]
                return Reply(
                    reply.status, reply.body, {**reply.headers, "Idempotent-Replayed": "true"}
                ), op.operation_id
        try:
            status, payload = self._operate(op, params, args)
        except StripeError as error:
            status, payload = error.status, error.body
        if self._check_responses:
            problem = self.document.response_problem(op, status, payload)
            if problem:
                status = 500
                payload = {
                    "error": {
                        "type": "api_error",
                        "message": f"fake answered outside the document: {problem}",
                    }
                }
        reply = Reply(status, orjson.dumps(payload), {"Stripe-Version": "2025-09-30.clover"})
        if method == "POST" and key is not None:
            reply.headers["Idempotency-Key"] = key
            self._saved[key] = (f"{method} {parts.path}", fingerprint, reply)
        return reply, op.operation_id

    def _arguments(
        self, op: Operation, query: str, content_type: str | None, body: bytes
    ) -> dict[str, Any]:
        """The request's parameters: the query for a GET/DELETE, the form for a POST."""
        try:
            args = self.document.query(op, query, unknown_ok=False)
            if body:
                media = (content_type or "").split(";", 1)[0].strip().lower()
                if media != "application/x-www-form-urlencoded":
                    raise StripeError(
                        400,
                        "Invalid request: the body must be application/x-www-form-urlencoded "
                        "(https://docs.stripe.com/api).",
                    )
                args |= self.document.body(op, media, body) or {}
        except Refusal as refused:
            param = refused.name
            message = refused.message
            if "was unexpected" in message or message.startswith("unknown query parameter"):
                param = message.split("'")[1]
                message = f"Received unknown parameter: {param}"
            elif param:
                message = f"Invalid {param}: {message}"
            raise StripeError(400, message, param=param) from None
        self._check_metadata(args.get("metadata"))
        return args

    @staticmethod
    def _check_metadata(metadata: Any) -> None:
        if not isinstance(metadata, dict):
            return
        if len(metadata) > METADATA_KEYS:
            raise StripeError(
                400, f"Invalid metadata: at most {METADATA_KEYS} keys", param="metadata"
            )
        for k, v in metadata.items():
            if len(k) > METADATA_KEY_LENGTH:
                raise StripeError(
                    400,
                    f"Invalid metadata: keys can be at most {METADATA_KEY_LENGTH} characters",
                    param=f"metadata[{k[:40]}]",
                )
            if len(v) > METADATA_VALUE_LENGTH:
                raise StripeError(
                    400,
                    f"Invalid metadata: values can be at most {METADATA_VALUE_LENGTH} characters",
                    param=f"metadata[{k}]",
                )

    def _expand(self, args: dict[str, Any]) -> None:
        expandable = self.document.doc["components"]["schemas"]["customer"].get(
            "x-expandableFields", []
        )
        for name in args.get("expand", []):
            head = name.removeprefix("data.")
            if head.split(".", 1)[0] not in expandable:
                raise StripeError(
                    400, f"This property cannot be expanded ({name}).", param="expand"
                )

    def _operate(
        self, op: Operation, params: dict[str, Any], args: dict[str, Any]
    ) -> tuple[int, Any]:
        name = op.operation_id
        self._expand(args)
        if name == "PostCustomers":
            ident = f"cus_fake{self._next_id:06d}"
            self._next_id += 1
            customer = {
                "id": ident,
                "object": "customer",
                "created": CREATED,
                "livemode": False,
                "metadata": {},
                "email": None,
                "name": None,
                "description": None,
                "phone": None,
                "balance": 0,
                "currency": None,
                "delinquent": False,
                "invoice_prefix": f"FAKE{self._next_id - 1:04d}",
            }
            self.customers[ident] = customer
            self._update(customer, args)
            return 200, customer
        if name == "GetCustomers":
            return 200, self._list(args)
        if name in ("GetCustomersCustomer", "PostCustomersCustomer", "DeleteCustomersCustomer"):
            customer = self.customers.get(params["customer"])
            if customer is None:
                raise _missing("customer", params["customer"])
            if name == "PostCustomersCustomer":
                self._update(customer, args)
            if name == "DeleteCustomersCustomer":
                del self.customers[customer["id"]]
                return 200, {"id": customer["id"], "object": "customer", "deleted": True}
            return 200, customer
        raise StripeError(
            404,
            f"Unrecognized request URL ({op.method}: {op.template}): not implemented by this fake.",
        )

    @staticmethod
    def _update(customer: dict[str, Any], args: dict[str, Any]) -> None:
        for field in ("email", "name", "description", "phone", "balance"):
            if field in args:
                customer[field] = args[field] if args[field] != "" else None
        metadata = args.get("metadata")
        if metadata == "":
            customer["metadata"] = {}
        elif isinstance(metadata, dict):
            for k, v in metadata.items():
                if v == "":
                    customer["metadata"].pop(k, None)
                else:
                    customer["metadata"][k] = v

    def _list(self, args: dict[str, Any]) -> dict[str, Any]:
        limit = args.get("limit", DEFAULT_LIMIT)
        if not 1 <= limit <= MAX_LIMIT:
            raise StripeError(400, f"This value must be between 1 and {MAX_LIMIT}.", param="limit")
        items = sorted(self.customers.values(), key=lambda c: c["id"], reverse=True)
        if "email" in args:
            items = [c for c in items if c["email"] == args["email"]]
        ids = [c["id"] for c in items]
        if "starting_after" in args:
            cursor = args["starting_after"]
            if cursor not in ids:
                raise _missing("customer", cursor, "starting_after")
            items = items[ids.index(cursor) + 1 :]
            page, more = items[:limit], len(items) > limit
        elif "ending_before" in args:
            cursor = args["ending_before"]
            if cursor not in ids:
                raise _missing("customer", cursor, "ending_before")
            items = items[: ids.index(cursor)]
            page, more = items[-limit:], len(items) > limit
        else:
            page, more = items[:limit], len(items) > limit
        return {"object": "list", "data": page, "has_more": more, "url": "/v1/customers"}

    def transport_refusal(self, status: int, text: str) -> Reply:
        return Reply(status, orjson.dumps(StripeError(status, text).body))


def main(argv: list[str] | None = None) -> int:
    return serve(
        argv,
        make=FakeStripe,
        prog="python -m examples.kit.fakes.stripe",
        api_name="Stripe",
        default_port=8790,
        token_env="STRIPE_SECRET_KEY",
    )


if __name__ == "__main__":
    sys.exit(main())
