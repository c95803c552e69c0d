"""The broker's decision: is this call allowed, and what exactly goes on the wire.

Why apart from sending: every rule that turns a guest's request into an upstream one
lives here and nowhere else, with no HTTP client of its own. A call is approved only
if its method is one of the five verbs in ASCII letters and its path matches an allow
entry; the request is built from nothing the guest controls except the approved path
and the body bytes (fixed headers, the operator's origin, the credential's headers
added last), and refused when its wire form is not what was approved.
"""

from __future__ import annotations

import httpx

from runtime.broker.credentials import Credential, credential_for
from runtime.broker.grants import Profile
from runtime.broker.reflection import Reflection
from specgen.routes import METHODS, Route, first_match


class Policy:
    """One profile's rules: approve a call, build its request, check a reply for the key."""

    def __init__(self, profile: Profile) -> None:
        self._base_url = profile.base_url
        self._allow: tuple[Route, ...] = profile.allow
        self._origin = httpx.URL(profile.base_url)
        self._credential: Credential | None = credential_for(profile)
        # The needles are built once per broker, not per reply.
        self._reflection = Reflection(self._credential.secrets() if self._credential else ())

    def approve(self, method: object, path: object) -> Route | None:
        """The allow entry admitting this call, or None to refuse it.

        The method must be one of the five verbs in ASCII letters: `str.upper()` maps
        some non-ASCII letters onto ASCII ones (`"poſt".upper() == "POST"`), and a verb
        spelled that way is not one the operator wrote.
        """
        if not isinstance(method, str) or not isinstance(path, str):
            return None
        if not method.isascii() or method.upper() not in METHODS:
            return None
        return first_match(self._allow, method.upper(), path)

    def build(
        self, client: httpx.Client, method: str, path: str, payload: bytes, timeout_s: float
    ) -> httpx.Request | None:
        """The upstream request, or None when its wire form is not what was approved."""
        url = httpx.URL(self._base_url + path)
        if (
            url.raw_path != path.encode("ascii")
            or url.query
            or url.fragment
            or url.scheme != self._origin.scheme
            or url.host != self._origin.host
            or url.port != self._origin.port
            or url.userinfo
        ):
            return None
        request = client.build_request(
            method,
            url,
            headers=self._headers(bool(payload)),
            content=payload if payload else None,
            timeout=httpx.Timeout(timeout_s),
        )
        if request.url.raw_path != path.encode("ascii") or request.method != method:
            return None
        return request

    def _headers(self, has_body: bool) -> list[tuple[str, str]]:
        headers = [("Accept", "application/json"), ("Accept-Encoding", "identity")]
        if has_body:
            headers.append(("Content-Type", "application/json"))
        if self._credential is not None:
            headers += self._credential.headers()
        return headers

    def reflects_key(self, body: bytes) -> bool:
        """Does the reply hold the key, verbatim, encoded or in pieces (reflection.py)?"""
        return self._reflection.found(body)


__all__ = ["Policy"]
