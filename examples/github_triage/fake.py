"""A stand-in for GitHub's REST API (issues, comments, labels of one repository) on loopback.

Why a fake: the triage example must show the broker holding the token and sending what
GitHub requires, with no account, no network and output that never changes. Routes,
parameters and the shape of every answer come from `github-issues.openapi.json` (cut
from Octokit's copy of GitHub's own document, see PROVENANCE.md); the rules below come
from GitHub's REST documentation, so a client that only agrees with itself is caught:

* `User-Agent` is required: without one GitHub answers 403 with a plain-text body
  ("Request forbidden by administrative rules. Please make sure your request has a
  User-Agent header ..."; docs.github.com/en/rest/using-the-rest-api/getting-started-
  with-the-rest-api#user-agent, the text as GitHub sends it quoted in
  gitlab.com/gitlab-org/gitlab/-/merge_requests/43852).
* `Authorization: Bearer <token>` or `token <token>` (docs.github.com/en/rest/
  authentication/authenticating-to-the-rest-api). Without it: 401 `{"message":
  "Requires authentication", ...}`; with another token: 401 "Bad credentials". The fake's
  repository is private, so unlike a public one nothing is readable without a token.
* `X-GitHub-Api-Version`, when sent, must be a version GitHub supports; the fake knows
  `2022-11-28`, and anything else is GitHub's 400 (docs.github.com/en/rest/about-the-
  rest-api/api-versions).
* Lists page with `per_page` (default 30, at most 100) and `page` (default 1), and a
  `Link` header with `next`, `last`, `first` and `prev` as they apply, omitted when one
  page holds everything. Link URLs name the repository by ID (`/repositories/<id>/...`),
  as GitHub's own examples show (docs.github.com/en/rest/using-the-rest-api/using-
  pagination-in-the-rest-api): a client must read the page number, not replay the path.
* Every authenticated answer carries `X-RateLimit-Limit`, `-Remaining`, `-Reset`,
  `-Used` and `-Resource` (docs.github.com/en/rest/using-the-rest-api/rate-limits-for-
  the-rest-api); a 304 does not count against the limit.
* Every 200 to a GET carries an `ETag`; a GET whose `If-None-Match` names it gets 304
  with no body (docs.github.com/en/rest/using-the-rest-api/best-practices-for-using-
  the-rest-api#use-conditional-requests-if-appropriate).
* Creates answer 201 with `Location` (an issue comment, a repository label).
* Errors are GitHub's JSON: `{"message", "documentation_url", "status"}`; 404 "Not Found"
  for an unknown route, repository or issue (GitHub answers 404, not 405, for a method a
  path lacks); invalid JSON is 400 "Problems parsing JSON"; a body or query value its
  schema refuses is 422 "Invalid request." with the reason (docs.github.com/en/rest/
  using-the-rest-api/troubleshooting-the-rest-api).

Deliberate choices, so a run is repeatable: the clock is stopped at `CLOCK`, IDs come
from counters, ETags are a hash of the body, `X-RateLimit-Reset` is `RESET`.
Implemented: list/get issues, list/create issue comments, list/add/set labels on an
issue, list/get/create repository labels. Every other operation of the document is
routed and its request checked, then answered 404 "Not Found".
"""

from __future__ import annotations

import hashlib
import hmac
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

import orjson

from examples.kit.fakes.openapi import Document, Operation, Refusal
from examples.kit.loopback import Headers, LoopbackServer, RecordedRequest, Reply, serve

DOCUMENT = Path(__file__).with_name("github-issues.openapi.json")
PUBLIC_ORIGIN = "https://api.github.com"
OWNER, REPO, REPO_ID = "acme", "widgets", 700001
#: The account the token belongs to (it writes the comments).
BOT_LOGIN, BOT_ID = "acme-triage-bot", 900001
CLOCK = "2026-11-05T12:00:00Z"
RESET = 1793883600  # 2026-11-05T13:00:00Z: an hour after the clock, as an epoch second
RATE_LIMIT = 5000
API_VERSIONS = ("2022-11-28",)
DEFAULT_PER_PAGE, MAX_PER_PAGE = 30, 100
USER_AGENT_REFUSAL = (
    "Request forbidden by administrative rules. Please make sure your request has a "
    "User-Agent header (http://developer.github.com/v3/#user-agent-required). "
    "Check https://developer.github.com for other possible causes.\n"
)
DOCS = "https://docs.github.com/rest"

#: The repository's labels: (name, colour, description).
LABELS = (
    ("bug", "d73a4a", "Something isn't working"),
    ("enhancement", "a2eeef", "New feature or request"),
    ("triaged", "0e8a16", "Seen by the triage bot"),
)
#: The repository's issues at the start: (title, state, labels, author, comments by bot?).
ISSUES: tuple[tuple[str, str, tuple[str, ...], str, bool], ...] = (
    ("Crash when the config file is empty", "open", ("bug",), "ana", False),
    ("Add a dark theme", "open", ("enhancement",), "ben", False),
    ("Timeout on large uploads", "open", ("bug",), "chen", True),
    ("Typo in the README", "closed", ("bug",), "dana", False),
    ("Export fails for names with spaces", "open", ("bug",), "eli", False),
    ("Support YAML configs", "open", ("enhancement", "bug"), "fay", False),
    ("Login loop on Safari", "open", ("bug",), "gus", False),
    ("Progress bar stuck at 99%", "open", ("bug",), "hana", False),
)
#: The marker the triage bot leaves in its comments (the example looks for it).
BOT_MARKER = "<!-- triage-bot -->"


class GitHubError(Exception):
    def __init__(self, status: int, message: str, docs: str = DOCS, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.body = {"message": message, "documentation_url": docs, **extra}
        self.body["status"] = str(status)


def _user(login: str, uid: int, kind: str = "User") -> dict[str, Any]:
    base = f"{PUBLIC_ORIGIN}/users/{login}"
    return {
        "login": login,
        "id": uid,
        "node_id": f"U_fake{uid}",
        "avatar_url": f"https://avatars.githubusercontent.com/u/{uid}?v=4",
        "gravatar_id": "",
        "url": base,
        "html_url": f"https://github.com/{login}",
        "followers_url": f"{base}/followers",
        "following_url": f"{base}/following{{/other_user}}",
        "gists_url": f"{base}/gists{{/gist_id}}",
        "starred_url": f"{base}/starred{{/owner}}{{/repo}}",
        "subscriptions_url": f"{base}/subscriptions",
        "organizations_url": f"{base}/orgs",
        "repos_url": f"{base}/repos",
        "events_url": f"{base}/events{{/privacy}}",
        "received_events_url": f"{base}/received_events",
        "type": kind,
        "site_admin": False,
    }


@dataclass
class Label:
    id: int
    name: str
    color: str
    description: str | None

    def public(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "node_id": f"LA_fake{self.id}",
            "url": f"{PUBLIC_ORIGIN}/repos/{OWNER}/{REPO}/labels/{quote(self.name, safe='')}",
            "name": self.name,
            "description": self.description,
            "color": self.color,
            "default": self.name in ("bug", "enhancement"),
        }


@dataclass
class Comment:
    id: int
    issue: int
    body: str
    author: dict[str, Any]

    def public(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "node_id": f"IC_fake{self.id}",
            "url": f"{PUBLIC_ORIGIN}/repos/{OWNER}/{REPO}/issues/comments/{self.id}",
            "html_url": f"https://github.com/{OWNER}/{REPO}/issues/{self.issue}#issuecomment-{self.id}",
            "issue_url": f"{PUBLIC_ORIGIN}/repos/{OWNER}/{REPO}/issues/{self.issue}",
            "body": self.body,
            "user": self.author,
            "created_at": CLOCK,
            "updated_at": CLOCK,
            "author_association": "NONE" if self.author["type"] == "Bot" else "MEMBER",
        }


@dataclass
class Issue:
    number: int
    title: str
    state: str
    labels: list[str]
    author: dict[str, Any]
    comments: list[Comment] = field(default_factory=list)

    def public(self, store: _Store) -> dict[str, Any]:
        base = f"{PUBLIC_ORIGIN}/repos/{OWNER}/{REPO}/issues/{self.number}"
        return {
            "id": 800000 + self.number,
            "node_id": f"I_fake{self.number}",
            "url": base,
            "repository_url": f"{PUBLIC_ORIGIN}/repos/{OWNER}/{REPO}",
            "labels_url": f"{base}/labels{{/name}}",
            "comments_url": f"{base}/comments",
            "events_url": f"{base}/events",
            "html_url": f"https://github.com/{OWNER}/{REPO}/issues/{self.number}",
            "number": self.number,
            "state": self.state,
            "title": self.title,
            "body": None,
            "user": self.author,
            "labels": [store.labels[name].public() for name in self.labels],
            "assignee": None,
            "assignees": [],
            "milestone": None,
            "locked": False,
            "active_lock_reason": None,
            "comments": len(self.comments),
            "closed_at": CLOCK if self.state == "closed" else None,
            "created_at": CLOCK,
            "updated_at": CLOCK,
            "author_association": "MEMBER",
        } | ({"state_reason": "completed"} if self.state == "closed" else {})


class _Store:
    def __init__(self) -> None:
        self.labels: dict[str, Label] = {}
        for name, color, description in LABELS:
            self.add_label(name, color, description)
        self.issues: dict[int, Issue] = {}
        self.next_comment = 1
        for i, (title, state, labels, author, commented) in enumerate(ISSUES, start=1):
            issue = Issue(i, title, state, list(labels), _user(author, 1000 + i))
            self.issues[i] = issue
            if commented:
                self.comment(issue, f"{BOT_MARKER}\nTriage: seen.", bot_user())

    def add_label(self, name: str, color: str = "ededed", description: str | None = None) -> Label:
        label = Label(600000 + len(self.labels) + 1, name, color, description)
        self.labels[name] = label
        return label

    def comment(self, issue: Issue, body: str, author: dict[str, Any]) -> Comment:
        comment = Comment(500000 + self.next_comment, issue.number, body, author)
        self.next_comment += 1
        issue.comments.append(comment)
        return comment


def bot_user() -> dict[str, Any]:
    return _user(BOT_LOGIN, BOT_ID, "Bot")


@dataclass
class Answer:
    status: int
    payload: Any
    headers: dict[str, str] = field(default_factory=dict)
    #: For a list: the items of every page, the page and its size (the fake cuts the page).
    page: tuple[list[Any], int, int, str] | None = None


Handler = Callable[["FakeGitHub", dict[str, Any], dict[str, Any], Any], Answer]
_HANDLERS: dict[str, Handler] = {}


def _handles(operation_id: str) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        _HANDLERS[operation_id] = fn
        return fn

    return register


def _issue(fake: FakeGitHub, p: dict[str, Any]) -> Issue:
    issue = fake.store.issues.get(p["issue_number"])
    if issue is None:
        raise GitHubError(404, "Not Found", f"{DOCS}/issues/issues#get-an-issue")
    return issue


def _pages(q: dict[str, Any]) -> tuple[int, int]:
    return q.get("page", 1), q.get("per_page", DEFAULT_PER_PAGE)


@_handles("issues/list-for-repo")
def _list_issues(fake: FakeGitHub, p: dict, q: dict, body: Any) -> Answer:
    state = q.get("state", "open")
    wanted = [name.strip() for name in q.get("labels", "").split(",") if name.strip()]
    items = [
        issue.public(fake.store)
        for issue in sorted(fake.store.issues.values(), key=lambda i: -i.number)
        if (state == "all" or issue.state == state) and all(name in issue.labels for name in wanted)
    ]
    page, size = _pages(q)
    return Answer(200, None, page=(items, page, size, f"/repositories/{REPO_ID}/issues"))


@_handles("issues/get")
def _get_issue(fake: FakeGitHub, p: dict, q: dict, body: Any) -> Answer:
    return Answer(200, _issue(fake, p).public(fake.store))


@_handles("issues/list-comments")
def _list_comments(fake: FakeGitHub, p: dict, q: dict, body: Any) -> Answer:
    issue = _issue(fake, p)
    page, size = _pages(q)
    items = [c.public() for c in issue.comments]
    path = f"/repositories/{REPO_ID}/issues/{issue.number}/comments"
    return Answer(200, None, page=(items, page, size, path))


@_handles("issues/create-comment")
def _create_comment(fake: FakeGitHub, p: dict, q: dict, body: Any) -> Answer:
    issue = _issue(fake, p)
    if not body["body"].strip():
        raise GitHubError(
            422,
            "Validation Failed",
            f"{DOCS}/issues/comments#create-an-issue-comment",
            errors=[{"resource": "IssueComment", "code": "missing_field", "field": "body"}],
        )
    comment = fake.store.comment(issue, body["body"], bot_user()).public()
    return Answer(201, comment, {"Location": comment["url"]})


def _label_names(body: Any) -> list[str]:
    """The labels of an add/set body: `{"labels": [...]}`, a bare list, or one string;
    each a name or `{"name": ...}` (the document's oneOf)."""
    if body is None:
        return []
    items = body.get("labels", []) if isinstance(body, dict) else body
    items = [items] if isinstance(items, str) else items
    names = [item["name"] if isinstance(item, dict) else item for item in items]
    if not all(isinstance(n, str) and n for n in names):
        raise GitHubError(422, "Invalid request.\n\nEvery label must be a name.")
    return names


@_handles("issues/list-labels-on-issue")
def _issue_labels(fake: FakeGitHub, p: dict, q: dict, body: Any) -> Answer:
    issue = _issue(fake, p)
    page, size = _pages(q)
    items = [fake.store.labels[name].public() for name in issue.labels]
    path = f"/repositories/{REPO_ID}/issues/{issue.number}/labels"
    return Answer(200, None, page=(items, page, size, path))


@_handles("issues/add-labels")
def _add_labels(fake: FakeGitHub, p: dict, q: dict, body: Any) -> Answer:
    issue = _issue(fake, p)
    for name in _label_names(body):
        if name not in fake.store.labels:
            fake.store.add_label(name)
        if name not in issue.labels:
            issue.labels.append(name)
    return Answer(200, [fake.store.labels[name].public() for name in issue.labels])


@_handles("issues/set-labels")
def _set_labels(fake: FakeGitHub, p: dict, q: dict, body: Any) -> Answer:
    issue = _issue(fake, p)
    names = _label_names(body)
    for name in names:
        if name not in fake.store.labels:
            fake.store.add_label(name)
    issue.labels = list(dict.fromkeys(names))
    return Answer(200, [fake.store.labels[name].public() for name in issue.labels])


@_handles("issues/list-labels-for-repo")
def _repo_labels(fake: FakeGitHub, p: dict, q: dict, body: Any) -> Answer:
    page, size = _pages(q)
    items = [label.public() for label in fake.store.labels.values()]
    return Answer(200, None, page=(items, page, size, f"/repositories/{REPO_ID}/labels"))


@_handles("issues/get-label")
def _get_label(fake: FakeGitHub, p: dict, q: dict, body: Any) -> Answer:
    label = fake.store.labels.get(p["name"])
    if label is None:
        raise GitHubError(404, "Not Found", f"{DOCS}/issues/labels#get-a-label")
    return Answer(200, label.public())


@_handles("issues/create-label")
def _create_label(fake: FakeGitHub, p: dict, q: dict, body: Any) -> Answer:
    name = str(body["name"])
    if name in fake.store.labels:
        raise GitHubError(
            422,
            "Validation Failed",
            f"{DOCS}/issues/labels#create-a-label",
            errors=[{"resource": "Label", "code": "already_exists", "field": "name"}],
        )
    color = body.get("color", "ededed")
    label = fake.store.add_label(name, color, body.get("description"))
    return Answer(201, label.public(), {"Location": label.public()["url"]})


def link_header(path: str, query: dict[str, Any], page: int, size: int, total: int) -> str:
    """GitHub's `Link` for one page of `total` items ('' when one page holds them all)."""
    last = max(1, -(-total // size))
    if last == 1 and page == 1:
        return ""
    base = {k: v for k, v in query.items() if k not in ("page", "per_page")}

    def url(number: int) -> str:
        return f"{PUBLIC_ORIGIN}{path}?{urlencode({**base, 'per_page': size, 'page': number})}"

    links = []
    if page > 1:
        links.append(f'<{url(min(page - 1, last))}>; rel="prev"')
    if page < last:
        links.append(f'<{url(page + 1)}>; rel="next"')
        links.append(f'<{url(last)}>; rel="last"')
    if page > 1:
        links.append(f'<{url(1)}>; rel="first"')
    return ", ".join(links)


def etag(body: bytes) -> str:
    return 'W/"' + hashlib.sha256(body).hexdigest()[:32] + '"'


class FakeGitHub(LoopbackServer):
    """In-process: `with FakeGitHub(token) as api: ... api.url ... api.requests`;
    standalone: `python -m examples.github_triage.fake --port 8789 --token TOKEN`."""

    thread_name = "fake-github"
    key_word = "token"

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
        self._accepted = (f"Bearer {token}".encode(), f"token {token}".encode())
        self.document = Document(document, "urn:plimsoll:github-issues-openapi")
        self.store = _Store()
        self.used = 0
        #: Every request's headers as received (names lower-cased), for the tests.
        self.seen_headers: list[dict[str, str]] = []

    def handle(
        self, method: str, target: str, headers: Headers, body: bytes, refusal: Reply | None
    ) -> Reply:
        pairs = [(k.lower(), v) for k, v in headers]
        auth = [v for k, v in pairs if k == "authorization"]
        carried = len(auth) == 1 and any(
            hmac.compare_digest(auth[0].encode(), want) for want in self._accepted
        )
        operation_id: str | None = None
        with self._lock:
            self.seen_headers.append(dict(pairs))
            try:
                reply, operation_id = self._answer(
                    method, target, dict(pairs), auth, carried, body, refusal
                )
            except Exception as error:  # a bug in the fake: answer, log, never hang
                reply = Reply(500, orjson.dumps({"message": f"fake failed: {error!r}"}))
            record = RecordedRequest(method, target, carried, reply.status, operation_id)
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
        refusal: Reply | None,
    ) -> tuple[Reply, str | None]:
        if refusal is not None:
            return refusal, None
        if not headers.get("user-agent", "").strip():
            return Reply(403, USER_AGENT_REFUSAL.encode(), {"Content-Type": "text/plain"}), None
        if not carried:
            message = "Bad credentials" if auth else "Requires authentication"
            error = GitHubError(401, message)
            return Reply(401, orjson.dumps(error.body)), None
        op: Operation | None = None
        query: dict[str, Any] = {}
        try:
            version = headers.get("x-github-api-version")
            if version is not None and version not in API_VERSIONS:
                raise GitHubError(
                    400,
                    f"API version {version!r} is not supported.",
                    "https://docs.github.com/rest/about-the-rest-api/api-versions",
                )
            parts = urlsplit(target)
            op, params = self._route(method, parts.path)
            try:
                query = self.document.query(op, parts.query, unknown_ok=True)
            except Refusal as refused:
                raise GitHubError(422, f"Invalid request.\n\n{refused.message}") from None
            data = self._body(op, headers.get("content-type"), body)
            if (params["owner"].lower(), params["repo"].lower()) != (OWNER, REPO):
                raise GitHubError(404, "Not Found")
            handler = _HANDLERS.get(op.operation_id)
            if handler is None:
                raise GitHubError(404, "Not Found")
            answer = handler(self, params, query, data)
        except GitHubError as error:
            answer = Answer(error.status, error.body)
        return self._send(method, op, answer, headers, query), (op.operation_id if op else None)

    def _route(self, method: str, path: str) -> tuple[Operation, dict[str, Any]]:
        try:
            return self.document.route(method, path)
        except Refusal:
            # GitHub answers 404 for an unknown path, a method the path lacks, and a path
            # value of the wrong type (`/issues/abc`) alike.
            raise GitHubError(404, "Not Found") from None

    def _body(self, op: Operation, content_type: str | None, raw: bytes) -> Any:
        if not op.bodies:
            return None  # GitHub ignores a body on a GET
        if raw.strip() and content_type and "json" not in content_type:
            raise GitHubError(415, "Unsupported 'Content-Type' header.")
        try:
            return self.document.body(op, "application/json", raw)
        except Refusal as refused:
            if refused.message == "the body is not JSON":
                raise GitHubError(400, "Problems parsing JSON") from None
            raise GitHubError(422, f"Invalid request.\n\n{refused.message}") from None

    def _send(
        self,
        method: str,
        op: Operation | None,
        answer: Answer,
        headers: dict[str, str],
        query: dict[str, Any],
    ) -> Reply:
        extra = dict(answer.headers)
        payload = answer.payload
        if answer.page is not None:
            items, page, size, path = answer.page
            if not 1 <= size <= MAX_PER_PAGE:
                size = min(max(size, 1), MAX_PER_PAGE)  # GitHub clamps, it does not refuse
            page = max(page, 1)
            payload = items[(page - 1) * size : page * size]
            link = link_header(path, query, page, size, len(items))
            if link:
                extra["Link"] = link
        status = answer.status
        if self._check_responses and op is not None and status < 500:
            problem = self.document.response_problem(op, status, payload)
            if problem and op.response_key(status) is not None:
                status, payload = 500, {"message": f"fake answered outside the document: {problem}"}
                extra = {}
        raw = orjson.dumps(payload) if payload is not None else b""
        extra["Content-Type"] = "application/json; charset=utf-8"
        extra["X-GitHub-Media-Type"] = "github.v3; format=json"
        if method == "GET" and status == 200:
            tag = etag(raw)
            extra["ETag"] = tag
            if tag in [t.strip() for t in headers.get("if-none-match", "").split(",")]:
                return Reply(
                    304,
                    b"",
                    {k: v for k, v in extra.items() if k != "Content-Type"} | self._rate_headers(),
                )
        self.used += 1
        return Reply(status, raw, extra | self._rate_headers())

    def _rate_headers(self) -> dict[str, str]:
        return {
            "X-RateLimit-Limit": str(RATE_LIMIT),
            "X-RateLimit-Remaining": str(RATE_LIMIT - self.used),
            "X-RateLimit-Reset": str(RESET),
            "X-RateLimit-Used": str(self.used),
            "X-RateLimit-Resource": "core",
        }

    def transport_refusal(self, status: int, text: str) -> Reply:
        return Reply(status, orjson.dumps(GitHubError(status, text).body))


def main(argv: list[str] | None = None) -> int:
    return serve(
        argv,
        make=FakeGitHub,
        prog="python -m examples.github_triage.fake",
        api_name="GitHub REST",
        default_port=8789,
        token_env="GITHUB_TOKEN",
    )


if __name__ == "__main__":
    sys.exit(main())
