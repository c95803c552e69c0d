"""A stand-in for three Slack Web API methods on loopback, holding callers to Slack's rules.

Methods and answers come from `slack-conversations.openapi.json` (cut from APIs.guru's
copy of `slackapi/slack-api-specs`, see PROVENANCE.md). Slack's documentation
(docs.slack.dev/apis/web-api) adds what the document cannot say:

* The token travels as `Authorization: Bearer xoxb-...` (or, in a form POST, as the
  `token` field). A token in the query string is not accepted (Slack stopped taking
  them for apps created after 2021-02-24). Without one the answer is
  `{"ok": false, "error": "not_authed"}`, with another `invalid_auth`: HTTP 200 both,
  as every Slack error is (docs.slack.dev/apis/web-api/#responses).
* POST bodies are `application/x-www-form-urlencoded` (the document's) or JSON
  (`application/json; charset=utf-8`, docs.slack.dev/apis/web-api/#posting-json).
* `chat.postMessage` needs a `channel` (an ID or a name) and one of `text`, `blocks`
  or `attachments` (`no_text`); an unknown channel is `channel_not_found`, one the bot
  is not in is `not_in_channel`, text over 40,000 characters is `msg_too_long`.
* `conversations.list` and `conversations.history` page with `limit` and `cursor`;
  `response_metadata.next_cursor` names the next page and is "" on the last
  (docs.slack.dev/apis/web-api/pagination). An unknown cursor is `invalid_cursor`.

Where the 2021 document and Slack's documentation disagree, the fake answers as Slack
documents, and `DEVIATIONS` says where: every error is HTTP 200 (the document files it
under `default`), `conversations.history` carries `response_metadata` (the document's
schema forbids any property it does not list), and `invalid_cursor` and `invalid_arguments` are not in
the document's error enums. The schemathesis check knows these and nothing else.

Deterministic: the channels, members and messages are fixed; new messages take
timestamps from a counter after `CLOCK`.
"""

from __future__ import annotations

import base64
import hmac
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

import orjson

from examples.kit.fakes.openapi import Document, Operation, Refusal
from examples.kit.loopback import Headers, LoopbackServer, RecordedRequest, Reply, serve

DOCUMENT = Path(__file__).with_name("slack-conversations.openapi.json")
CLOCK = 1793880000  # 2026-11-05T12:00:00Z, the instant every example fake shows
TEAM, BOT_USER, BOT_ID = "T0FAKETEAM", "U0FAKEBOT", "B0FAKEBOT"
MAX_TEXT = 40000
FORM = "application/x-www-form-urlencoded"
LIST_LIMIT, HISTORY_LIMIT = 1000, 999
DEFAULT_LIMIT = 100
#: Where the fake answers as Slack documents rather than as the document says.
DEVIATIONS = {
    "errors-at-200": "every ok:false answer is HTTP 200 (the document: `default`)",
    "history-response-metadata": "conversations.history carries response_metadata",
    "undocumented-errors": "invalid_cursor and invalid_arguments (Slack's common error for"
    " an argument of the wrong type) are not in the document's error enums",
}
#: Errors Slack documents that the document's enums lack.
UNDOCUMENTED_ERRORS = frozenset({"invalid_cursor", "invalid_arguments"})


class SlackError(Exception):
    def __init__(self, error: str) -> None:
        super().__init__(error)
        self.error = error


@dataclass
class Channel:
    id: str
    name: str
    member: bool
    private: bool = False
    messages: list[dict[str, Any]] = field(default_factory=list)

    def public(self) -> dict[str, Any]:
        text = {"value": "", "creator": "", "last_set": 0}
        return {
            "id": self.id,
            "name": self.name,
            "name_normalized": self.name,
            "created": CLOCK - 86400,
            "creator": "U0FAKEOWNR",
            "is_archived": False,
            "is_channel": not self.private,
            "is_group": self.private,
            "is_general": self.name == "general",
            "is_im": False,
            "is_mpim": False,
            "is_org_shared": False,
            "is_shared": False,
            "is_private": self.private,
            "is_member": self.member,
            "topic": dict(text),
            "purpose": dict(text),
            "num_members": 3,
        }


#: (id, name, is the bot a member, how many messages it starts with)
CHANNELS = (
    ("C0FAKE0001", "general", True, 5),
    ("C0FAKE0002", "random", False, 1),
    ("C0FAKE0003", "triage", True, 2),
    ("G0FAKE0004", "ops-private", True, 1),
)


def _form_token(body: bytes) -> str | None:
    """The `token` field of a form body, the one other place Slack takes the token."""
    fields = dict(parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))
    return fields.get("token")


def _ts(n: int) -> str:
    return f"{CLOCK + n}.000100"


def cursor_for(kind: str, value: str) -> str:
    """A cursor as Slack's look: base64 of `kind:value` (`dXNlcjpVMDYxTkZUVDI=`)."""
    return base64.b64encode(f"{kind}:{value}".encode()).decode()


def _read_cursor(cursor: str, kind: str) -> str:
    try:
        text = base64.b64decode(cursor, validate=True).decode()
    except ValueError:
        raise SlackError("invalid_cursor") from None
    prefix = kind + ":"
    if not text.startswith(prefix):
        raise SlackError("invalid_cursor")
    return text[len(prefix) :]


class FakeSlack(LoopbackServer):
    """In-process: `with FakeSlack("xoxb-...") as api: ...`; standalone:
    `python -m examples.kit.fakes.slack --port 8791 --token xoxb-...`."""

    thread_name = "fake-slack"
    key_word = "bot token"

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
        self._token = token
        self.document = Document(document, "urn:plimsoll:slack-openapi")
        self.channels: dict[str, Channel] = {}
        self._clock = 0
        for ident, name, member, count in CHANNELS:
            channel = Channel(ident, name, member, private=ident.startswith("G"))
            for i in range(count):
                self._post(channel, f"{name} message {i + 1}")
            self.channels[ident] = channel

    def _post(self, channel: Channel, text: str) -> dict[str, Any]:
        self._clock += 1
        message = {
            "type": "message",
            "user": BOT_USER,
            "bot_id": BOT_ID,
            "text": text,
            "ts": _ts(self._clock),
            "team": TEAM,
        }
        channel.messages.append(message)
        return message

    def handle(
        self, method: str, target: str, headers: Headers, body: bytes, refusal: Reply | None
    ) -> Reply:
        lower = {k.lower(): v for k, v in headers}
        auth = [v for k, v in headers if k.lower() == "authorization"]
        carried = len(auth) == 1 and hmac.compare_digest(auth[0].encode(), self._expected)
        op_id = None
        status = 200
        with self._lock:
            try:
                if refusal is not None:
                    return self._log_reply(method, target, carried, None, refusal)
                parts = urlsplit(target)
                op, _ = self.document.route(method, parts.path)
                op_id = op.operation_id
                media = (lower.get("content-type") or "").split(";", 1)[0].strip().lower()
                body_token = _form_token(body) if media == FORM and method == "POST" else None
                self._authenticate(auth, body_token)
                carried = carried or body_token is not None
                args = self._arguments(op, parts.query, media, body)
                payload = self._operate(op, args)
            except SlackError as error:
                payload = {"ok": False, "error": error.error}
            except Refusal as refused:
                if refused.kind in ("route", "method"):
                    status, payload = 404, None  # a method the document lacks: a bare 404
                else:
                    payload = {"ok": False, "error": "invalid_arguments"}
                    if refused.kind == "body":
                        payload["error"] = "invalid_form_data"
            except Exception as error:  # a bug in the fake: answer, log, never hang
                status, payload = 500, {"ok": False, "error": f"fake failed: {error!r}"}
            if self._check_responses and op_id is not None and status == 200:
                problem = self.response_problem(self.document.operation(op_id), payload)
                if problem:
                    status = 500
                    payload = {
                        "ok": False,
                        "error": f"fake answered outside the document: {problem}",
                    }
            raw = orjson.dumps(payload) if payload is not None else b"404 Not Found"
            headers_out = {} if payload is not None else {"Content-Type": "text/plain"}
            if payload is not None:
                headers_out["Content-Type"] = "application/json; charset=utf-8"
            return self._log_reply(method, target, carried, op_id, Reply(status, raw, headers_out))

    def _log_reply(
        self, method: str, target: str, carried: bool, op_id: str | None, reply: Reply
    ) -> Reply:
        record = RecordedRequest(method, target, carried, reply.status, op_id)
        self._log.append(record)
        if self._on_request is not None:
            self._on_request(record)
        return reply

    def response_problem(self, op: Operation, payload: Any) -> str | None:
        """Check an answer against the document, allowing only `DEVIATIONS`: an ok:false
        answer against the `default` schema, history's `response_metadata` set aside."""
        if not isinstance(payload, dict):
            return "not an object"
        if payload.get("ok") is False:
            if payload.get("error") in UNDOCUMENTED_ERRORS:
                return None
            pointer = op.responses["default"]
        else:
            pointer = op.responses["200"]
            if op.operation_id == "conversations_history" and "response_metadata" in payload:
                meta = payload["response_metadata"]
                if not (isinstance(meta, dict) and isinstance(meta.get("next_cursor"), str)):
                    return "response_metadata without a next_cursor"
                payload = {k: v for k, v in payload.items() if k != "response_metadata"}
        assert pointer is not None
        errors = list(self.document.validator(pointer).iter_errors(payload))
        return errors[0].message if errors else None

    def _arguments(self, op: Operation, query: str, media: str, body: bytes) -> dict[str, Any]:
        """The method's arguments, from the query, a form or JSON."""
        args = self.document.query(op, query, unknown_ok=True)
        args.pop("token", None)  # query-string tokens are not accepted
        if op.method == "POST" and body:
            if media == "application/json":
                try:
                    data = orjson.loads(body)
                except orjson.JSONDecodeError:
                    raise SlackError("invalid_json") from None
                if not isinstance(data, dict):
                    raise SlackError("json_not_object")
            elif media == FORM:
                fields = parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True)
                kept = urlencode([(k, v) for k, v in fields if k != "token"]).encode()
                data = self.document.body(op, media, kept) or {}
            else:
                raise SlackError("invalid_post_type")
            pointer = op.bodies[FORM]
            schema = self.document.schema_at(pointer)
            for name, value in data.items():
                want = schema.get("properties", {}).get(name, {}).get("type")
                if want == "string" and not isinstance(value, str):
                    data[name] = orjson.dumps(value).decode()  # blocks/attachments as JSON
            if "channel" not in data:
                raise SlackError("channel_not_found")
            args |= data
        return args

    def _authenticate(self, auth: list[str], body_token: str | None) -> None:
        if not auth and body_token is None:
            raise SlackError("not_authed")
        if auth:
            ok = len(auth) == 1 and hmac.compare_digest(auth[0].encode(), self._expected)
        else:
            ok = hmac.compare_digest((body_token or "").encode(), self._token.encode())
        if not ok:
            raise SlackError("invalid_auth")

    def _channel(self, ref: Any) -> Channel:
        if not isinstance(ref, str) or not ref:
            raise SlackError("channel_not_found")
        name = ref.removeprefix("#")
        for channel in self.channels.values():
            if ref == channel.id or name == channel.name:
                return channel
        raise SlackError("channel_not_found")

    def _operate(self, op: Operation, args: dict[str, Any]) -> dict[str, Any]:
        if op.operation_id == "chat_postMessage":
            channel = self._channel(args.get("channel"))
            text = args.get("text", "")
            if not (text or args.get("blocks") or args.get("attachments")):
                raise SlackError("no_text")
            if len(text) > MAX_TEXT:
                raise SlackError("msg_too_long")
            if not channel.member:
                raise SlackError("not_in_channel")
            message = self._post(channel, text)
            return {"ok": True, "channel": channel.id, "ts": message["ts"], "message": message}
        if op.operation_id == "conversations_list":
            items = list(self.channels.values())  # none is archived: exclude_archived is moot
            types = set((args.get("types") or "public_channel").split(","))
            items = [
                c for c in items if ("private_channel" if c.private else "public_channel") in types
            ]
            page, more = self._page(args, items, "channel", lambda c: c.id, LIST_LIMIT)
            return {
                "ok": True,
                "channels": [c.public() for c in page],
                "response_metadata": {"next_cursor": more},
            }
        if op.operation_id == "conversations_history":
            channel = self._channel(args.get("channel"))
            if not channel.member and channel.private:
                raise SlackError("channel_not_found")
            newest_first = list(reversed(channel.messages))
            page, more = self._page(args, newest_first, "next_ts", lambda m: m["ts"], HISTORY_LIMIT)
            answer: dict[str, Any] = {
                "ok": True,
                "messages": page,
                "has_more": bool(more),
                "pin_count": 0,
                "channel_actions_ts": [],
                "channel_actions_count": 0,
            }
            if more:
                answer["response_metadata"] = {"next_cursor": more}
            return answer
        raise SlackError("unknown_method")

    @staticmethod
    def _page(
        args: dict[str, Any],
        items: list[Any],
        kind: str,
        key: Callable[[Any], str],
        most: int,
    ) -> tuple[list[Any], str]:
        """One page from `cursor` and `limit`, and the next page's cursor ("" at the end)."""
        limit = args.get("limit") or DEFAULT_LIMIT
        limit = min(max(limit, 1), most)
        start = 0
        if args.get("cursor"):
            at = _read_cursor(args["cursor"], kind)
            keys = [key(item) for item in items]
            if at not in keys:
                raise SlackError("invalid_cursor")
            start = keys.index(at)
        page = items[start : start + limit]
        rest = items[start + limit :]
        return page, cursor_for(kind, key(rest[0])) if rest else ""

    def transport_refusal(self, status: int, text: str) -> Reply:
        return Reply(status, text.encode(), {"Content-Type": "text/plain"})


def main(argv: list[str] | None = None) -> int:
    return serve(
        argv,
        make=FakeSlack,
        prog="python -m examples.kit.fakes.slack",
        api_name="Slack Web",
        default_port=8791,
        token_env="SLACK_BOT_TOKEN",
    )


if __name__ == "__main__":
    sys.exit(main())
