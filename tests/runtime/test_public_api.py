"""The runtime's public API: the exported names are pinned, and every one resolves."""

from __future__ import annotations

import io

import runtime
from runtime import EngineError, GrantsError, PatchError, Refusal, TraceIdError, VmError

EXPORTED = {
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
    "Answer",
    "Approver",
    "Broker",
    "CannotAsk",
    "FixedApprover",
    "Question",
    "QUOTA_STORE_ENV",
    "Quota",
    "QuotaStoreUrlError",
    "TerminalApprover",
    "EngineError",
    "Grants",
    "GrantsError",
    "GuestGrant",
    "HostHandler",
    "HostReply",
    "HostRequest",
    "Limits",
    "PatchError",
    "Profile",
    "Refusal",
    "RunInputError",
    "RunOutcome",
    "RunPool",
    "RunResult",
    "Secret",
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
}


def test_the_exported_names_are_exactly_the_pinned_ones() -> None:
    assert set(runtime.__all__) == EXPORTED
    assert len(runtime.__all__) == len(EXPORTED)  # no name listed twice


def test_every_exported_name_resolves() -> None:
    for name in runtime.__all__:
        assert getattr(runtime, name) is not None, name


def test_every_refusal_is_one_hierarchy_and_keeps_its_builtin_base() -> None:
    for cls, base in [
        (GrantsError, ValueError),
        (TraceIdError, ValueError),
        (EngineError, RuntimeError),
        (PatchError, ValueError),
        (VmError, RuntimeError),
    ]:
        assert issubclass(cls, Refusal) and issubclass(cls, base), cls
    assert issubclass(PatchError, EngineError) and issubclass(VmError, EngineError)


def test_a_refusal_renders_one_line_and_carries_its_exit_code() -> None:
    err = EngineError("engine refused: it does not compile: first\nsecond line")
    out = io.StringIO()
    err.show(out)
    assert out.getvalue() == "specgen: engine refused: it does not compile: first\n"
    assert err.exit_code == runtime.EXIT_REFUSED == 1
    assert str(GrantsError("bad\nline")) == "bad\\u000aline"  # escaped, never two lines
