"""Per-run short-lived tokens: the `jwt` token type.

Why: a static key handed to the broker is valid for as long as the operator leaves it
in place, for anyone who obtains it. A jwt profile instead holds a signing key and mints,
for each run, an HS256 token bound to the caller (`sub`) and the run (`jti`), carrying the
profile's scopes and expiring with the run: `exp = now + min(ttl_sec, run timeout + 5 s)`.
A token that leaks despite the broker (an upstream log, a proxy) is useless minutes later
and names who it was minted for. Signing uses joserfc, a maintained JOSE library; only
the claim set and the subject check are ours.
"""

from __future__ import annotations

import math
import secrets
import time

from runtime.broker.token_block import JwtKey, Secret
from runtime.errors import GrantsError

#: Added to the run's timeout so a call sent just before the deadline still verifies.
RUN_SLACK_S = 5

MSG_NO_CALLER = (
    "grant_profile mints a per-caller credential and requires an authenticated caller; "
    "refusing to run it without one (e.g. open dev mode)"
)
MSG_BAD_SUBJECT = "host-api grant: subject-bound minter requires a stable authenticated subject"


def mint(
    block: JwtKey,
    *,
    caller: str | None,
    scopes: tuple[str, ...] = (),
    run_timeout_s: float | None = None,
    now: float | None = None,
) -> Secret:
    """One run's token, signed with the profile's key; GrantsError without a fit caller."""
    if caller is None:
        raise GrantsError(MSG_NO_CALLER)
    if not _stable_subject(caller):
        raise GrantsError(MSG_BAD_SUBJECT)
    issued = int(time.time() if now is None else now)
    ttl = block.ttl_s
    if run_timeout_s is not None:
        ttl = min(ttl, math.ceil(run_timeout_s) + RUN_SLACK_S)
    claims: dict[str, object] = {
        "aud": block.audience,
        "exp": issued + ttl,
        "iat": issued,
        "jti": secrets.token_hex(16),
        "nbf": issued,
        "sub": caller,
    }
    if block.issuer:
        claims["iss"] = block.issuer
    if scopes:
        claims["scope"] = " ".join(scopes)
    header: dict[str, object] = {"alg": "HS256", "typ": "JWT"}
    if block.key_id:
        header["kid"] = block.key_id
    # joserfc is imported by the first run that mints (~50 ms), not by every process
    # that loads grants: a server of static keys never needs it.
    from joserfc import jwt
    from joserfc.jwk import OctKey

    key = OctKey.import_key(block.secret.reveal().encode("utf-8"))
    token = jwt.encode(header, dict(sorted(claims.items())), key, algorithms=["HS256"])
    if not token or not all(0x21 <= ord(ch) <= 0x7E for ch in token):
        raise GrantsError("host-api grant: minter returned an empty or invalid bearer token")
    return Secret(token)


def _stable_subject(caller: str) -> bool:
    """Non-empty, not `*`, no surrounding whitespace or control characters, valid UTF-8."""
    if not caller or caller == "*" or caller != caller.strip():
        return False
    if any(ord(ch) < 0x20 or 0x7F <= ord(ch) < 0xA0 for ch in caller):
        return False
    try:
        caller.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


__all__ = ["MSG_BAD_SUBJECT", "MSG_NO_CALLER", "RUN_SLACK_S", "mint"]
