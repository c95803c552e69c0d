"""`specgen run`: agent code in a fresh sandbox, its host calls through the operator's grant.

Exposed as the click command `runtime.cli:run` for the `specgen.commands` entry-point
group, so the `specgen` group never imports the runtime. Everything that can be refused
(the code file, the grants file, the token variable, the profile, the caller, the
base-url override, the trace id, the limits, a missing or tampered engine) raises a
`runtime.Refusal`, and one path (`_refusals`) prints its own line (`specgen: ...`) and
exits with its code; after the run the exit code is the guest's. It imports nothing
from the runtime but the public API (`from runtime import ...`).
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click
import orjson

from runtime import (
    Limits,
    Refusal,
    RunInputError,
    check_trace_id,
    format_table,
    load_grants,
    messages,
    run_with_grant,
)
from specgen.files import read_limited

_MAX_CODE_BYTES = 1 << 20

F = TypeVar("F", bound=Callable[..., Any])


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
@click.argument("code_file", metavar="CODE.js", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--grants",
    "grants_file",
    required=True,
    type=click.Path(path_type=Path),
    help="The operator's grants file.",
)
@click.option(
    "--profile", "profile_name", required=True, help="The grant profile this run selects."
)
@click.option(
    "--caller",
    required=True,
    help="Who asks for the run; must be in the profile's allowed_callers.",
)
@click.option(
    "--base-url",
    default=None,
    help="Send the grant's calls to this origin instead (e.g. a loopback fake).",
)
@click.option(
    "--trace-id", default=None, help="The caller's own id for this run, written on the audit line."
)
@click.option(
    "--timeout",
    "timeout_s",
    type=float,
    default=5.0,
    show_default=True,
    help="Wall-clock limit in seconds (at most 30).",
)
@click.option(
    "--memory-mb",
    type=int,
    default=256,
    show_default=True,
    help="Guest memory limit in MiB (at most 4096).",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print one JSON object with the output, exit code and audit record.",
)
@_refusals
def run(
    code_file: Path,
    grants_file: Path,
    profile_name: str,
    caller: str,
    base_url: str | None,
    trace_id: str | None,
    timeout_s: float,
    memory_mb: int,
    as_json: bool,
) -> None:
    """Run CODE.js in a fresh sandbox with the profile's client and preamble."""
    try:
        raw = read_limited(code_file, _MAX_CODE_BYTES)
    except OSError as e:
        raise RunInputError(f"read {code_file}: {e.strerror or e}") from None
    try:
        code = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise RunInputError(f"{code_file}: not valid UTF-8 at byte {e.start}") from None
    if not 0 < timeout_s <= 30:
        raise RunInputError(f"--timeout {timeout_s:g} must be more than 0 and at most 30 seconds")
    if not 1 <= memory_mb <= 4096:
        raise RunInputError(f"--memory-mb {memory_mb} must be between 1 and 4096")
    if trace_id is not None:
        check_trace_id(trace_id)
    profile = load_grants(grants_file).select(profile_name, caller)
    if base_url is not None:
        profile = profile.with_base_url(base_url)

    # A missing or tampered engine is an EngineError (a Refusal), never a traceback.
    outcome = run_with_grant(
        code,
        profile,
        limits=Limits(timeout_s=timeout_s, memory_mb=memory_mb),
        trace_id=trace_id,
    )
    result = outcome.result
    if as_json:
        record = {
            "stdout": result.stdout,
            "stderr": result.stderr,
            "stdout_truncated": result.stdout_truncated,
            "stderr_truncated": result.stderr_truncated,
            "exit_code": result.exit_code,
            "timed_out": result.timed_out,
            "duration_s": round(result.duration_s, 6),
            "audit": orjson.loads(outcome.audit),
        }
        click.echo(orjson.dumps(record).decode("utf-8"))
    else:
        sys.stdout.write(result.stdout)
        sys.stdout.flush()
        sys.stderr.write(result.stderr)
        if result.stdout_truncated or result.stderr_truncated:
            sys.stderr.write(messages.MSG_OUTPUT_TRUNCATED + "\n")
        if result.timed_out:
            sys.stderr.write(messages.MSG_TIMED_OUT.format(timeout_s=timeout_s) + "\n")
        sys.stderr.write(format_table(outcome.trace))
        sys.stderr.write(messages.MSG_AUDIT.format(audit=outcome.audit) + "\n")
        sys.stderr.flush()
    sys.exit(result.exit_code)
