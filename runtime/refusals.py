"""The one table of refusal rules: what the guest reads, what the model is told, what
the trace and the audit record.

Why one table: a refusal used to be described three ways (the guest's reply text, the
MCP hint, the trace's count) by three modules that could each be wrong about the
others; a call with an unlisted parameter told the model its route was not granted.
Here each rule has a stable id (the word the trace and the audit line carry), the
status the broker answers with, the guest's text and the model's hint. The broker
picks the rule where it refuses; everything else reads this table.

The guest's text may name a parameter, header or media type (the guest chose it, or
the operator did), never a value: `parameter not granted: sort`. A name that is not a
plain token is shown as a JSON string, so the text stays one ASCII line. The audit line
carries only the rule id and, when the call matched one, the allow entry (the
operator's own text); never a name the guest chose.

`route_not_granted` and `call_malformed` keep the reference implementation's bytes
(`forbidden by sandbox capability allowlist`), which the
raw-call tests pin against the Go reference; the trace and the audit tell the two
apart by rule id. The texts of budget, cap, capacity, held bytes, too large, breaker
and run ended are the reference's or were there before this table; the parameter,
pin and body-type texts are this runtime's own.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from runtime import messages

#: A name shown as it is; anything else is shown as a JSON string (ASCII, escaped).
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_.\-\[\]$@/+]{1,64}\Z")
#: Longest name shown; a longer one is cut (it is the guest's, so it says nothing new).
_MAX_NAME = 64


@dataclass(frozen=True)
class Rule:
    """One reason the runtime refuses a host call."""

    #: Stable id, as the trace and the audit line carry it.
    id: str
    #: The status of the broker's reply.
    status: int
    #: What the guest reads: the reply body (plus a newline), `{name}` filled in.
    text: str
    #: What the MCP server tells the model when a run had this refusal.
    hint: str


def _rules(*rules: Rule) -> dict[str, Rule]:
    return {rule.id: rule for rule in rules}


RULES: dict[str, Rule] = _rules(
    Rule(
        "route_not_granted",
        403,
        messages.MSG_FORBIDDEN,
        "route not granted: no allow entry of this grant matches the call's method and "
        "path (or the path is not canonical); search() lists the operations and path "
        "values the grant permits",
    ),
    Rule(
        "parameter_not_granted",
        403,
        "parameter not granted: {name}",
        "parameter not granted: the route is granted, but its allow entry does not list "
        "a query or header parameter the call sent; describe() lists the ones it permits",
    ),
    Rule(
        "pin_differs",
        403,
        "pinned value differs: {name}",
        "pinned value differs: the grant fixes this parameter's value; omit it (the "
        "broker adds the pin) or pass exactly the pinned value describe() shows",
    ),
    Rule(
        "body_type_not_granted",
        403,
        "body type not granted: {name}",
        "body type not granted: the allow entry permits no body, or not of this media "
        "type; describe() shows the body types the grant permits",
    ),
    Rule(
        "call_malformed",
        403,
        messages.MSG_FORBIDDEN,
        "call malformed: the route is granted, but a path value, parameter, header or "
        "body broke the broker's rules (a path value that is empty, '.' or '..' or holds "
        "'/', a control character, a repeated name, a value of the wrong shape, an "
        "oversized target); pass plain values through the generated methods",
    ),
    Rule(
        "budget_exhausted",
        429,
        messages.MSG_BUDGET,
        "budget spent: this grant allows {max_calls} host calls per run and the broker "
        "refused the ones after that (429); do fewer calls per run",
    ),
    Rule(
        "route_cap_exhausted",
        429,
        messages.MSG_ROUTE_BUDGET,
        "route cap reached: the grant caps calls to this route per run (429); do fewer",
    ),
    Rule(
        "breaker_open",
        503,
        messages.MSG_SHED,
        "breaker open: the API reported it is degraded (429/503), so the broker sheds "
        "calls for a while (503); wait and retry later",
    ),
    Rule(
        "held_bytes",
        429,
        messages.MSG_HELD,
        "held bytes: unanswered calls hold too many request bytes at once (429); await "
        "earlier calls before starting more",
    ),
    Rule(
        "body_too_large",
        413,
        messages.MSG_TOO_LARGE,
        "body too large: a request body is over the broker's 10 MiB limit (413)",
    ),
    Rule(
        "capacity",
        429,
        messages.MSG_CAPACITY,
        "capacity: too many calls in flight at once (429); wait for earlier calls",
    ),
    Rule(
        "run_ended",
        503,
        messages.MSG_ENDED,
        "run ended: a call came after the run's {timeout_s:g} s deadline or after the run "
        "finished (503)",
    ),
    Rule(
        "quota",
        429,
        messages.MSG_QUOTA,
        "quota reached: the grant limits this profile's calls over time, across runs "
        "(429; the refusal names the limit and the seconds until its window ends); wait "
        "that long, or do fewer calls",
    ),
    Rule(
        "quota_store_down",
        503,
        messages.MSG_QUOTA_STORE_DOWN,
        "quota store down: the store that counts this grant's quotas did not answer, so "
        "the broker refuses its calls rather than send them uncounted (503); tell the "
        "operator",
    ),
    Rule(
        # Reserved for the operator's approval step: a call the operator declined.
        "approval_declined",
        403,
        "approval declined",
        "approval declined: the operator declined this call; do not retry it unchanged",
    ),
)


def shown_name(name: str) -> str:
    """A guest- or operator-chosen name as a refusal text shows it: as it is when it is a
    plain token, else as a JSON string (ASCII), cut to _MAX_NAME characters."""
    if _PLAIN_NAME.match(name):
        return name
    return json.dumps(name[:_MAX_NAME], ensure_ascii=True)


def guest_text(rule: str, name: str = "") -> str:
    """The guest's text for `rule`, naming `name` where the rule names one."""
    text = RULES[rule].text
    return text.format(name=shown_name(name)) if "{name}" in text else text


def hint(rule: str, *, max_calls: int = 0, timeout_s: float = 0.0) -> str:
    """The model's hint for `rule`."""
    return RULES[rule].hint.format(max_calls=max_calls, timeout_s=timeout_s)


#: What each rule's guest text looks like in the guest's output, for the MCP server
#: to quote the named parameter back to the model (the texts with a `{name}` only).
NAMED_TEXTS: dict[str, re.Pattern[str]] = {
    rule.id: re.compile(re.escape(rule.text.split("{name}")[0]) + r'("(?:[^"\\]|\\.)*"|\S+)')
    for rule in RULES.values()
    if "{name}" in rule.text
}


__all__ = ["NAMED_TEXTS", "RULES", "Rule", "guest_text", "hint", "shown_name"]
