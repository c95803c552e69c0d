"""How an approved request carries the operator's key: one small class per kind.

A `Credential` is the only object that reveals a `Secret`, and only in two places: the
headers it adds last to a request the policy has already approved, and the forms of the
key a reply must not contain (an echo endpoint, a debug page reflecting the header),
which the broker checks before delivering anything to the guest. Today there is one
kind, `Bearer` (`Authorization: Bearer <key>`); a new kind is a new class here and one
line in `credential_for`, with no change to the policy, the upstream or the sandbox.
"""

from __future__ import annotations

from typing import Protocol

from runtime.broker.grants import Profile, Secret
from runtime.broker.reflection import Reflection


class Credential(Protocol):
    """Attaches a key to an approved request and names what must never come back."""

    def headers(self) -> list[tuple[str, str]]:
        """Headers added after every other header of an approved request."""
        ...

    def secrets(self) -> tuple[str, ...]:
        """The raw values a reply is checked for before the guest may see it."""
        ...


class Bearer:
    """`Authorization: Bearer <key>` (RFC 6750), the reference's static token."""

    __slots__ = ("_token",)

    def __init__(self, token: Secret) -> None:
        self._token = token

    def headers(self) -> list[tuple[str, str]]:
        return [("Authorization", "Bearer " + self._token.reveal())]

    def secrets(self) -> tuple[str, ...]:
        return (self._token.reveal(),)

    def __repr__(self) -> str:
        return "Bearer(<hidden>)"


def credential_for(profile: Profile) -> Credential | None:
    """The profile's credential, or None when the grant carries no key."""
    if profile.token is None:
        return None
    return Bearer(profile.token)


def reflects(body: bytes, credential: Credential | None) -> bool:
    """Does `body` hold a secret, verbatim, encoded or in long pieces? (reflection.py)

    Builds the needles on every call; the broker's policy keeps one `Reflection`.
    """
    if credential is None:
        return False
    return Reflection(credential.secrets()).found(body)


__all__ = ["Bearer", "Credential", "credential_for", "reflects"]
