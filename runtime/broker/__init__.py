"""The broker: the operator's grants, the decision on each host call, the key, the trace.

It answers a `runtime.contract.HostRequest` with a `HostReply` and knows nothing about
WebAssembly: this package never imports `runtime.sandbox` (a test draws the import
graph to keep it so). Modules: `grants` (the operator's file), `handler` (`Broker`, one
run's session), `policy` (approve a call and build its request), `token_block` (the
grant's token block: header, query, basic or jwt), `credentials` (how the key is
attached), `tokens` (per-run jwt minting), `caps` (route_max_calls), `breaker`
(backpressure after an upstream 429/503, health probe), `upstream` (send and read the
reply, bounded), `transport` (every socket operation ends at the call's deadline),
`trace` (metadata-only record, audit line).
"""

from runtime.broker.grants import Grants, Profile, Secret, load
from runtime.broker.handler import (
    MAX_IN_FLIGHT,
    MAX_REQUEST_BODY,
    MAX_RESPONSE_BODY,
    Broker,
)
from runtime.broker.trace import (
    TraceRow,
    TraceSnapshot,
    audit_line,
    check_trace_id,
    format_table,
)

__all__ = [
    "MAX_IN_FLIGHT",
    "MAX_REQUEST_BODY",
    "MAX_RESPONSE_BODY",
    "Broker",
    "Grants",
    "Profile",
    "Secret",
    "TraceRow",
    "TraceSnapshot",
    "audit_line",
    "check_trace_id",
    "format_table",
    "load",
]
