"""`specgen run`: agent code in a fresh sandbox, its host calls through the operator's grant.

Exposed as the click command `runtime.cli:run` for the `specgen.commands` entry-point
group, so the `specgen` group never imports the runtime. Everything that can be refused
(the code file, the grants file, the token variable, the profile, the caller, the
base-url override, the trace id, the limits, a missing or tampered engine) raises a
`runtime.Refusal`, and one path (`_refusals`) prints its own line (`specgen: ...`) and
exits with its code; after the run the exit code is the guest's (or EXIT_INTERNAL, 70,
when a host fault ended the run; the trace and audit are printed all the same). It
imports nothing from the runtime but the public API (`from runtime import ...`).

Text mode frames the guest's output so it can neither forge the trusted lines nor drive
the operator's terminal: every guest line is prefixed (`out| ` on stdout, `err| ` on
stderr) and its control characters (C0 but tab and newline, DEL, C1, bidi controls, line
separators) are shown escaped (`\x1b`, `\u202e`); every line the CLI itself writes
after the run starts with `specgen: `, which no prefixed guest line can. `--json` keeps
the output as raw JSON strings (JSON escapes control characters itself).

Several CODE files (or a directory, or a quoted glob pattern) make a batch: every file
is read and every input checked before the first run starts, the runs go to a
`runtime.RunPool` (`--workers`, one per core by default), each in a fresh sandbox with
its own broker, trace and audit line, and the results are printed in input order as
soon as each one and those before it are done. One CODE file runs in this process,
exactly as before batches existed, unless `--isolation worker|gvisor` asks for an
engine process (a RunPool of one); a batch runs on the worker tier unless told
otherwise (runtime/tiers/).
"""

from __future__ import annotations

import codecs
import concurrent.futures
import dataclasses
import functools
import glob
import io
import os
import re
import signal
import sys
import threading
import unicodedata
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TextIO, TypeVar

import click
import orjson

from runtime import (
    MIN_MEMORY_MB,
    Approver,
    FixedApprover,
    Limits,
    Profile,
    Refusal,
    RunInputError,
    RunOutcome,
    RunPool,
    TerminalApprover,
    check_trace_id,
    end_runs_now,
    format_table,
    load_grants,
    messages,
    run_with_grant,
    select_profile,
)
from specgen.files import read_input
from specgen.quoting import as_text
from specgen.quoting import quoted as _q

_MAX_CODE_BYTES = 1 << 20
#: Prefixes of the guest's lines in text mode; the CLI's own lines start `specgen: `.
_GUEST_OUT, _GUEST_ERR, _TRUSTED = "out| ", "err| ", "specgen: "
#: Characters that reorder or hide text on a terminal without being Cc.
_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")

#: In place of the trace table when the worker process running a batch's run died.
_MSG_WORKER_DIED = (
    "specgen: the worker process running it died; the calls it had made are in the audit"
    " with status 0 and failure worker_died (some may have reached the API)"
)
#: Characters that make a CODE argument a glob pattern when no file has that name.
_GLOB_MAGIC = frozenset("*?[")
#: The shell's exit status for a command ended by SIGINT (128 + 2).
EXIT_INTERRUPTED = 130
_MSG_INTERRUPTING = "specgen: interrupted: ending the run now (Ctrl-C again to leave at once)"
_MSG_INTERRUPTED = "specgen: the run was interrupted (Ctrl-C) and ended early"
_MSG_LEFT = "specgen: interrupted again: leaving without the rest of the record"
_MSG_NOT_STARTED = "interrupted (Ctrl-C) before it started"
#: How a run on a worker or engine process that an interrupt killed is reported.
_KILLED = frozenset({"WorkerDied", "EngineDied"})

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")

#: The isolation tiers, weakest first (runtime/tiers/launch.py says what each builds).
ISOLATION_TIERS = ("process", "worker", "gvisor")


def _interruptible(command: Callable[..., None]) -> Callable[..., None]:
    """`command` with Ctrl-C handled for its whole length (`_Interrupt`), given to it as
    its `interrupt` argument."""

    @functools.wraps(command)
    def with_interrupt(*args: Any, **kwargs: Any) -> None:
        with _Interrupt() as interrupt:
            command(*args, interrupt=interrupt, **kwargs)

    return with_interrupt


def isolation_option(help_text: str) -> Callable[[F], F]:
    """`--isolation process|worker|gvisor` as `specgen run` and `specgen mcp` take it."""
    return click.option(
        "--isolation",
        type=click.Choice(ISOLATION_TIERS),
        default=None,
        help=help_text,
    )


def quota_store_option(func: F) -> F:
    """`--quota-store URL` as `specgen run` and `specgen mcp` take it."""
    return click.option(
        "--quota-store",
        "quota_store",
        default=None,
        metavar="URL",
        help="Where the grant's quotas are counted: sqlite (the default: a file in the"
        " user's state folder), sqlite:///absolute/path, or redis://host:port/db to share"
        " them with other replicas. Also $PLIMSOLL_QUOTA_STORE. A store that does not"
        " answer refuses the calls its quotas cover.",
    )(func)


def use_quota_store(url: str | None) -> None:
    """Check `--quota-store` and hand it to every broker of this process and of the
    worker processes it starts (they inherit the environment): one line on a bad URL."""
    if url is None:
        return
    from runtime import QUOTA_STORE_ENV, QuotaStoreUrlError, check_quota_store

    try:
        check_quota_store(url)
    except QuotaStoreUrlError as exc:
        raise RunInputError(f"--quota-store: {exc}") from None
    os.environ[QUOTA_STORE_ENV] = url


def limits_error(timeout_s: float, memory_mb: int) -> str | None:
    """Why `--timeout` or `--memory-mb` cannot be a run's limit, for `specgen run` and
    `specgen mcp` alike (the server refuses it before it starts, not at each execute)."""
    if not 0 < timeout_s <= 30:
        return f"--timeout {timeout_s:g} must be more than 0 and at most 30 seconds"
    if not MIN_MEMORY_MB <= memory_mb <= 4096:
        return (
            f"--memory-mb {memory_mb} must be between {MIN_MEMORY_MB} (the engine's minimum)"
            " and 4096"
        )
    return None


def workers_option(help_text: str) -> Callable[[F], F]:
    """`--workers N` as `specgen run` and `specgen mcp` both take it (0 to 64, default
    one per core: `RunPool.default_workers()`, resolved by the command)."""
    return click.option(
        "--workers",
        type=click.IntRange(min=0, max=64),
        default=None,
        metavar="N",
        help=help_text,
    )


def _refusals(func: F) -> F:
    """The one refusal path: a `Refusal` prints its own line and exits with its code."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except Refusal as refusal:
            refusal.show()
            sys.exit(refusal.exit_code)

    return wrapper  # type: ignore[return-value]


@click.command("run")
@click.argument(
    "code_args", metavar="CODE.js...", nargs=-1, required=True, type=click.Path(path_type=Path)
)
@click.option(
    "--grants",
    "grants_file",
    required=True,
    type=click.Path(path_type=Path),
    help="The operator's grants file.",
)
@click.option(
    "--profile",
    "profile_names",
    required=True,
    multiple=True,
    help="The grant profile this run selects; repeatable: each profile's client is then"
    " its own global in the one sandbox (globals must differ), each call decided and sent"
    " with its own profile's grant and credential.",
)
@click.option(
    "--caller",
    required=True,
    help="Who asks for the run; must be in the profile's allowed_callers.",
)
@click.option(
    "--base-url",
    "base_urls",
    multiple=True,
    metavar="[PROFILE=]URL",
    help="Send the grant's calls to this origin instead (e.g. a loopback fake); it must be"
    " the profile's base_url or listed in its base_url_overrides. With several --profile,"
    " PROFILE=URL names the profile it moves (repeatable).",
)
@click.option(
    "--trace-id",
    default=None,
    help="The caller's own id for this run, written on the audit line (in a batch, the"
    " run of the Nth file gets ID:N).",
)
@click.option(
    "--timeout",
    "timeout_s",
    type=float,
    default=5.0,
    show_default=True,
    help="Wall-clock limit in seconds (at most 30), per run.",
)
@click.option(
    "--memory-mb",
    type=int,
    default=256,
    show_default=True,
    help="Guest memory limit in MiB (at most 4096), per run.",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print one JSON object with the output, exit code and audit record (in a batch,"
    " one line per file, in input order).",
)
@click.option(
    "--approve",
    "approve",
    multiple=True,
    metavar="all|none|ROUTE",
    help="Answer the approvals the grant asks for without a terminal: all (yes to every"
    ' held call), none (no to every one), or an allow route ("POST /v1/items", repeatable:'
    " yes to those, no to the rest). Without it a held call is asked on /dev/tty, and"
    " refused when there is no terminal.",
)
@workers_option(
    "Batch only: worker processes for the runs (default: one per core, at most one per"
    " file); 0 runs them one after another in this process."
)
@isolation_option(
    "Where agent code runs relative to the key: process (with the broker and the key, in"
    " this process), worker (an engine process under bubblewrap with no key, network,"
    " grants file or writable file) or gvisor (that process inside gVisor's runsc)."
    " Default: process for one file, worker for a batch. A tier that cannot start here"
    " is refused; none falls back to a weaker one."
)
@quota_store_option
@_refusals
@_interruptible
def run(
    code_args: tuple[Path, ...],
    grants_file: Path,
    profile_names: tuple[str, ...],
    caller: str,
    base_urls: tuple[str, ...],
    trace_id: str | None,
    timeout_s: float,
    memory_mb: int,
    as_json: bool,
    approve: tuple[str, ...],
    workers: int | None,
    isolation: str | None,
    quota_store: str | None,
    *,
    interrupt: _Interrupt,
) -> None:
    """Run CODE.js in a fresh sandbox with the profile's client and preamble.

    Several files, a directory (its *.js files) or a quoted glob pattern run as a batch:
    each file in its own fresh sandbox, on --workers processes, reported in input order.
    """
    use_quota_store(quota_store)
    files, batch = _code_files(code_args)
    codes = [_read_code(path) for path in files]
    refused = limits_error(timeout_s, memory_mb)
    if refused is not None:
        raise RunInputError(refused)
    trace_ids = _trace_ids(trace_id, len(files) if batch else 0)
    grants = load_grants(grants_file)
    chosen = tuple(select_profile(grants, name, caller) for name in profile_names)
    moved = _base_urls(base_urls, profile_names)
    chosen = tuple(p.with_base_url(moved[p.name]) if p.name in moved else p for p in chosen)
    # One profile runs as it always did; several are one run (runtime/profile_set.py).
    profile: Profile | tuple[Profile, ...] = chosen[0] if len(chosen) == 1 else chosen
    by_name: str | tuple[str, ...] = (
        profile_names[0] if len(profile_names) == 1 else tuple(profile_names)
    )
    limits = Limits(timeout_s=timeout_s, memory_mb=memory_mb)
    if isolation is None:
        isolation = "worker" if batch and workers != 0 else "process"
    if isolation != "process" and workers == 0:
        raise RunInputError(
            f"--isolation {isolation} runs the engine in another process; --workers 0 runs"
            " it in this one: choose one"
        )
    approver = _approver(approve)
    if isinstance(approver, FixedApprover):
        missing = approver.unknown(route for p in chosen for route in p.allow)
        if missing is not None:
            raise RunInputError(
                f"--approve {_q(missing)}: no allow entry of the profile has this route,"
                " so no call of it is ever held to approve"
            )

    held = approver.interrupt if isinstance(approver, TerminalApprover) else _nothing
    if not batch and isolation == "process":
        interrupt.runs(lambda: (end_runs_now(), held()))
        # A missing or tampered engine is an EngineError (a Refusal), never a traceback.
        outcome = interrupt.run(
            lambda: run_with_grant(
                codes[0], profile, limits=limits, trace_id=trace_id, caller=caller,
                approver=approver,
            )
        )  # fmt: skip
        _report(interrupt.outcome(outcome), timeout_s, as_json)
        sys.exit(EXIT_INTERRUPTED if interrupt.fired else outcome.result.exit_code)

    workers = RunPool.default_workers() if workers is None else workers
    if not batch:  # one file on an isolated tier: one engine process
        with RunPool(grants_file, workers=1, isolation=isolation) as single:
            interrupt.runs(lambda: (single.interrupt(), held()))
            future = single.submit(
                codes[0],
                profile,
                caller=caller,
                timeout_s=timeout_s,
                memory_mb=memory_mb,
                trace_id=trace_id,
                approver=approver,
            )
            outcome = future.result()
        _report(interrupt.outcome(outcome), timeout_s, as_json)
        sys.exit(EXIT_INTERRUPTED if interrupt.fired else outcome.result.exit_code)
    if workers == 0:
        interrupt.runs(lambda: (end_runs_now(), held()))
        outcomes: Iterator[RunOutcome | Refusal] = (
            _in_process(code, profile, limits, tid, caller, approver, interrupt)
            for code, tid in zip(codes, trace_ids, strict=True)
        )
        status = _report_batch(files, outcomes, timeout_s, as_json)
        sys.exit(EXIT_INTERRUPTED if interrupt.fired else status)
    pool = RunPool(grants_file, workers=min(workers, len(files)), isolation=isolation)
    futures: list[concurrent.futures.Future[RunOutcome]] = []

    def stop() -> None:
        """Runs not started never start; the ones going on end now."""
        for future in futures:
            future.cancel()
        pool.interrupt()
        held()

    interrupt.runs(stop)
    try:
        for code, tid in zip(codes, trace_ids, strict=True):
            futures.append(
                pool.submit(
                    code,
                    # By name unless --base-url moved it: the workers read the profile
                    # and its key from the grants file themselves (RunPool's rule).
                    profile if moved else by_name,
                    caller=caller,
                    timeout_s=timeout_s,
                    memory_mb=memory_mb,
                    trace_id=tid,
                    approver=approver,
                )
            )
        status = _report_batch(files, (_settled(f, interrupt) for f in futures), timeout_s, as_json)
    finally:
        for future in futures:  # a broken pipe: runs not started never start
            future.cancel()
        pool.close()
    sys.exit(EXIT_INTERRUPTED if interrupt.fired else status)


class _Interrupt:
    """Ctrl-C for the length of `specgen run`: the SIGINT handler, which never raises in
    the middle of a run or of its report.

    Before any run has started it leaves at once (exit 130: nothing ran, so there is no
    record to write). Once runs go on (`runs`), the first Ctrl-C ends them with the stop
    their starter gave, and each is still reported with its trace and audit record; a
    second leaves at once. Python runs a signal handler only on the main thread, between
    bytecodes, so a run in this process goes to a helper thread (`run`) while the main
    thread waits for it: a guest computing in the engine on the main thread would hold
    Ctrl-C until its timeout.
    """

    def __init__(self) -> None:
        self.fired = False
        self._stop: Callable[[], object] | None = None
        self._previous: Any = None

    def __enter__(self) -> _Interrupt:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)

    def runs(self, stop: Callable[[], object]) -> None:
        """Runs go on from now: Ctrl-C calls `stop` to end them."""
        self._stop = stop

    def _handle(self, signum: int, frame: object) -> None:
        if self._stop is None:  # nothing started: nothing to record
            _emit(sys.stderr, _trusted("interrupted"))
            raise SystemExit(EXIT_INTERRUPTED)
        if self.fired:
            _emit(sys.stderr, _trusted(_MSG_LEFT))
            os._exit(EXIT_INTERRUPTED)  # a run may still hold a thread: no teardown
        self.fired = True
        _emit(sys.stderr, _trusted(_MSG_INTERRUPTING))
        self._stop()

    def run(self, work: Callable[[], T]) -> T:
        """`work()` (a run in this process) on a helper thread, the main thread waiting
        where Ctrl-C reaches it."""
        box: list[tuple[bool, Any]] = []
        done = threading.Event()

        def target() -> None:
            try:
                box.append((True, work()))
            except BaseException as exc:  # handed to the main thread as it was raised
                box.append((False, exc))
            finally:
                done.set()

        threading.Thread(target=target, name="plimsoll-run", daemon=True).start()
        done.wait()
        ok, value = box[0]
        if not ok:
            raise value
        return value

    def outcome(self, outcome: RunOutcome) -> RunOutcome:
        """A run as reported: one that Ctrl-C ended (a run in this process ends as at its
        timeout, one on another process by that process's death) says so, exit 130; a
        run that ended otherwise, before the interrupt reached it, keeps its own ending."""
        result = outcome.result
        if not self.fired or not (result.timed_out or result.internal_error in _KILLED):
            return outcome
        result = dataclasses.replace(
            result, exit_code=EXIT_INTERRUPTED, timed_out=False, internal_error=""
        )
        return dataclasses.replace(outcome, result=result, interrupted=True)


def _nothing() -> None:
    """No approver to wake."""


class _NotStarted(Refusal):
    """A batch's file the interrupt kept from starting."""

    exit_code = EXIT_INTERRUPTED


def _code_files(args: tuple[Path, ...]) -> tuple[list[Path], bool]:
    """The CODE files in run order, and whether they are a batch.

    A directory stands for the *.js files directly in it (not hidden, sorted by name), a
    glob pattern that names no file for the files it matches (sorted), for callers that
    pass arguments without a shell. Either makes a batch even when it holds one file, so
    a script's output has one shape whatever the directory holds; one plain file is not.
    """
    files: list[Path] = []
    batch = len(args) > 1
    for arg in args:
        if arg.is_dir():
            try:
                found = sorted(
                    p
                    for p in arg.iterdir()
                    if p.suffix == ".js" and not p.name.startswith(".") and p.is_file()
                )
            except OSError as e:
                raise RunInputError(f"read {_q(str(arg))}: {e.strerror or e}") from None
            if not found:
                raise RunInputError(f"{_q(str(arg))}: a directory with no *.js file in it")
            files += found
            batch = True
        elif not arg.exists() and _GLOB_MAGIC.intersection(str(arg)):
            found = sorted(Path(p) for p in glob.glob(str(arg)) if Path(p).is_file())
            if not found:
                raise RunInputError(f"{_q(str(arg))}: no file matches the pattern")
            files += found
            batch = True
        else:
            files.append(arg)
    return files, batch


def _read_code(path: Path) -> str:
    """One CODE file's text: at most 1 MiB of UTF-8, or a refusal naming the file."""
    try:
        raw = read_input(path, _MAX_CODE_BYTES)  # a FIFO no one writes reads empty
    except OSError as e:
        raise RunInputError(f"read {_q(str(path))}: {e.strerror or e}") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise RunInputError(f"{_q(str(path))}: not valid UTF-8 at byte {e.start}") from None


def _trace_ids(trace_id: str | None, batch_size: int) -> list[str | None]:
    """Each run's trace id: the caller's own for one run; ID:1 ... ID:N for a batch, so
    every audit line of the batch carries the caller's id and its file's position."""
    if trace_id is None:
        return [None] * max(batch_size, 1)
    check_trace_id(trace_id)
    if not batch_size:
        return [trace_id]
    longest = f"{trace_id}:{batch_size}"
    if len(longest) > 128:
        raise RunInputError(
            f"--trace-id: with {batch_size} files the runs' ids go up to {longest[:20]}...:"
            f"{batch_size} ({len(longest)} characters), past the audit line's 128"
        )
    return [f"{trace_id}:{n}" for n in range(1, batch_size + 1)]


def _approver(values: tuple[str, ...]) -> Approver | None:
    """`--approve`'s rule, else the terminal (never stdin), else nobody: held calls are
    then refused."""
    if values:
        try:
            return FixedApprover.parse(values)
        except ValueError as exc:
            raise RunInputError(str(exc)) from None
    return TerminalApprover.open()


def _base_urls(values: tuple[str, ...], names: tuple[str, ...]) -> dict[str, str]:
    """--base-url values by the profile each moves: URL alone for a run of one profile,
    PROFILE=URL to name one of several."""
    if len(set(names)) != len(names):
        raise RunInputError("--profile: each profile once")
    moved: dict[str, str] = {}
    for value in values:
        name, sep, url = value.partition("=")
        if not sep or "://" in name:
            if len(names) != 1:
                raise RunInputError(
                    f"--base-url {_q(value)}: with several --profile, write PROFILE=URL"
                )
            name, url = names[0], value
        if name not in names:
            raise RunInputError(f"--base-url {_q(value)}: {_q(name)} is not a --profile")
        if name in moved:
            raise RunInputError(f"--base-url: profile {_q(name)} is moved twice")
        moved[name] = url
    return moved


def _in_process(
    code: str,
    profile: Profile | tuple[Profile, ...],
    limits: Limits,
    trace_id: str | None,
    caller: str,
    approver: Approver | None,
    interrupt: _Interrupt,
) -> RunOutcome | Refusal:
    if interrupt.fired:
        return _NotStarted(_MSG_NOT_STARTED)
    try:
        outcome = interrupt.run(
            lambda: run_with_grant(
                code, profile, limits=limits, trace_id=trace_id, caller=caller,
                approver=approver,
            )
        )  # fmt: skip
    except Refusal as refusal:
        return refusal
    return interrupt.outcome(outcome)


def _settled(
    future: concurrent.futures.Future[RunOutcome], interrupt: _Interrupt
) -> RunOutcome | Refusal:
    """A pool run's outcome, or the refusal that kept it from starting.

    A worker refuses only what the parent already checked, unless the grants file or
    the environment changed after the parent read them, or the engine cannot start in
    a worker (`WorkerDied`, reported like a refusal: that run never started). A run
    Ctrl-C cancelled before it started is reported as not started.
    """
    try:
        outcome = future.result()
    except concurrent.futures.CancelledError:
        return _NotStarted(_MSG_NOT_STARTED)
    except Refusal as refusal:
        return refusal
    except Exception as exc:
        return RunInputError(f"a worker could not run it: {type(exc).__name__}: {exc}")
    return interrupt.outcome(outcome)


def _report(outcome: RunOutcome, timeout_s: float, as_json: bool, file: Path | None = None) -> None:
    """One run's output, record or trusted lines, as a single run has always printed it
    (a batch adds the file's name to its JSON object)."""
    result = outcome.result
    if as_json:
        record: dict[str, object] = {} if file is None else {"file": as_text(str(file))}
        record.update(
            stdout=result.stdout,
            stderr=result.stderr,
            stdout_truncated=result.stdout_truncated,
            stderr_truncated=result.stderr_truncated,
            exit_code=result.exit_code,
            timed_out=result.timed_out,
            interrupted=outcome.interrupted,
            duration_s=round(result.duration_s, 6),
            internal_error=result.internal_error or None,
            isolation=orjson.loads(outcome.audit).get("isolation"),
            audit=orjson.loads(outcome.audit),
        )
        if not _emit(sys.stdout, _json_line(record) + "\n", json=True):
            # stdout is gone (a closed pipe): the record's audit still reaches stderr.
            _emit(sys.stderr, _trusted(messages.MSG_AUDIT.format(audit=outcome.audit)))
        return
    _emit(sys.stdout, guest_lines(result.stdout, _GUEST_OUT))
    _emit(sys.stderr, guest_lines(result.stderr, _GUEST_ERR))
    trusted: list[str] = []
    if result.stdout_truncated or result.stderr_truncated:
        trusted.append(messages.MSG_OUTPUT_TRUNCATED)
    if result.timed_out:
        trusted.append(messages.MSG_TIMED_OUT.format(timeout_s=timeout_s))
    if outcome.interrupted:
        trusted.append(_MSG_INTERRUPTED)
    if result.internal_error:
        trusted.append(messages.MSG_INTERNAL.format(kind=result.internal_error))
    if orjson.loads(outcome.audit).get("worker_died"):
        # RunPool's record of a run whose worker died: only the admitted calls are known.
        trusted.append(_MSG_WORKER_DIED)
    else:
        trusted += format_table(outcome.trace).splitlines()
    trusted.append(messages.MSG_AUDIT.format(audit=outcome.audit))
    _emit(sys.stderr, "".join(_trusted(line) for line in trusted))


def _report_batch(
    files: list[Path],
    outcomes: Iterator[RunOutcome | Refusal],
    timeout_s: float,
    as_json: bool,
) -> int:
    """Each file's result in input order; the batch's exit code.

    Text: a header `specgen: [i/n] "file"` on stdout opens each file's section (so the
    guest's `out| ` lines stay attributed when stdout goes to a file), its `err| ` lines,
    trace and audit follow on stderr, closed by `specgen: [i/n] "file": exit N`; a last
    line sums the batch up. JSON: one object per line (JSON Lines), `file` first.
    The exit code is the first non-zero exit in input order, or 0.
    """
    n = len(files)
    status = 0
    failed: list[str] = []
    for i, (path, outcome) in enumerate(zip(files, outcomes, strict=True), start=1):
        name = f"[{i}/{n}] {_q(str(path))}"
        if isinstance(outcome, Refusal):
            code = outcome.exit_code
            if as_json:
                refused = {"file": as_text(str(path)), "exit_code": code, "refused": outcome.line}
                _emit(sys.stdout, _json_line(refused) + "\n", json=True)
            else:
                _header(name)
                _emit(sys.stderr, _trusted(f"{name}: not run: {outcome.line}"))
        else:
            code = outcome.result.exit_code
            if not as_json:
                _header(name)
            _report(outcome, timeout_s, as_json, file=path)
            if not as_json:
                _emit(sys.stderr, _trusted(f"{name}: exit {code}"))
        if code != 0:
            failed.append(f"{name} exit {code}")
            status = status or code
    if not as_json:
        summary = (
            f"{n} runs, all exit 0"
            if not failed
            else f"{n} runs, {len(failed)} non-zero; exit {status} from the first: {failed[0]}"
        )
        _emit(sys.stderr, _trusted(summary))
    return status


def _header(name: str) -> None:
    _emit(sys.stdout, _trusted(name))


#: What a line reader may split on inside a JSON string orjson writes raw.
_JSON_LINE_BREAKS = re.compile("[\x85\u2028\u2029]")


def _json_line(record: dict[str, object]) -> str:
    """One JSON Lines record: also NEL, U+2028 and U+2029 escaped (str.splitlines and
    some readers end a line there), so a file name or guest output cannot split it."""
    text = orjson.dumps(record).decode("utf-8")
    return _JSON_LINE_BREAKS.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _json_escapes(error: UnicodeError) -> tuple[str, int]:
    """The codec error handler for JSON text: each character the stream's encoding
    cannot carry as a JSON `\\uXXXX` escape (a surrogate pair past U+FFFF). orjson writes
    non-ASCII only inside strings, so the line stays the same JSON value."""
    if not isinstance(error, UnicodeEncodeError):
        raise error
    out = []
    for ch in error.object[error.start : error.end]:
        code = ord(ch)
        if code > 0xFFFF:
            code -= 0x10000
            out.append(f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}")
        else:
            out.append(f"\\u{code:04x}")
    return "".join(out), error.end


codecs.register_error("specgen-json-escape", _json_escapes)


def _emit(stream: TextIO, text: str, json: bool = False) -> bool:
    """Write `text` so that no stream can stop the run's report: what the stream's
    encoding cannot carry is escaped (`\\u20ac` in text, a JSON escape in JSON), and a
    stream the reader closed (`| head -1`) is pointed at the null device, so later
    writes and the exit flush neither fail nor print a traceback. False when the text
    did not get out."""
    if not text:
        return True
    encoding = getattr(stream, "encoding", None) or "utf-8"
    try:
        text.encode(encoding)
    except UnicodeEncodeError:
        handler = "specgen-json-escape" if json else "backslashreplace"
        text = text.encode(encoding, handler).decode(encoding)
    except LookupError:
        pass
    try:
        stream.write(text)
        stream.flush()
    except (OSError, ValueError):
        _to_null(stream)
        return False
    return True


def _to_null(stream: TextIO) -> None:
    """Point a closed stream's descriptor at the null device (what Python's docs advise
    for SIGPIPE), dropping what its buffer still holds."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, stream.fileno())
        finally:
            os.close(null)
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        pass


def _trusted(line: str) -> str:
    return line + "\n" if line.startswith(_TRUSTED) else _TRUSTED + line + "\n"


def guest_lines(text: str, prefix: str) -> str:
    """Guest output for a terminal: each line prefixed, control characters escaped.

    Tab and newline stay; a last line without a newline gets one, so the next trusted
    line always starts a line of its own.
    """
    if not text:
        return ""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return "".join(prefix + _escape(line) + "\n" for line in lines)


def _escape(line: str) -> str:
    out: list[str] = []
    for ch in line:
        code = ord(ch)
        if ch == "\t" or not (
            unicodedata.category(ch) == "Cc" or ch in _BIDI or ch in "\u2028\u2029"
        ):
            out.append(ch)
        elif code < 0x100:
            out.append(f"\\x{code:02x}")
        else:
            out.append(f"\\u{code:04x}")
    return "".join(out)
