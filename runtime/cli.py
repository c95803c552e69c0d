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
"""

from __future__ import annotations

import functools
import sys
import unicodedata
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click
import orjson

from runtime import (
    MIN_MEMORY_MB,
    Grants,
    GrantsError,
    Limits,
    Profile,
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
#: Prefixes of the guest's lines in text mode; the CLI's own lines start `specgen: `.
_GUEST_OUT, _GUEST_ERR, _TRUSTED = "out| ", "err| ", "specgen: "
#: Characters that reorder or hide text on a terminal without being Cc.
_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")

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
    help="Send the grant's calls to this origin instead (e.g. a loopback fake); it must be"
    " the profile's base_url or listed in its base_url_overrides.",
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
    if not MIN_MEMORY_MB <= memory_mb <= 4096:
        raise RunInputError(
            f"--memory-mb {memory_mb} must be between {MIN_MEMORY_MB} (the engine's minimum)"
            " and 4096"
        )
    if trace_id is not None:
        check_trace_id(trace_id)
    profile = _select(load_grants(grants_file), profile_name, caller)
    if base_url is not None:
        profile = profile.with_base_url(base_url)

    # A missing or tampered engine is an EngineError (a Refusal), never a traceback.
    outcome = run_with_grant(
        code,
        profile,
        limits=Limits(timeout_s=timeout_s, memory_mb=memory_mb),
        trace_id=trace_id,
        caller=caller,
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
            "internal_error": result.internal_error or None,
            "audit": orjson.loads(outcome.audit),
        }
        click.echo(orjson.dumps(record).decode("utf-8"))
    else:
        sys.stdout.write(guest_lines(result.stdout, _GUEST_OUT))
        sys.stdout.flush()
        sys.stderr.write(guest_lines(result.stderr, _GUEST_ERR))
        trusted: list[str] = []
        if result.stdout_truncated or result.stderr_truncated:
            trusted.append(messages.MSG_OUTPUT_TRUNCATED)
        if result.timed_out:
            trusted.append(messages.MSG_TIMED_OUT.format(timeout_s=timeout_s))
        if result.internal_error:
            trusted.append(messages.MSG_INTERNAL.format(kind=result.internal_error))
        trusted += format_table(outcome.trace).splitlines()
        trusted.append(messages.MSG_AUDIT.format(audit=outcome.audit))
        sys.stderr.write("".join(_trusted(line) for line in trusted))
        sys.stderr.flush()
    sys.exit(result.exit_code)


def _select(grants: Grants, name: str, caller: str) -> Profile:
    """The profile, or a line saying which of name and caller is wrong.

    `Grants.select` (and `run_profile`) give both cases one text on purpose, so a caller
    of a service cannot learn which profile names exist. Here the one asking is the
    operator, who owns the grants file and can read it anyway, so the CLI says which.
    """
    names = grants.names()
    if name not in names:
        listed = ", ".join(_q(n) for n in names[:10]) + (", ..." if len(names) > 10 else "")
        raise GrantsError(f"grants: {grants.path}: no profile {_q(name)} (profiles: {listed})")
    try:
        return grants.select(name, caller)
    except GrantsError:
        if not caller or caller == "*":
            raise GrantsError(
                f'--caller {_q(caller)}: name one principal; "*" in allowed_callers'
                " admits any caller, it is not a caller itself"
            ) from None
        raise GrantsError(
            f"grants: profile {_q(name)}: caller {_q(caller)} is not in its allowed_callers"
        ) from None


def _q(s: str) -> str:
    return orjson.dumps(s).decode("utf-8")


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
