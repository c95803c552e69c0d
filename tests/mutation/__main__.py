"""`make mutate`: cosmic-ray over the security core, each module in its own copy of the tree.

    python -m tests.mutation [--budget SECONDS] [--jobs N] [--retest-survivors] MODULE=TEST[,TEST...] ...

Why a driver around cosmic-ray: cosmic-ray mutates the module on disk, so two modules
cannot be mutated in one tree at the same time (a mutated route matcher would change what
the envelope tests see). Each module gets a copy of the repository under build/mutation/,
runs only the tests that cover it, and stops after `--budget` seconds (0: no limit); a
stopped run reports the mutants it did test, and says how many it did not.

Why the test command is lean: cosmic-ray starts one pytest per mutant, and pytest's plugin
autoload imports schemathesis and its dependencies (about 2 s of start-up, for tests that
take about 1 s). None of the covering tests uses schemathesis, respx, anyio or platformdirs'
plugin, so autoload is off (PYTEST_DISABLE_PLUGIN_AUTOLOAD=1) and only hypothesis's plugin
is loaded back (`-p`), which the property tests report their failures through.

Why a baseline first: if the covering tests fail on the unmutated copy, every mutant would
count as killed. So each copy runs them once unmutated; red stops that module, and the time
it took sets the per-mutant timeout (a hung mutant is cut off and counts as killed, as
cosmic-ray does; the report says how many were killed that way).

A surviving mutant is either killed by a new test or listed in tests/mutation/equivalent.md
with why it cannot change behaviour (module, operator and the mutated line). Exit status 1
when a survivor is neither.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "build" / "mutation"
EQUIVALENT = Path(__file__).with_name("equivalent.md")
SKIP_TOP = {".cache", ".venv", "build", "dist", ".git"}
# One line of equivalent.md: - `module` `operator` `mutated line`: why (the line ends at the
# first "`: ", so the why may quote code in backticks; Python lines hold no backtick)
_ENTRY = re.compile(r"^- `([^`]+)` `([^`]+)` `(.+?)`: \S")
# The plugins the covering tests need; everything else pytest would autoload is left out.
PYTEST_PLUGINS = ("_hypothesis_pytestplugin",)
# A mutant's tests may take this many times the unmutated run (and at least the floor)
# before they are cut off; generous, so that load on a shared machine is not read as a hang.
TIMEOUT_FACTOR = 10.0
TIMEOUT_FLOOR = 30.0


@dataclass
class Outcome:
    module: str
    total: int = 0
    killed: int = 0
    incompetent: int = 0
    timeouts: int = 0  # killed because the tests ran past the timeout
    not_run: int = 0  # cosmic-ray could not apply or run the mutant (its worker failed)
    seconds: float = 0.0  # wall time of the whole module, baseline included
    timeout: float = 0.0
    survivors: list[tuple[str, str, str]] = field(default_factory=list)  # (operator, line, diff)
    stopped: bool = False
    annotations: int = 0  # skipped: inside an annotation, never evaluated

    @property
    def tested(self) -> int:
        return self.killed + len(self.survivors)


def _copy_tree(dest: Path) -> None:
    if dest.exists():
        shutil.rmtree(dest)
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for raw in filter(None, listed):
        rel = Path(raw.decode())
        if rel.parts[0] in SKIP_TOP or not (REPO / rel).is_file():
            continue
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / rel, dest / rel, follow_symlinks=False)
    # ../shared must resolve from the copy as it does from the repository
    shared = REPO.parent / "shared"
    if shared.exists() and not (dest.parent / "shared").exists():
        (dest.parent / "shared").symlink_to(shared)


def _annotation_spans(source: str) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """Where the module's annotations are. Every module here starts with
    `from __future__ import annotations`, so an annotation is never evaluated and a mutant
    inside one (`str | None` -> `str * None`) is equivalent by construction."""
    spans = []
    for node in ast.walk(ast.parse(source)):
        notes = []
        if isinstance(node, ast.arg | ast.AnnAssign) and node.annotation is not None:
            notes.append(node.annotation)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.returns is not None:
            notes.append(node.returns)
        for n in notes:
            spans.append(((n.lineno, n.col_offset), (n.end_lineno or 0, n.end_col_offset or 0)))
    return spans


def _skip_annotation_mutants(module: Path, session: Path) -> int:
    """Mark mutants inside annotations as skipped in cosmic-ray's session (as its filters do)."""
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import WorkerOutcome, WorkResult

    source = module.read_text()
    if "from __future__ import annotations" not in source:
        return 0
    spans = _annotation_spans(source)
    skipped = 0
    with use_db(str(session), WorkDB.Mode.open) as db:
        for item in list(db.pending_work_items):
            start = tuple(item.mutations[0].start_pos)
            if any(lo <= start < hi for lo, hi in spans):
                db.set_result(
                    item.job_id,
                    WorkResult(worker_outcome=WorkerOutcome.SKIPPED, output="annotation"),
                )
                skipped += 1
    return skipped


def _mutated_line(diff: str) -> str:
    added = [ln[1:].strip() for ln in diff.splitlines() if ln.startswith("+") and ln[1:2] != "+"]
    return added[0] if added else ""


def _run_module(
    module: str, tests: list[str], budget: float, report_only: bool, retest: bool = False
) -> Outcome:
    slug = module.replace("/", "_").removesuffix(".py")
    work = OUT / slug
    session = work / "session.sqlite"
    cosmic = str(Path(sys.executable).with_name("cosmic-ray"))
    outcome = Outcome(module)
    if report_only:
        return _read_session(outcome, cosmic, work, session)
    started = time.monotonic()
    earlier = 0.0
    if retest:
        earlier = _keep_session_for_retest(module, work, session)
    else:
        _copy_tree(work)
    plugins = [arg for name in PYTEST_PLUGINS for arg in ("-p", name)]
    argv = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *plugins]
    test_command = " ".join([*argv, *tests])
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "PYTHONPATH")}
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    clock = time.monotonic()
    baseline = subprocess.run(
        [*argv, *tests], cwd=work, env=env, capture_output=True, text=True, check=False
    )
    if baseline.returncode != 0:
        tail = "\n".join(baseline.stdout.splitlines()[-15:])
        raise SystemExit(f"{module}: its tests fail before any mutation:\n{tail}")
    outcome.timeout = max(TIMEOUT_FLOOR, TIMEOUT_FACTOR * (time.monotonic() - clock))
    config = work / "cosmic-ray.toml"
    config.write_text(
        "[cosmic-ray]\n"
        f"module-path = {json.dumps(module)}\n"
        f"timeout = {outcome.timeout:.0f}.0\n"
        "excluded-modules = []\n"
        f"test-command = {json.dumps(test_command)}\n"
        "[cosmic-ray.distributor]\n"
        'name = "local"\n'
    )
    if retest:
        _forget_survivors(session)
    else:
        subprocess.run([cosmic, "init", str(config), str(session)], cwd=work, check=True, env=env)
        _skip_annotation_mutants(work / module, session)
    proc = subprocess.Popen(
        [cosmic, "exec", str(config), str(session)],
        cwd=work,
        env=env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        proc.wait(timeout=budget or None)
    except subprocess.TimeoutExpired:
        outcome.stopped = True
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait()
    outcome.seconds = earlier + time.monotonic() - started
    (work / "run.json").write_text(
        json.dumps({"seconds": round(outcome.seconds), "timeout": round(outcome.timeout)})
    )
    return _read_session(outcome, cosmic, work, session)


def _keep_session_for_retest(module: str, work: Path, session: Path) -> float:
    """A fresh copy of the tree (the tests as they are now) around the last run's session.

    Only the tests may have changed: the session's mutants are numbered occurrences in
    the module's source, so a changed module needs a whole new run. Returns the seconds
    the earlier run took (the report adds the retest to them).
    """
    if not session.is_file():
        raise SystemExit(f"{module}: no earlier session to retest; run make mutate first")
    if (work / module).read_bytes() != (REPO / module).read_bytes():
        raise SystemExit(f"{module} changed since its run; run make mutate (all of it) again")
    earlier = json.loads((work / "run.json").read_text())["seconds"]
    kept = OUT / f"{work.name}.session.sqlite"
    shutil.move(session, kept)
    _copy_tree(work)
    shutil.move(kept, session)
    return float(earlier)


def _forget_survivors(session: Path) -> int:
    """Make the session's survivors pending again, so exec runs them with today's tests
    (a killed mutant stays killed: tests were only added since). cosmic-ray has no call
    that deletes one result, so this is SQL on its table (work_results, outcome by name)."""
    with contextlib.closing(sqlite3.connect(session)) as db, db:
        return db.execute("DELETE FROM work_results WHERE test_outcome = 'SURVIVED'").rowcount


def _read_session(outcome: Outcome, cosmic: str, work: Path, session: Path) -> Outcome:
    """Count a session's results (also one a budget or an interruption stopped)."""
    if not outcome.seconds and (work / "run.json").is_file():
        run = json.loads((work / "run.json").read_text())
        outcome.seconds, outcome.timeout = run["seconds"], run["timeout"]
    dump = subprocess.run(
        [cosmic, "dump", str(session)], cwd=work, capture_output=True, text=True, check=True
    )
    for line in dump.stdout.splitlines():
        item, result = json.loads(line)
        outcome.total += 1
        if result is not None and result.get("worker_outcome") == "skipped":
            outcome.total -= 1  # an annotation mutant, counted apart
            outcome.annotations += 1
            continue
        if result is None:
            outcome.stopped = True
            continue
        if result.get("worker_outcome") != "normal":
            outcome.not_run += 1
            continue
        if result["test_outcome"] == "killed":
            outcome.killed += 1
            outcome.timeouts += result.get("output") == "timeout"
        elif result["test_outcome"] == "incompetent":
            outcome.incompetent += 1
        else:
            diff = result.get("diff") or ""
            operator = item["mutations"][0]["operator_name"]
            outcome.survivors.append((operator, _mutated_line(diff), diff))
    return outcome


def _equivalent() -> set[tuple[str, str, str]]:
    entries = set()
    for line in EQUIVALENT.read_text().splitlines():
        m = _ENTRY.match(line)
        if m:
            entries.add((m.group(1), m.group(2), m.group(3)))
    return entries


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.mutation")
    parser.add_argument("--budget", type=float, default=0, help="seconds per module, 0 = all")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument(
        "--report", action="store_true", help="only report the sessions of the last run"
    )
    parser.add_argument(
        "--retest-survivors",
        action="store_true",
        help="run only the last run's survivors again, against the tests as they are now",
    )
    parser.add_argument("targets", nargs="+", metavar="MODULE=TEST[,TEST...]")
    args = parser.parse_args(argv)
    plan = []
    for target in args.targets:
        module, _, tests = target.partition("=")
        if not tests or not (args.report or (REPO / module).is_file()):
            parser.error(f"{target!r}: expected an existing module=test[,test...]")
        plan.append((module, tests.split(",")))
    OUT.mkdir(parents=True, exist_ok=True)
    began = time.monotonic()
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        outcomes = list(
            pool.map(
                lambda p: _run_module(p[0], p[1], args.budget, args.report, args.retest_survivors),
                plan,
            )
        )

    known = _equivalent()
    unexplained = 0
    lines = []
    killed = tested = 0
    for o in outcomes:
        killed += o.killed
        tested += o.tested
        explained = [s for s in o.survivors if (o.module, s[0], s[1]) in known]
        score = f"{100 * o.killed / o.tested:.1f}%" if o.tested else "n/a"
        untested = o.total - o.tested - o.incompetent - o.not_run
        note = f", stopped by the budget with {untested} untested" if o.stopped else ""
        lines.append(
            f"{o.module}: {o.total} mutants, {o.tested} tested, {o.killed} killed "
            f"({o.timeouts} by the {o.timeout:.0f} s timeout), "
            f"{len(o.survivors)} survived ({len(explained)} listed as equivalent), "
            f"{o.incompetent} incompetent, {o.not_run} not run by cosmic-ray, "
            f"{o.annotations} in annotations not run; score {score}; "
            f"{o.seconds / 60:.1f} min{note}"
        )
        if o.not_run:  # a mutant cosmic-ray could not run is not a pass
            unexplained += o.not_run
            lines.append(f"  NOT RUN - {o.not_run} mutants: see `cosmic-ray dump` of its session")
        for operator, line, diff in o.survivors:
            if (o.module, operator, line) in known:
                continue
            unexplained += 1
            lines.append(f"  SURVIVED - `{o.module}` `{operator}` `{line}`")
            lines.extend("      " + d for d in diff.splitlines() if d.startswith(("+", "-", "@")))
    total = f"{100 * killed / tested:.1f}%" if tested else "n/a"
    lines.append(
        f"total: {killed} of {tested} tested mutants killed ({total}); "
        f"{unexplained} unexplained survivors; "
        f"{(time.monotonic() - began) / 60:.1f} min with {args.jobs} jobs"
    )
    report = "\n".join(lines) + "\n"
    (OUT / "report.txt").write_text(report)
    sys.stdout.write(report)
    return 1 if unexplained else 0


if __name__ == "__main__":
    sys.exit(main())
