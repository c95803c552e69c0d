"""The sandbox, the broker and the grants that decide what agent code may call.

This module is the runtime's public API; everything else is private to it and may move.
Entry points (`specgen run`, later the MCP server), the example and tests use these names
only (a test pins the list, another draws the import graph):

    runtime/
      contract.py  HostRequest, HostReply, HostHandler: plain data between the two rooms
      errors.py    Refusal and its subclasses: one hierarchy, exit code and one line each
      messages.py  every fixed text a guest or operator sees
      sandbox/     QuickJS in WebAssembly; takes source, a handler and limits
      broker/      grants, policy, credentials, upstream, transport, trace
      session.py   one run: a fresh sandbox and a fresh broker, one audit line
      run_clock.py the run's deadline, stopped while a call waits for a person's approval
      approvers.py how `specgen run` asks for approval: the terminal, or --approve
      pool.py      RunPool: warm worker processes, runs on every core
      cli.py       `specgen run`

`sandbox/` and `broker/` never import each other; `session.py` composes them.
"""

from runtime import messages
from runtime.approvers import FixedApprover, TerminalApprover
from runtime.broker import (
    Broker,
    Grants,
    Profile,
    Secret,
    TraceRow,
    TraceSnapshot,
    audit_line,
    check_trace_id,
    format_table,
)
from runtime.broker import load as load_grants
from runtime.broker.approval import Answer, Approver, CannotAsk, Question
from runtime.contract import HostHandler, HostReply, HostRequest
from runtime.errors import (
    EXIT_REFUSED,
    EngineError,
    GrantsError,
    PatchError,
    Refusal,
    RunInputError,
    TraceIdError,
    VmError,
)
from runtime.pool import RunPool
from runtime.sandbox import (
    DEFAULT_MEMORY_MB,
    DEFAULT_TIMEOUT_S,
    EXIT_ERROR,
    EXIT_INTERNAL,
    EXIT_OK,
    EXIT_TIMEOUT,
    EXIT_TRAP,
    MAX_MEMORY_MB,
    MAX_TIMEOUT_S,
    MIN_MEMORY_MB,
    GuestGrant,
    Limits,
    RunResult,
    host_call_deadline,
)
from runtime.sandbox import run as run_sandbox
from runtime.session import RunOutcome, run_profile, run_with_grant

__all__ = [
    "DEFAULT_MEMORY_MB",
    "DEFAULT_TIMEOUT_S",
    "EXIT_ERROR",
    "EXIT_INTERNAL",
    "EXIT_OK",
    "EXIT_REFUSED",
    "EXIT_TIMEOUT",
    "EXIT_TRAP",
    "MAX_MEMORY_MB",
    "MAX_TIMEOUT_S",
    "MIN_MEMORY_MB",
    "Answer",
    "Approver",
    "Broker",
    "CannotAsk",
    "EngineError",
    "FixedApprover",
    "Grants",
    "GrantsError",
    "GuestGrant",
    "HostHandler",
    "HostReply",
    "HostRequest",
    "Limits",
    "PatchError",
    "Profile",
    "Question",
    "Refusal",
    "RunInputError",
    "RunOutcome",
    "RunPool",
    "RunResult",
    "Secret",
    "TerminalApprover",
    "TraceIdError",
    "TraceRow",
    "TraceSnapshot",
    "VmError",
    "audit_line",
    "check_trace_id",
    "format_table",
    "host_call_deadline",
    "load_grants",
    "messages",
    "run_profile",
    "run_sandbox",
    "run_with_grant",
]
