"""The MCP server's one door into the runtime: load a grant, run code through it.

Everything the server needs from the runtime goes through this adapter, and only
through the runtime's public API (`from runtime import ...`), so the server does not
depend on how the runtime's rooms are laid out. What leaves it is plain data (`Run`) with no key in it: the server never holds a
`Profile` or a `Secret`, only a `Grant` that can run code and say whether a text
contains its key.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import orjson

from runtime import (
    Approver,
    EngineError,
    GrantsError,
    Profile,
    Refusal,
    RunOutcome,
    RunPool,
    Secret,
    TraceSnapshot,
    audit_line,
    check_globals,
    end_runs_now,
    load_grants,
    run_profile,
    select_profile,
)
from specgen.allow import AllowEntry


class GrantError(ValueError):
    """A grant that cannot be served; the text is one line, never a secret."""


@dataclass(frozen=True)
class Call:
    seq: int
    method: str
    route: str
    status: int
    delivered: bool
    #: Why nothing was delivered (the trace row's failure), else None.
    failure: str | None = None
    #: For a call the grant held for approval: approved, declined, timed_out or
    #: unavailable (no one could be asked); None for every other call.
    approval: str | None = None


@dataclass(frozen=True)
class Run:
    stdout: str
    stderr: str
    stdout_truncated: bool
    stderr_truncated: bool
    exit_code: int
    timed_out: bool
    duration_s: float
    calls: tuple[Call, ...]
    denied: int
    dropped: int
    #: The run's audit line, exactly as `specgen run` writes it (runtime.audit_line).
    audit: str = ""
    #: The rule id (runtime.refusals.RULES) of each call the broker refused, in order.
    refused: tuple[str, ...] = ()


class _Runs:
    """Running code through a grant: what `Grant` (one profile) and `Together` (several in
    one sandbox) share; each says which profiles a run is sent with (`_sent`)."""

    _pool: RunPool | None
    _caller: str | None
    timeout_s: float
    memory_mb: int

    @property
    def _sent(self) -> Profile | tuple[Profile, ...]:
        raise NotImplementedError

    def _who(self, caller: str | None) -> str:
        who = caller or self._caller
        if who is None:
            raise GrantError("no caller to run for")
        return who

    def run(
        self,
        code: str,
        trace_id: str | None = None,
        caller: str | None = None,
        approver: Approver | None = None,
    ) -> Run:
        """Run `code` in a fresh sandbox through the grant for `caller` (default: the
        one named at start-up). Blocking; thread-safe.

        `approver` asks a person about the calls the grant holds (with a pool, from the
        dispatching thread, on the worker's behalf); without one they are refused."""
        queued = self.submit(code, trace_id, caller, approver)
        if queued is not None:
            return queued.result()
        who = self._who(caller)
        outcome = run_profile(
            code,
            self._sent,
            caller=who,
            timeout_s=self.timeout_s,
            memory_mb=self.memory_mb,
            trace_id=trace_id,
            approver=approver,
        )
        return _as_run(outcome, who)

    def submit(
        self,
        code: str,
        trace_id: str | None = None,
        caller: str | None = None,
        approver: Approver | None = None,
    ) -> concurrent.futures.Future[Run] | None:
        """`run`, queued on the pool for a caller that waits without a thread of its own
        (the server's event loop); None without a pool, where `run` is the only way. The
        outcome is made a `Run` on the pool's thread as it ends (the future's callback),
        so whoever awaits it only reads the result."""
        if self._pool is None:
            return None
        who = self._who(caller)
        queued = self._pool.submit(
            code,
            self._sent,
            caller=who,
            timeout_s=self.timeout_s,
            memory_mb=self.memory_mb,
            trace_id=trace_id,
            approver=approver,
        )
        done: concurrent.futures.Future[Run] = concurrent.futures.Future()

        def finish(ended: concurrent.futures.Future[RunOutcome]) -> None:
            if not done.set_running_or_notify_cancel():
                return  # the waiter gave up on it (it never does while a run is shielded)
            try:
                done.set_result(_as_run(ended.result(), who))
            except StopIteration:
                # An asyncio future refuses a StopIteration (its awaiter would never
                # wake): a RuntimeError, as anyio's threads make of one.
                done.set_exception(RuntimeError("a run raised StopIteration"))
            except BaseException as exc:
                done.set_exception(exc)

        queued.add_done_callback(finish)
        return done


class Grant(_Runs):
    """One selected profile, ready to run agent code for its caller (the one named at
    start-up, or with client authentication each request's authenticated caller)."""

    def __init__(
        self,
        profile: Profile,
        caller: str | None,
        timeout_s: float,
        memory_mb: int,
        pool: RunPool | None = None,
    ) -> None:
        self._profile = profile
        #: Warm worker processes for the runs (every core), or None to run on the calling
        #: thread. On the worker and gvisor tiers they are engine processes holding no
        #: key; on the process tier each loads the grants file itself. No key crosses a
        #: pipe either way.
        self._pool = pool
        self._caller = caller
        block = profile.credential
        #: Every secret the token block holds, whatever its kind (key, password, jwt key).
        self._secrets: tuple[Secret, ...] = (
            tuple(
                value
                for f in dataclasses.fields(block)
                if isinstance(value := getattr(block, f.name), Secret)
            )
            if block is not None
            else ()
        )
        self.timeout_s = timeout_s
        self.memory_mb = memory_mb

    @property
    def name(self) -> str:
        return self._profile.name

    @property
    def global_name(self) -> str:
        return self._profile.global_name

    @property
    def allow(self) -> tuple[AllowEntry, ...]:
        """The allow entries with the parameters, pins and bodies each permits: what the
        server's search, describe and instructions are cut to."""
        return self._profile.entries or tuple(AllowEntry(r) for r in self._profile.allow)

    @property
    def token_kind(self) -> str:
        """The token block's type as the description names it ("" for no credential):
        the same word `emit description --grants` reads from the file."""
        block = self._profile.credential
        if block is None:
            return ""
        name = type(block).__name__
        return "basic" if name == "BasicKey" else "jwt" if name == "JwtKey" else "static"

    @property
    def response_headers(self) -> tuple[str, ...]:
        """Response headers the profile lets agent code read on every route."""
        return self._profile.response_headers

    @property
    def route_response_headers(self) -> tuple[str, ...]:
        """Those only some routes' allow entries add (as grant_view.read_grant lists them)."""
        every = self._profile.response_headers
        return tuple(
            dict.fromkeys(h for e in self.allow for h in e.response_headers if h not in every)
        )

    def allows(self, caller: str) -> bool:
        """Is `caller` one of the profile's allowed_callers?"""
        return self._profile.allows(caller)

    @property
    def max_calls(self) -> int:
        return self._profile.max_calls

    @property
    def has_key(self) -> bool:
        return self._profile.credential is not None

    def leaks(self, text: str) -> bool:
        """Does `text` contain a secret of the grant's token block (the key, a basic
        password, a jwt signing key)? A last check before anything leaves the server; a
        run's minted jwt never reaches the guest unreflected (the broker's reply check)."""
        return any(secret.reveal() in text for secret in self._secrets)

    def not_run(
        self,
        trace_id: str | None,
        reason: str,
        mark: str = "not_run",
        caller: str | None = None,
    ) -> str:
        """The audit line of an execute with no run outcome: the same record as a run's,
        with no calls, and `mark` saying why (as the pool marks `worker_died`):
        `not_run` when it never reached a sandbox, `internal_error` (the fault's type
        name) when the run's outcome was lost to a fault around it, and with it the
        trace (a call may have reached the API)."""
        return _not_run_line(self.name, trace_id, mark, reason, caller or self._caller)

    @property
    def holds_calls(self) -> bool:
        """Does the grant hold any call for a person's approval?"""
        p = self._profile
        return bool(p.approve_methods) or any(e.approve for e in p.entries)

    @property
    def approval_timeout_s(self) -> float:
        return self._profile.approval_timeout_s

    @property
    def _sent(self) -> Profile:
        return self._profile


class Together(_Runs):
    """Several profiles' grants as one run's: each profile's client is its own global in
    the one sandbox and each call goes to its own profile's broker and credential
    (runtime.profile_set). It answers what the server asks of a `Grant`."""

    def __init__(self, grants: Sequence[Grant]) -> None:
        self.grants = tuple(grants)
        first = self.grants[0]
        self.timeout_s = first.timeout_s
        self.memory_mb = first.memory_mb
        self._pool = first._pool
        self._caller = first._caller

    @property
    def name(self) -> str:
        return ",".join(g.name for g in self.grants)

    @property
    def max_calls(self) -> int:
        return sum(g.max_calls for g in self.grants)

    @property
    def holds_calls(self) -> bool:
        return any(g.holds_calls for g in self.grants)

    @property
    def approval_timeout_s(self) -> float:
        return max(g.approval_timeout_s for g in self.grants)

    def allows(self, caller: str) -> bool:
        return all(g.allows(caller) for g in self.grants)

    def leaks(self, text: str) -> bool:
        return any(g.leaks(text) for g in self.grants)

    def not_run(
        self,
        trace_id: str | None,
        reason: str,
        mark: str = "not_run",
        caller: str | None = None,
    ) -> str:
        names = tuple(g.name for g in self.grants)
        return _not_run_line(names, trace_id, mark, reason, caller or self._caller)

    @property
    def _sent(self) -> tuple[Profile, ...]:
        return tuple(g._profile for g in self.grants)


def as_one(grants: Sequence[Grant]) -> Grant | Together:
    """The grant a run of `grants` goes through: the one itself, or all of them together."""
    return grants[0] if len(grants) == 1 else Together(grants)


def _as_run(outcome: RunOutcome, who: str) -> Run:
    """The plain record of a run's outcome the server answers and audits from."""
    result, trace = outcome.result, outcome.trace
    return Run(
        stdout=result.stdout,
        stderr=result.stderr,
        stdout_truncated=result.stdout_truncated,
        stderr_truncated=result.stderr_truncated,
        exit_code=result.exit_code,
        timed_out=result.timed_out,
        duration_s=result.duration_s,
        calls=tuple(
            Call(r.seq, r.method, r.route, r.status, r.delivered, r.failure, r.approval)
            for r in trace.rows
        ),
        denied=trace.denied,
        dropped=trace.dropped,
        audit=_with_caller(orjson.loads(outcome.audit), who),
        refused=tuple(r.rule for r in trace.refused),
    )


def _not_run_line(
    profile: str | tuple[str, ...],
    trace_id: str | None,
    mark: str,
    reason: str,
    caller: str | None,
) -> str:
    """The audit record of a run with no outcome: no calls, and `mark` saying why."""
    record = orjson.loads(audit_line(profile, TraceSnapshot((), 0, 0), trace_id))
    record[mark] = reason
    return _with_caller(record, caller)


def _with_caller(record: dict[str, object], caller: str | None) -> str:
    """The audit record with `caller` (who ran the code) right after `profile`."""
    if caller is None:
        return orjson.dumps(record).decode("utf-8")
    first, *rest = record.items()
    return orjson.dumps(dict([first, ("caller", caller), *rest])).decode("utf-8")


def open_grant(
    grants_file: Path,
    profile_name: str,
    caller: str | None,
    *,
    base_url: str | None = None,
    timeout_s: float = 5.0,
    memory_mb: int = 256,
    workers: int = 0,
    isolation: str | None = None,
) -> Grant:
    """Load and select the profile as `specgen run` does; GrantError with one line on a fault.

    With `caller` None (client authentication: each request's token names its caller)
    the profile is selected by name only; `Grant.allows` then decides each request.
    `isolation` is the runs' tier: worker by default when there are workers, process
    (this process's threads) when there are none; a tier that cannot start is refused.
    """
    (grant,) = open_grants(
        grants_file,
        (profile_name,),
        caller,
        base_urls={profile_name: base_url} if base_url is not None else None,
        timeout_s=timeout_s,
        memory_mb=memory_mb,
        workers=workers,
        isolation=isolation,
    )
    return grant


def open_grants(
    grants_file: Path,
    profile_names: Sequence[str],
    caller: str | None,
    *,
    base_urls: Mapping[str, str] | None = None,
    timeout_s: float = 5.0,
    memory_mb: int = 256,
    workers: int = 0,
    isolation: str | None = None,
    wait: bool = True,
) -> tuple[Grant, ...]:
    """`open_grant` for several profiles of one grants file, sharing one pool of workers.

    With a `caller`, every profile must allow it; without one (client authentication)
    each request's caller gets the profiles that allow it. `base_urls` moves a profile's
    calls (by profile name) to another of its allowed origins. With `wait=False` the
    pool's engine processes may still be starting: `pool_started` then waits for them."""
    if len(set(profile_names)) != len(profile_names):
        raise GrantError("each profile may be served once")
    moved = dict(base_urls or {})
    try:
        grants = load_grants(grants_file)
        profiles = []
        for name in profile_names:
            if caller is not None:  # the operator's --caller: say which name is wrong
                profile = select_profile(grants, name, caller)
            else:
                profile = _by_name(grants.profiles, name)
            if name in moved:
                profile = profile.with_base_url(moved.pop(name))
            profiles.append(profile)
        if len(profiles) > 1:
            check_globals(profiles)
    except GrantsError as exc:
        raise GrantError(str(exc)) from None
    if moved:
        raise GrantError(
            f"base_url for {orjson.dumps(next(iter(moved))).decode()}: not a served profile"
        )
    tier = isolation or ("worker" if workers > 0 else "process")
    if tier != "process" and workers <= 0:
        raise GrantError(f"--isolation {tier} needs worker processes; --workers 0 runs in this one")
    try:
        pool = (
            RunPool(grants_file, workers=workers, isolation=tier, wait=wait)
            if workers > 0
            else None
        )
    except Refusal as exc:
        raise GrantError(exc.line) from None
    return tuple(Grant(p, caller, timeout_s, memory_mb, pool) for p in profiles)


def pool_started(grants: Sequence[Grant]) -> None:
    """Wait for the engine processes of the pool `open_grants(wait=False)` gave the
    grants (one, shared); GrantError, the pool closed, when its tier cannot start here."""
    pool = grants[0]._pool if grants else None
    try:
        if pool is not None:
            pool.started()
    except Refusal as exc:
        raise GrantError(exc.line) from None


def interrupt_runs(grants: Sequence[Grant]) -> None:
    """End every run going on now, each still with its audit line (Ctrl-C): runs in this
    process by their clocks and the engine's epoch, pooled ones by killing the process
    running them."""
    end_runs_now()
    pool = grants[0]._pool if grants else None
    if pool is not None:
        pool.interrupt()


def close_pool(grants: Sequence[Grant]) -> None:
    """Stop the grants' pool: a server that will not serve leaves no worker behind."""
    pool = grants[0]._pool if grants else None
    if pool is not None:
        pool.close()


def _by_name(profiles: tuple[Profile, ...] | list[Profile], name: str) -> Profile:
    for profile in profiles:
        if profile.name == name:
            return profile
    raise GrantError(f"grant_profile {orjson.dumps(name).decode()} is not in the grants file")


def engine_error() -> type[Exception]:
    """The exception a missing or tampered engine raises."""
    return EngineError
