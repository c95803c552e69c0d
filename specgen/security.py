"""Propose a grant's token block from the document's `securitySchemes`.

An operator should not have to work out from prose that an API wants
`X-API-Key: <key>` rather than `Authorization: Bearer <key>`. Where the document states
it (an `http` bearer or basic scheme, an `apiKey` in a header or the query), the
proposal is exact; where it cannot be inferred (an `apiKey` header named `Authorization`
whose prefix is only given in prose, as Mem0's `Token <key>`; OAuth2 flows; OpenID
Connect; mutual TLS) the proposal says so instead of guessing.

Output of `propose(doc, env="API_TOKEN")`: one `Proposal` per scheme, in the order the
document's top-level `security` requirements name them, then the remaining schemes by
name. `Proposal.token` is the token block a grant would carry, a JSON-ready dict:

* a header with a value template (the key is `{token}`)::

      {"type": "static", "env": "API_TOKEN", "header": "Authorization", "value": "Bearer {token}"}
      {"type": "static", "env": "API_TOKEN", "header": "X-API-Key", "value": "{token}"}

* HTTP basic, user and password from two variables::

      {"type": "basic", "user_env": "API_TOKEN_USER", "password_env": "API_TOKEN_PASSWORD"}

* an API key in the query, added by the broker after approval::

      {"type": "static", "env": "API_TOKEN", "query": "api_key"}

`token` is None when the block cannot be inferred; `note` then says why (and, when it
is set, adds what the operator should confirm). `scheme` is the securitySchemes key.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from specgen.errors import SpecError
from specgen.quoting import go_quote
from specgen.refs import Refs


@dataclass(frozen=True)
class Proposal:
    """The token block one security scheme needs, or why it cannot be proposed."""

    scheme: str
    token: dict[str, str] | None
    note: str = ""


def _static(env: str, **where: str) -> dict[str, str]:
    return {"type": "static", "env": env, **where}


def propose_one(name: str, scheme: Any, env: str = "API_TOKEN") -> Proposal:
    """The proposal for one Security Scheme Object (already `$ref`-resolved)."""
    if not isinstance(scheme, dict):
        return Proposal(name, None, "the scheme is not an object")
    kind = str(scheme.get("type") or "")
    if kind == "http":
        http = str(scheme.get("scheme") or "").lower()
        if http == "bearer":
            return Proposal(name, _static(env, header="Authorization", value="Bearer {token}"))
        if http == "basic":
            return Proposal(
                name,
                {"type": "basic", "user_env": f"{env}_USER", "password_env": f"{env}_PASSWORD"},
            )
        return Proposal(name, None, f"HTTP scheme {go_quote(http)} is not one a grant can send")
    if kind == "apiKey":
        where = str(scheme.get("in") or "")
        header = str(scheme.get("name") or "")
        if not header:
            return Proposal(name, None, "the apiKey scheme names no parameter")
        if where == "query":
            return Proposal(name, _static(env, query=header))
        if where == "header":
            if header.lower() == "authorization":
                return Proposal(
                    name,
                    None,
                    "an apiKey in the Authorization header: its prefix (Bearer, Token, ...) is "
                    "not stated in a form specgen can read; write the value template yourself, "
                    'e.g. {"header": "Authorization", "value": "Token {token}"}',
                )
            return Proposal(name, _static(env, header=header, value="{token}"))
        if where == "cookie":
            return Proposal(name, None, "an apiKey in a cookie is not one a grant can send")
        return Proposal(name, None, f"apiKey location {go_quote(where)} is unknown")
    if kind in ("oauth2", "openIdConnect"):
        return Proposal(
            name,
            _static(env, header="Authorization", value="Bearer {token}"),
            f"{kind}: the grant sends an access token you obtain; it does not run the flow",
        )
    return Proposal(name, None, f"scheme type {go_quote(kind)} is not one a grant can send")


def propose(doc: dict[str, Any], env: str = "API_TOKEN") -> list[Proposal]:
    """A proposal per security scheme, the ones the document requires first."""
    components = doc.get("components")
    schemes = components.get("securitySchemes") if isinstance(components, dict) else None
    if not isinstance(schemes, dict):
        return []
    order: list[str] = []
    security = doc.get("security")
    for requirement in security if isinstance(security, list) else []:
        if isinstance(requirement, dict):
            order += [k for k in requirement if k in schemes and k not in order]
    order += sorted(k for k in schemes if k not in order)
    out = []
    for key in order:
        scheme = schemes[key]
        if isinstance(scheme, dict) and isinstance(scheme.get("$ref"), str):
            try:
                scheme = Refs(doc, "document").deref(scheme, f"securityScheme {key}")
            except SpecError:  # a broken reference: say so rather than fail the proposal
                out.append(Proposal(str(key), None, "the scheme's $ref does not resolve"))
                continue
        out.append(propose_one(str(key), scheme, env))
    return out
