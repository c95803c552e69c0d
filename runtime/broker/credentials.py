"""How an approved request carries the operator's key: one small class per kind.

A `Credential` is the only object that reveals a `Secret`, and only in three places: the
headers it adds last to a request the policy has already approved, the query parameters
it appends to the approved URL, and the forms of the key a reply must not contain (an
echo endpoint, a debug page reflecting the header or the URL), which the broker checks
before delivering anything to the guest. Kinds: `Header` (any header, a value template:
`Bearer <key>`, `Token <key>`, a bare key in `X-API-Key`), `Bearer` (the reference's
static token, a `Header`), `Basic` (RFC 7617) and `QueryParam` (`?api_key=<key>`). A
per-run JWT (`tokens.py`) is minted into a `Header`. A new kind is a new class here and
one branch in `credential_for`, with no change to the policy, the upstream or the sandbox.
"""

from __future__ import annotations

import base64
from typing import Protocol
from urllib.parse import quote

from runtime.broker.grants import Profile
from runtime.broker.reflection import Reflection
from runtime.broker.token_block import BasicKey, HeaderKey, JwtKey, QueryKey, Secret
from runtime.broker.tokens import mint


class Credential(Protocol):
    """Attaches a key to an approved request and names what must never come back."""

    def headers(self) -> list[tuple[str, str]]:
        """Headers added after every other header of an approved request."""
        ...

    def query(self) -> list[tuple[str, str]]:
        """Query parameters appended to the approved URL (names and values unencoded)."""
        ...

    def secrets(self) -> tuple[str, ...]:
        """The raw values a reply is checked for before the guest may see it."""
        ...


class Header:
    """The key in one header, as a template: `Authorization: Token <key>`, `X-API-Key: <key>`.

    The loader has already checked the header name (no header the broker sets or one
    that frames the message) and that neither template nor key holds CR, LF or NUL.
    """

    __slots__ = ("_name", "_template", "_token")

    def __init__(self, token: Secret, name: str = "Authorization", template: str = "") -> None:
        self._token = token
        self._name = name
        self._template = template or "Bearer {token}"

    def headers(self) -> list[tuple[str, str]]:
        return [(self._name, self._template.replace("{token}", self._token.reveal()))]

    def query(self) -> list[tuple[str, str]]:
        return []

    def secrets(self) -> tuple[str, ...]:
        return (self._token.reveal(),)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._name}: <hidden>)"


class Minted(Header):
    """A per-run jwt in one header. The reply check looks for the signing key as well as
    the minted token: a debug page echoing the upstream's own HS256 secret would let the
    guest mint tokens of its own (adversarial review)."""

    __slots__ = ("_signing",)

    def __init__(self, token: Secret, signing: Secret, name: str, template: str) -> None:
        super().__init__(token, name, template)
        self._signing = signing

    def secrets(self) -> tuple[str, ...]:
        return (self._token.reveal(), self._signing.reveal())


class Bearer(Header):
    """`Authorization: Bearer <key>` (RFC 6750), the reference's static token."""

    __slots__ = ()

    def __init__(self, token: Secret) -> None:
        super().__init__(token)


class Basic:
    """`Authorization: Basic base64(user:password)` (RFC 7617), UTF-8 as section 2.1 allows.

    The secrets are the password and the encoded pair: a reply echoing either leaks it.
    With an empty password the user is the key (Stripe's secret key as the Basic user),
    so the user is the secret instead; a user beside a real password is an account
    name, which an upstream may print freely.
    """

    __slots__ = ("_password", "_user")

    def __init__(self, user: Secret, password: Secret) -> None:
        self._user = user
        self._password = password

    def _pair(self) -> str:
        raw = f"{self._user.reveal()}:{self._password.reveal()}".encode()
        return base64.b64encode(raw).decode("ascii")

    def headers(self) -> list[tuple[str, str]]:
        return [("Authorization", "Basic " + self._pair())]

    def query(self) -> list[tuple[str, str]]:
        return []

    def secrets(self) -> tuple[str, ...]:
        password = self._password.reveal()
        return (password or self._user.reveal(), self._pair())

    def __repr__(self) -> str:
        return "Basic(<hidden>)"


class QueryParam:
    """The key as one query parameter the broker appends after approval.

    The guest never sees it and the trace has no field for a query. An upstream that
    echoes its URL (a debug page, an error naming the request) would carry it back, so
    the percent-encoded form as sent is among the secrets the reply is checked for.
    """

    __slots__ = ("_name", "_token")

    def __init__(self, token: Secret, name: str) -> None:
        self._token = token
        self._name = name

    def headers(self) -> list[tuple[str, str]]:
        return []

    def query(self) -> list[tuple[str, str]]:
        return [(self._name, self._token.reveal())]

    def secrets(self) -> tuple[str, ...]:
        key = self._token.reveal()
        return tuple(dict.fromkeys((key, quote(key, safe=""), quote(key, safe="").lower())))

    def __repr__(self) -> str:
        return f"QueryParam({self._name}=<hidden>)"


def credential_for(
    profile: Profile, *, caller: str | None = None, run_timeout_s: float | None = None
) -> Credential | None:
    """The credential one run sends, or None when the grant carries no key.

    A jwt profile mints its token here, once per run, bound to `caller` and expiring no
    later than the run's timeout plus 5 s (GrantsError when there is no caller).
    """
    block = profile.credential
    if block is None:
        return Bearer(profile.token) if profile.token is not None else None
    if isinstance(block, HeaderKey):
        return Header(block.secret, block.header, block.value)
    if isinstance(block, QueryKey):
        return QueryParam(block.secret, block.param)
    if isinstance(block, BasicKey):
        return Basic(block.user, block.password)
    if isinstance(block, JwtKey):
        token = mint(block, caller=caller, scopes=profile.scopes, run_timeout_s=run_timeout_s)
        return Minted(token, block.secret, block.header, block.value)
    raise TypeError(f"unknown credential block {type(block).__name__}")


def reflects(body: bytes, credential: Credential | None) -> bool:
    """Does `body` hold a secret, verbatim, encoded or in long pieces? (reflection.py)

    Builds the needles on every call; the broker's policy keeps one `Reflection`.
    """
    if credential is None:
        return False
    return Reflection(credential.secrets()).found(body)


__all__ = [
    "Basic",
    "Bearer",
    "Credential",
    "Header",
    "Minted",
    "QueryParam",
    "credential_for",
    "reflects",
]
