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
      selection.py a profile chosen for the operator's command, saying which name is wrong
      pool.py      RunPool: warm worker processes, runs on every core
      telemetry.py OpenTelemetry spans, metrics and audit logs; off (no SDK) unless asked
      cli.py       `specgen run`

      tiers/       the isolation tiers: the engine in another process than the key

`sandbox/` and `broker/` never import each other; `session.py` composes them.

Names resolve on first use (PEP 562), so a process that needs only the sandbox (an
engine process, `runtime.tiers.engine_process`) never loads the broker, the grants or
httpx: importing a submodule runs this file first, and eager imports here would put
the broker's code in every engine process.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

#: Each public name: the module it lives in and its name there.
_EXPORTS: dict[str, tuple[str, str]] = {
    "FixedApprover": ("runtime.approvers", "FixedApprover"),
    "TerminalApprover": ("runtime.approvers", "TerminalApprover"),
    "Answer": ("runtime.broker.approval", "Answer"),
    "Approver": ("runtime.broker.approval", "Approver"),
    "CannotAsk": ("runtime.broker.approval", "CannotAsk"),
    "Question": ("runtime.broker.approval", "Question"),
    "MAX_APPROVAL_TIMEOUT_S": ("runtime.broker.approval", "MAX_APPROVAL_TIMEOUT_S"),
    "QUOTA_STORE_ENV": ("runtime.broker.quotas", "STORE_ENV"),
    "Quota": ("runtime.broker.quotas", "Quota"),
    "QuotaStoreUrlError": ("runtime.broker.quotas", "StoreUrlError"),
    "check_quota_store": ("runtime.broker.quotas", "check_url"),
    "Broker": ("runtime.broker", "Broker"),
    "Grants": ("runtime.broker", "Grants"),
    "Profile": ("runtime.broker", "Profile"),
    "Secret": ("runtime.broker", "Secret"),
    "TraceRow": ("runtime.broker", "TraceRow"),
    "TraceSnapshot": ("runtime.broker", "TraceSnapshot"),
    "audit_line": ("runtime.broker", "audit_line"),
    "check_trace_id": ("runtime.broker", "check_trace_id"),
    "format_table": ("runtime.broker", "format_table"),
    "load_grants": ("runtime.broker", "load"),
    "HostHandler": ("runtime.contract", "HostHandler"),
    "HostReply": ("runtime.contract", "HostReply"),
    "HostRequest": ("runtime.contract", "HostRequest"),
    "EXIT_REFUSED": ("runtime.errors", "EXIT_REFUSED"),
    "EngineError": ("runtime.errors", "EngineError"),
    "GrantsError": ("runtime.errors", "GrantsError"),
    "PatchError": ("runtime.errors", "PatchError"),
    "Refusal": ("runtime.errors", "Refusal"),
    "RunInputError": ("runtime.errors", "RunInputError"),
    "TraceIdError": ("runtime.errors", "TraceIdError"),
    "VmError": ("runtime.errors", "VmError"),
    "RunPool": ("runtime.pool", "RunPool"),
    "DEFAULT_MEMORY_MB": ("runtime.sandbox", "DEFAULT_MEMORY_MB"),
    "DEFAULT_TIMEOUT_S": ("runtime.sandbox", "DEFAULT_TIMEOUT_S"),
    "EXIT_ERROR": ("runtime.sandbox", "EXIT_ERROR"),
    "EXIT_INTERNAL": ("runtime.sandbox", "EXIT_INTERNAL"),
    "EXIT_OK": ("runtime.sandbox", "EXIT_OK"),
    "EXIT_TIMEOUT": ("runtime.sandbox", "EXIT_TIMEOUT"),
    "EXIT_TRAP": ("runtime.sandbox", "EXIT_TRAP"),
    "MAX_MEMORY_MB": ("runtime.sandbox", "MAX_MEMORY_MB"),
    "MAX_TIMEOUT_S": ("runtime.sandbox", "MAX_TIMEOUT_S"),
    "MIN_MEMORY_MB": ("runtime.sandbox", "MIN_MEMORY_MB"),
    "GuestGrant": ("runtime.sandbox", "GuestGrant"),
    "Limits": ("runtime.sandbox", "Limits"),
    "RunResult": ("runtime.sandbox", "RunResult"),
    "host_call_deadline": ("runtime.sandbox", "host_call_deadline"),
    "run_sandbox": ("runtime.sandbox", "run"),
    "check_globals": ("runtime.broker.several", "check_globals"),
    "RunOutcome": ("runtime.session", "RunOutcome"),
    "end_runs_now": ("runtime.session", "end_runs_now"),
    "run_profile": ("runtime.session", "run_profile"),
    "run_with_grant": ("runtime.session", "run_with_grant"),
    "select_profile": ("runtime.selection", "select_profile"),
}

if TYPE_CHECKING:  # what a type checker and a reader see; nothing is imported at run time
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
    from runtime.broker.approval import (
        MAX_APPROVAL_TIMEOUT_S,
        Answer,
        Approver,
        CannotAsk,
        Question,
    )
    from runtime.broker.quotas import STORE_ENV as QUOTA_STORE_ENV
    from runtime.broker.quotas import Quota
    from runtime.broker.quotas import StoreUrlError as QuotaStoreUrlError
    from runtime.broker.quotas import check_url as check_quota_store
    from runtime.broker.several import check_globals
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
    from runtime.selection import select_profile
    from runtime.session import RunOutcome, end_runs_now, run_profile, run_with_grant


def __getattr__(name: str) -> Any:
    if name == "messages":
        return importlib.import_module("runtime.messages")
    try:
        module, attr = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module 'runtime' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


__all__ = [
    "DEFAULT_MEMORY_MB",
    "DEFAULT_TIMEOUT_S",
    "EXIT_ERROR",
    "EXIT_INTERNAL",
    "EXIT_OK",
    "EXIT_REFUSED",
    "EXIT_TIMEOUT",
    "EXIT_TRAP",
    "MAX_APPROVAL_TIMEOUT_S",
    "MAX_MEMORY_MB",
    "MAX_TIMEOUT_S",
    "MIN_MEMORY_MB",
    "QUOTA_STORE_ENV",
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
    "Quota",
    "QuotaStoreUrlError",
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
    "check_globals",
    "check_quota_store",
    "check_trace_id",
    "end_runs_now",
    "format_table",
    "host_call_deadline",
    "load_grants",
    "messages",
    "run_profile",
    "run_sandbox",
    "run_with_grant",
    "select_profile",
]
