"""The grant's `token` block: which credential a profile sends, and where its key lives.

Why its own module: the block has four shapes and each is checked on its own terms, and
the grants loader should only have to say "this profile's token is that block". Each
shape is a frozen dataclass holding the key in a `Secret` read from the environment at
load, so a grant printed anywhere never shows it:

    {"type": "static", "env": "K"}                                   Authorization: Bearer <key>
    {"type": "static", "env": "K", "header": "Authorization", "value": "Token {token}"}
    {"type": "static", "env": "K", "header": "X-API-Key"}            X-API-Key: <key>
    {"type": "static", "env": "K", "query": "api_key"}               ?api_key=<key>
    {"type": "basic", "user_env": "U", "password_env": "P"}          Authorization: Basic ...
    {"type": "basic", "user_env": "K", "password": ""}               Basic, empty password
    {"type": "jwt", "secret_env": "S", "audience": "api", ...}       a per-run HS256 token

`value` is a template with exactly one `{token}`; it defaults to `Bearer {token}` for
the Authorization header and to the bare `{token}` for any other header. A header the
broker sets itself or one that frames the message (Host, Content-Length, Content-Type,
Transfer-Encoding, Connection, Cookie, Proxy-* ...) cannot carry a credential: a key
there would replace what the policy approved or split the request. The checks raise
`TokenBlockError` with the text after the loader's `grants: profile "NAME": ` prefix.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from specgen.quoting import json_quoted

#: The per-run token's lifetime when `ttl_sec` is absent or not positive (seconds).
DEFAULT_JWT_TTL_S = 60
#: HS256 needs a key at least as long as its hash (RFC 7518 section 3.2).
MIN_JWT_SECRET_BYTES = 32

#: Headers a credential may not occupy: the ones the broker sets, and the ones that
#: frame or route the message. Compared case-insensitively; `proxy-*` by prefix.
FORBIDDEN_HEADERS = frozenset(
    {
        "accept",
        "accept-encoding",
        "connection",
        "content-encoding",
        "content-length",
        "content-type",
        "cookie",
        "expect",
        "host",
        "keep-alive",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    }
)
# RFC 9110 token: the only characters a field name may hold.
_HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,128}\Z")
# A query key the broker appends verbatim: unreserved characters only, never encoded.
_QUERY_NAME = re.compile(r"[A-Za-z0-9._~\-]{1,128}\Z")
_PLACEHOLDER = "{token}"

_FIELDS = {
    "static": frozenset({"type", "env", "header", "value", "query"}),
    "basic": frozenset({"type", "user_env", "password_env", "password"}),
    "jwt": frozenset(
        {"type", "secret_env", "audience", "ttl_sec", "issuer", "key_id", "header", "value"}
    ),
}


class TokenBlockError(ValueError):
    """One refusal of a token block, worded to follow `grants: profile "NAME": `."""


class Secret:
    """A credential that never prints itself.

    Only `reveal()` returns the value, and only a credential calls it, when it adds the
    key to a request the policy has already approved.
    """

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Secret(<hidden>)"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(("Secret", self._value))

    def __reduce__(self) -> Any:
        # Pickling would write the value somewhere the operator did not choose.
        raise TypeError("a Secret cannot be pickled")


@dataclass(frozen=True)
class HeaderKey:
    """A static key sent in one header, as `value` with the key in place of `{token}`."""

    env: str
    secret: Secret = field(repr=False, compare=False)
    header: str = "Authorization"
    value: str = "Bearer {token}"


@dataclass(frozen=True)
class QueryKey:
    """A static key the broker appends to the approved URL as `?<param>=<key>`."""

    env: str
    secret: Secret = field(repr=False, compare=False)
    param: str = "api_key"


@dataclass(frozen=True)
class BasicKey:
    """HTTP basic (RFC 7617): a user and a password from two variables, or a user whose
    password is empty (`password_env` "": Stripe's `-u sk_test_...:`, where the user is
    the key)."""

    user_env: str
    password_env: str
    user: Secret = field(repr=False, compare=False)
    password: Secret = field(repr=False, compare=False)


@dataclass(frozen=True)
class JwtKey:
    """A signing key from which each run mints its own short-lived HS256 token."""

    secret_env: str
    audience: str
    secret: Secret = field(repr=False, compare=False)
    ttl_s: int = DEFAULT_JWT_TTL_S
    issuer: str = ""
    key_id: str = ""
    header: str = "Authorization"
    value: str = "Bearer {token}"


TokenBlock = HeaderKey | QueryKey | BasicKey | JwtKey


def parse_token(spec: Any, env: Mapping[str, str]) -> TokenBlock:
    """The credential a `token` block declares; TokenBlockError names the first fault."""
    if not isinstance(spec, dict):
        raise TokenBlockError("token must be an object")
    kind = spec.get("type")
    kind = "static" if kind is None or kind == "" else kind
    if not isinstance(kind, str):
        raise TokenBlockError("token.type must be a string")
    if kind not in _FIELDS:
        raise TokenBlockError(f"unknown token.type {json_quoted(kind)} (want static|basic|jwt)")
    for key in spec:
        if key not in _FIELDS[kind]:
            raise TokenBlockError(f"token: unknown field {json_quoted(key)} for a {kind} token")
    # JSON null counts as absent, as everywhere in the grants file.
    spec = {k: v for k, v in spec.items() if v is not None}
    if kind == "static":
        return _static(spec, env)
    if kind == "basic":
        return _basic(spec, env)
    return _jwt(spec, env)


def _static(spec: dict[str, Any], env: Mapping[str, str]) -> HeaderKey | QueryKey:
    var = _text(spec, "env")
    if not var:
        raise TokenBlockError("token.env is required for a static token")
    value = _variable(env, var, "token env")
    if "query" in spec:
        if "header" in spec or "value" in spec:
            raise TokenBlockError(
                "token: set either query or header/value, not both (a key goes in one place)"
            )
        param = _text(spec, "query")
        if not _QUERY_NAME.match(param):
            raise TokenBlockError(
                f"token.query {json_quoted(param)} must be 1 to 128 characters from A-Z a-z 0-9 . _ ~ -"
            )
        _check_printable(value, f"token env {json_quoted(var)}")
        return QueryKey(env=var, secret=Secret(value), param=param)
    header, template = _header_and_value(spec)
    if template == "Bearer {token}":
        # The reference's bearer token: printable ASCII without spaces (RFC 6750 b64token
        # is narrower still). The reference checks this at run time; refusing at load is
        # the same outcome stated earlier, and the message never includes the value.
        if not all(0x21 <= ord(ch) <= 0x7E for ch in value):
            raise TokenBlockError(
                f"token env {json_quoted(var)} is not a bearer token (printable ASCII, no spaces)"
            )
    else:
        _check_printable(value, f"token env {json_quoted(var)}")
    return HeaderKey(env=var, secret=Secret(value), header=header, value=template)


def _basic(spec: dict[str, Any], env: Mapping[str, str]) -> BasicKey:
    user_env = _text(spec, "user_env")
    password_env = _text(spec, "password_env")
    empty = _empty_password(spec, password_env)
    if not user_env or not (password_env or empty):
        raise TokenBlockError(
            "token.user_env and token.password_env are required for basic "
            '(or "password": "" for an empty password)'
        )
    user = _variable(env, user_env, "token user_env")
    password = "" if empty else _variable(env, password_env, "token password_env")
    _check_printable(user, f"token user_env {json_quoted(user_env)}", ascii_only=False)
    if not empty:
        _check_printable(
            password, f"token password_env {json_quoted(password_env)}", ascii_only=False
        )
    if ":" in user:
        # RFC 7617: the first colon separates user from password; one in the user id
        # would move part of it into the password on the server's side.
        raise TokenBlockError(f"token user_env {json_quoted(user_env)} must not contain ':'")
    return BasicKey(
        user_env=user_env,
        password_env=password_env,
        user=Secret(user),
        password=Secret(password),
    )


def _empty_password(spec: dict[str, Any], password_env: str) -> bool:
    """Does the block say the password is empty (`"password": ""`)?

    Only the empty string is accepted literally: any other password is a secret, and a
    secret lives in the environment, never in the grants file. Saying it outright,
    rather than by leaving `password_env` out, keeps a forgotten variable an error.
    """
    if "password" not in spec:
        return False
    if _text(spec, "password") != "":
        raise TokenBlockError(
            'token.password may only be "" (an empty password); a password is read from '
            "the variable password_env names"
        )
    if password_env:
        raise TokenBlockError('token: set either password_env or "password": "", not both')
    return True


def _jwt(spec: dict[str, Any], env: Mapping[str, str]) -> JwtKey:
    secret_env = _text(spec, "secret_env")
    if not secret_env:
        raise TokenBlockError("token.secret_env is required for a jwt token")
    secret = env.get(secret_env, "")
    if not secret:
        raise TokenBlockError(f"jwt secret env {json_quoted(secret_env)} is empty or unset")
    if len(secret.encode("utf-8", "surrogatepass")) < MIN_JWT_SECRET_BYTES:
        raise TokenBlockError(
            f"jwt secret env {json_quoted(secret_env)} must contain at least "
            f"{MIN_JWT_SECRET_BYTES} bytes for HS256"
        )
    audience = _text(spec, "audience").strip()
    if not audience:
        raise TokenBlockError("jwt audience is required")
    ttl = spec.get("ttl_sec", 0)
    if not isinstance(ttl, int) or isinstance(ttl, bool):
        raise TokenBlockError("token.ttl_sec must be an integer")
    issuer = _text(spec, "issuer")
    key_id = _text(spec, "key_id")
    for name, text in (("audience", audience), ("issuer", issuer), ("key_id", key_id)):
        if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in text):
            raise TokenBlockError(f"token.{name} must not contain control characters")
    header, template = _header_and_value(spec)
    return JwtKey(
        secret_env=secret_env,
        audience=audience,
        secret=Secret(secret),
        ttl_s=ttl if ttl > 0 else DEFAULT_JWT_TTL_S,
        issuer=issuer,
        key_id=key_id,
        header=header,
        value=template,
    )


def _header_and_value(spec: dict[str, Any]) -> tuple[str, str]:
    header = _text(spec, "header") if "header" in spec else "Authorization"
    header_error = check_header_name(header)
    if header_error is not None:
        raise TokenBlockError(header_error)
    default = "Bearer {token}" if header.lower() == "authorization" else _PLACEHOLDER
    template = _text(spec, "value") if "value" in spec else default
    if template.count(_PLACEHOLDER) != 1 or template.replace(_PLACEHOLDER, "").count("{"):
        raise TokenBlockError(
            f"token.value {json_quoted(template)} must contain {_PLACEHOLDER} exactly once "
            "and no other braces"
        )
    if template != template.strip() or any(not 0x20 <= ord(ch) <= 0x7E for ch in template):
        raise TokenBlockError(
            f"token.value {json_quoted(template)} must be printable ASCII without surrounding spaces"
        )
    return header, template


def check_header_name(name: str) -> str | None:
    """Why `name` cannot carry a credential, or None when it can."""
    if not _HEADER_NAME.match(name):
        return f"token.header {json_quoted(name)} is not an HTTP header name (RFC 9110 token)"
    low = name.lower()
    if low in FORBIDDEN_HEADERS or low.startswith("proxy-"):
        return (
            f"token.header {json_quoted(name)} is set by the broker or frames the request; "
            "a credential cannot occupy it"
        )
    return None


def _variable(env: Mapping[str, str], var: str, what: str) -> str:
    value = env.get(var, "")
    if not value:
        raise TokenBlockError(f"{what} {json_quoted(var)} is empty or unset")
    return value


def _check_printable(value: str, what: str, *, ascii_only: bool = True) -> None:
    """No CR, LF, NUL or other control character can reach a header or a URL."""
    for ch in value:
        code = ord(ch)
        if code < 0x20 or code == 0x7F or (ascii_only and code > 0x7E) or 0x80 <= code < 0xA0:
            raise TokenBlockError(
                f"{what} holds a control character"
                + (" or non-ASCII text" if ascii_only else "")
                + "; it cannot be sent"
            )


def _text(spec: dict[str, Any], key: str) -> str:
    value = spec.get(key, "")
    if not isinstance(value, str):
        raise TokenBlockError(f"token.{key} must be a string")
    return value


__all__ = [
    "DEFAULT_JWT_TTL_S",
    "FORBIDDEN_HEADERS",
    "MIN_JWT_SECRET_BYTES",
    "BasicKey",
    "HeaderKey",
    "JwtKey",
    "QueryKey",
    "Secret",
    "TokenBlock",
    "TokenBlockError",
    "check_header_name",
    "parse_token",
]
