"""Every fixed text a guest or an operator sees from the runtime, in one place.

One prefix (`MSG_`), one definition per text. A guest receives a refusal's text as the
body of a host-call reply, always ending in a newline (`reply_text`); the same text is
never spelt twice, so the sandbox's and the broker's "budget exhausted" cannot drift
apart. Texts that carry the operator's own data (the grants loader's field names and
values) are built where the data is checked, and say which field they name.
"""

from __future__ import annotations

# -- host-call refusals the broker makes (the reference's texts) --------------------------
MSG_ENDED = "host api grant has ended"
MSG_CAPACITY = "host api broker is at capacity"
MSG_BUDGET = "host api call budget for this run is exhausted"
MSG_FORBIDDEN = "forbidden by sandbox capability allowlist"
MSG_TOO_LARGE = "host api request body too large (over 10 MiB)"
MSG_UPSTREAM = "host api unavailable"
MSG_ROUTE_BUDGET = "host api call budget for this route is exhausted"
MSG_SHED = "host api is shedding load: upstream reported degraded"
MSG_QUOTA = "host api quota reached: {name}"
MSG_QUOTA_STORE_DOWN = (
    "host api quota store unavailable; calls of this grant are refused until it answers"
)
MSG_HELD = "host api broker holds too many request bytes; await earlier calls first"
MSG_APPROVAL_DECLINED = "approval declined"
#: A call the grant says needs a person's yes, in a run with no way to ask one.
MSG_APPROVAL_UNAVAILABLE = (
    "approval declined: this call needs a person's approval and no one can be asked"
)
# -- why an upstream call gave nothing (runtime.broker.upstream.Failure), to the guest ---
MSG_UPSTREAM_UNREACHABLE = "host api unreachable"
MSG_UPSTREAM_TIMEOUT = "host api timed out"
MSG_UPSTREAM_TLS = "host api TLS handshake failed"
MSG_UPSTREAM_TOO_LARGE = "host api response too large (over 4 MiB)"
MSG_UPSTREAM_BAD_RESPONSE = "host api response malformed"
# (a reply that carried the key back gets MSG_UPSTREAM: no oracle for the check)

# -- host-call refusals the sandbox makes before any handler sees the call ---------------
MSG_BROKER_UNAVAILABLE = "host api broker unavailable"
MSG_ENVELOPE_TOO_LARGE = "host api request envelope too large"
MSG_ENVELOPE_INVALID = "invalid host api request envelope"
# (and MSG_BUDGET, when the sandbox's own host-call counter runs out)

# -- exceptions thrown into the guest ----------------------------------------------------
MSG_ENVELOPE_REQUIRED = "host api request envelope is required"
MSG_INVALID_RESPONSE = "host api bridge returned an invalid response"
MSG_NESTED = "host api calls nested too deeply"
MSG_TOO_MANY_PENDING = "too many host api calls waiting for a reply"

# -- the guest's stderr at the end of a run ----------------------------------------------
MSG_REJECTION_PREFIX = "Possibly unhandled promise rejection: "
MSG_UNTRACKED_REJECTION = "(one of more than 1000 pending rejections; its reason was not kept)"
MSG_GUEST_ABORTED = "guest aborted: wasm error: {cause}"

# -- the operator's terminal (`specgen run`) ---------------------------------------------
MSG_NOT_AVAILABLE = "grant_profile {name} is not available to this caller"
MSG_OUTPUT_TRUNCATED = "specgen: guest output was truncated at the sandbox's limit"
MSG_TIMED_OUT = "specgen: the run timed out after {timeout_s:g} s"
MSG_AUDIT = "audit: {audit}"
MSG_INTERNAL = (
    "specgen: the run was ended by an internal error ({kind}), exit 70; its trace and audit follow"
)


def reply_text(message: str) -> bytes:
    """A refusal as a guest receives it in a reply body: the text plus a newline."""
    return (message + "\n").encode("ascii")


__all__ = [name for name in dir() if name.startswith("MSG_")] + ["reply_text"]
