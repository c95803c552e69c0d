"""Client authentication for `specgen mcp --http --auth FILE`.

Without it the HTTP server binds loopback only, since anyone who can reach it can run
code through the grant. With it every request to `/mcp` carries a bearer token, and the
caller id the grant's `allowed_callers` is checked against comes from that token, never
from the request. Two kinds of token, in one auth file (JSON):

    {"bearer": [{"sha256": "<hex of the token>", "caller": "alice"}],
     "jwt": {"jwks_file": "jwks.json" or "jwks_url": "https://idp.example/jwks",
             "issuer": "https://idp.example",
             "audience": "https://mcp.example/mcp", "caller_claim": "sub"}}

- `bearer`: static tokens; the file keeps only each token's SHA-256, so reading it does
  not give anyone a token. A presented token's digest is compared with every entry with
  `hmac.compare_digest` (no early exit that times which entry matched).
- `jwt`: the server is an OAuth 2.1 resource server. An access token is a JWT signed by
  a key of the JWKS file or URL (joserfc; "none" and HMAC with a public key are refused by the
  library), with `iss` = issuer, `aud` containing audience, and an `exp` in the future.
  The audience is the server's canonical URL (the MCP authorization spec), so it is
  also the resource `/.well-known/oauth-protected-resource` (RFC 9728) describes.

The SDK does the HTTP part: its bearer middleware answers a request with no valid token
401 with `WWW-Authenticate: Bearer ... resource_metadata="..."`, binds each session to
the principal that opened it, and serves the metadata; `CallerVerifier` is the SDK's
`TokenVerifier`.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeGuard

import anyio
import httpx
import orjson
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings

if TYPE_CHECKING:  # joserfc is imported where a token is checked: a server without
    # --auth (most) never pays its import (~50 ms)
    from joserfc.jwk import KeySet

#: Bytes of an auth file or JWKS file read at most: both are a few entries.
MAX_FILE_BYTES = 1 << 20
#: Characters of a presented token looked at; a longer one is refused unread.
MAX_TOKEN_CHARS = 16 << 10
#: Longest caller id a token may name: an id, not a document.
MAX_CALLER_CHARS = 256
_HEX64 = re.compile(r"[0-9a-f]{64}")
_TOP_KEYS = {"bearer", "jwt"}
_BEARER_KEYS = {"sha256", "caller"}
_JWT_KEYS = {"jwks_file", "jwks_url", "issuer", "audience", "caller_claim"}
_REQUIRED_JWT_KEYS = ("issuer", "audience")
#: Seconds a JWKS URL is given to answer.
JWKS_TIMEOUT_S = 10.0
#: Seconds at least between two fetches of a JWKS URL after the first.
JWKS_REFRESH_S = 60.0


def plain_caller(value: object) -> TypeGuard[str]:
    """Is `value` a caller id fit to match `allowed_callers`, name a run in the audit
    record and appear in an approval question: a non-empty string of printable
    characters (no controls, bidi or zero-width format characters, line separators),
    no surrounding spaces, at most MAX_CALLER_CHARS. The claim comes from whoever the
    identity provider lets choose it, so a terminal escape or a right-to-left override
    in it is refused at the door, not escaped at every place it is shown."""
    return (
        isinstance(value, str)
        and 0 < len(value) <= MAX_CALLER_CHARS
        and value.isprintable()
        and value == value.strip()
    )


class AuthFileError(ValueError):
    """An auth file that cannot be used; the text is one line and quotes the file."""


@dataclass(frozen=True)
class JwtRule:
    source: JwksSource
    issuer: str
    audience: str
    caller_claim: str = "sub"


@dataclass(frozen=True)
class AuthConfig:
    #: (SHA-256 digest of a token, the caller it stands for).
    bearer: tuple[tuple[bytes, str], ...]
    jwt: JwtRule | None


def _read_json(path: Path, what: str) -> Any:
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise AuthFileError(f"{what} {str(path)!r}: {exc.strerror or exc}") from None
    if len(raw) > MAX_FILE_BYTES:
        raise AuthFileError(f"{what} {str(path)!r}: over {MAX_FILE_BYTES} bytes")
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise AuthFileError(f"{what} {str(path)!r}: not JSON ({exc})") from None


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value or value != value.strip():
        raise AuthFileError(f"{where} must be a non-empty string without surrounding spaces")
    return value


def _unknown(found: dict[str, Any], known: set[str], where: str) -> None:
    extra = sorted(set(found) - known)
    if extra:
        raise AuthFileError(
            f"{where}: unknown key {extra[0]!r} (known: {', '.join(sorted(known))})"
        )


def load_auth(path: Path) -> AuthConfig:
    """Read and check an auth file; AuthFileError (one line) on any fault."""
    return parse_auth(_read_json(path, "--auth"), f"--auth {str(path)!r}", path.parent)


def parse_auth(doc: Any, where: str, base: Path) -> AuthConfig:
    """Check an auth block (an auth file's, or a server config's `auth`); `where` opens
    every error line and `base` is the folder a relative jwks_file is read from."""
    if not isinstance(doc, dict):
        raise AuthFileError(f"{where}: must be a JSON object")
    _unknown(doc, _TOP_KEYS, where)
    if not doc.get("bearer") and not doc.get("jwt"):
        raise AuthFileError(f'{where}: names no way in; give "bearer" tokens or a "jwt" rule')
    bearer: list[tuple[bytes, str]] = []
    entries = doc.get("bearer", [])
    if not isinstance(entries, list):
        raise AuthFileError(f'{where}: "bearer" must be a list')
    for i, entry in enumerate(entries):
        at = f"{where}: bearer[{i}]"
        if not isinstance(entry, dict):
            raise AuthFileError(f"{at} must be an object")
        _unknown(entry, _BEARER_KEYS, at)
        digest = entry.get("sha256")
        if not isinstance(digest, str) or not _HEX64.fullmatch(digest):
            raise AuthFileError(f"{at}.sha256 must be 64 lowercase hex digits (a SHA-256)")
        caller = _text(entry.get("caller"), f"{at}.caller")
        if not plain_caller(caller):
            raise AuthFileError(
                f"{at}.caller must be printable, at most {MAX_CALLER_CHARS} characters"
            )
        bearer.append((bytes.fromhex(digest), caller))
    if len({d for d, _ in bearer}) != len(bearer):
        raise AuthFileError(f"{where}: the same token digest is listed twice")
    rule = None
    if "jwt" in doc:
        rule = _jwt_rule(doc["jwt"], base, f"{where}: jwt")
    return AuthConfig(tuple(bearer), rule)


def _jwt_rule(block: Any, base: Path, where: str) -> JwtRule:
    if not isinstance(block, dict):
        raise AuthFileError(f"{where} must be an object")
    _unknown(block, _JWT_KEYS, where)
    for key in _REQUIRED_JWT_KEYS:
        if key not in block:
            raise AuthFileError(f"{where}: {key!r} is required")
    if ("jwks_file" in block) == ("jwks_url" in block):
        raise AuthFileError(f"{where}: give one of 'jwks_file' and 'jwks_url'")
    audience = _text(block["audience"], f"{where}.audience")
    if not audience.startswith(("https://", "http://")):
        raise AuthFileError(f"{where}.audience must be this server's URL (https://...)")
    issuer = _text(block["issuer"], f"{where}.issuer")
    if not issuer.startswith(("https://", "http://")):
        raise AuthFileError(f"{where}.issuer must be the authorization server's URL")
    claim = _text(block.get("caller_claim", "sub"), f"{where}.caller_claim")
    if "jwks_url" in block:
        url = _jwks_url(_text(block["jwks_url"], f"{where}.jwks_url"), f"{where}.jwks_url")
        source = JwksSource(url, _fetch_jwks(url, f"{where}.jwks_url"))
    else:
        jwks_path = Path(_text(block["jwks_file"], f"{where}.jwks_file"))
        if not jwks_path.is_absolute():
            jwks_path = base / jwks_path  # relative to the file naming it, not the cwd
        at = f"{where}.jwks_file {str(jwks_path)!r}"
        source = JwksSource(None, _key_set(_read_json(jwks_path, f"{where}.jwks_file"), at))
    return JwtRule(source, issuer, audience, claim)


def _key_set(jwks: Any, at: str) -> KeySet:
    from joserfc.errors import JoseError
    from joserfc.jwk import KeySet

    try:
        keys = KeySet.import_key_set(jwks)
    except (JoseError, ValueError, TypeError, KeyError) as exc:
        raise AuthFileError(f"{at}: not a JWKS ({exc})") from None
    if not keys.keys:
        raise AuthFileError(f"{at}: holds no key")
    return keys


def _jwks_url(url: str, where: str) -> str:
    """An https URL, or http to a loopback host (a local identity provider, tests)."""
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError) as exc:
        raise AuthFileError(f"{where} {url!r}: not a URL ({exc})") from None
    host = parsed.host
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if parsed.scheme != "https" and not (parsed.scheme == "http" and loopback):
        raise AuthFileError(f"{where} {url!r}: must be https (http only to a loopback host)")
    return url


def _fetch_jwks(url: str, where: str) -> KeySet:
    """The key set at `url`, read with a deadline and a size cap; AuthFileError if not."""
    try:
        with (
            httpx.Client(timeout=JWKS_TIMEOUT_S, follow_redirects=False) as client,
            client.stream("GET", url, headers={"accept": "application/json"}) as reply,
        ):
            if reply.status_code != 200:
                raise AuthFileError(f"{where} {url!r}: answered {reply.status_code}")
            body = bytearray()
            for chunk in reply.iter_bytes():
                body += chunk
                if len(body) > MAX_FILE_BYTES:
                    raise AuthFileError(f"{where} {url!r}: over {MAX_FILE_BYTES} bytes")
    except httpx.HTTPError as exc:
        raise AuthFileError(f"{where} {url!r}: {type(exc).__name__}: {exc}") from None
    try:
        jwks = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise AuthFileError(f"{where} {url!r}: not JSON ({exc})") from None
    return _key_set(jwks, f"{where} {url!r}")


class JwksSource:
    """The keys JWTs are checked against: a file's, read once, or a URL's, fetched at
    start-up and again (at most once per JWKS_REFRESH_S) when a token fails to verify,
    so a key the identity provider rotated in is found without a restart. A failed
    refetch keeps the keys it had."""

    def __init__(self, url: str | None, keys: KeySet) -> None:
        self.url = url
        self.keys = keys
        self._fetched = time.monotonic()
        self._lock = threading.Lock()

    def refresh(self) -> bool:
        """Fetch the URL's keys again if it is time; True when new keys were taken."""
        if self.url is None:
            return False
        with self._lock:
            if time.monotonic() - self._fetched < JWKS_REFRESH_S:
                return False
            self._fetched = time.monotonic()
        try:
            keys = _fetch_jwks(self.url, "jwks_url")
        except AuthFileError:
            return False
        self.keys = keys
        return True


class CallerVerifier:
    """The SDK's `TokenVerifier`: a token in, the caller it stands for out (as the
    `AccessToken`'s client_id), or None, which the SDK answers with 401."""

    def __init__(self, config: AuthConfig) -> None:
        self.config = config

    async def verify_token(self, token: str) -> AccessToken | None:
        if not token or len(token) > MAX_TOKEN_CHARS:
            return None
        digest = hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()
        caller = None
        for known, who in self.config.bearer:  # every entry, match or not
            if hmac.compare_digest(digest, known):
                caller = who
        if caller is not None:
            return AccessToken(token=token, client_id=caller, scopes=[])
        rule = self.config.jwt
        if rule is None:
            return None
        verified = _verify_jwt(token, rule)
        # Perhaps signed with a key rotated in since the last fetch.
        if (
            verified is None
            and rule.source.url is not None
            and await anyio.to_thread.run_sync(rule.source.refresh)
        ):
            verified = _verify_jwt(token, rule)
        return verified


def _verify_jwt(token: str, rule: JwtRule) -> AccessToken | None:
    from joserfc import jwt
    from joserfc.errors import JoseError

    try:
        decoded = jwt.decode(token, rule.source.keys)
        jwt.JWTClaimsRegistry(
            iss={"essential": True, "value": rule.issuer},
            aud={"essential": True, "value": rule.audience},
            exp={"essential": True},
        ).validate(decoded.claims)
    except (JoseError, ValueError, TypeError, KeyError):
        return None
    claims = decoded.claims
    caller = claims.get(rule.caller_claim)
    exp = claims.get("exp")
    if not plain_caller(caller) or not isinstance(exp, int) or isinstance(exp, bool):
        return None
    return AccessToken(
        token=token,
        client_id=caller,
        scopes=[],
        expires_at=exp,
        resource=rule.audience,
        subject=claims.get("sub") if isinstance(claims.get("sub"), str) else None,
        claims={"iss": rule.issuer},
    )


#: The issuer the SDK's settings require when only static tokens are used. It is never
#: served: without a resource URL the SDK publishes no metadata naming it.
_NO_ISSUER = "http://localhost/"


def auth_settings(config: AuthConfig) -> AuthSettings:
    """The SDK's auth settings: a resource server for the JWT rule (its metadata and
    `resource_metadata` in every 401), plain bearer checks for static tokens only."""
    if config.jwt is None:
        return AuthSettings(
            issuer_url=_NO_ISSUER, resource_server_url=None, validate_token_resource=False
        )
    return AuthSettings(
        issuer_url=config.jwt.issuer,
        resource_server_url=config.jwt.audience,
        # CallerVerifier checks the audience itself (joserfc, `aud` as a list too).
        validate_token_resource=False,
    )


def authenticated_caller() -> str | None:
    """The caller of the request being handled, as its token says, or None without one."""
    token = get_access_token()
    return token.client_id if token is not None else None
