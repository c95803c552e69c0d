"""`python -m examples.NAME [--check]`: regenerate an example's files and page, or check
that the committed ones are current.

Both steps are the same for every example: build the document with specgen, refuse a
grants file that no longer matches what was built, then either write the files and a
page computed from fresh runs, or write nothing and name every stale file.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import click

from runtime import GrantsError
from specgen import build as pipeline
from specgen.check import compare, grant_drift
from specgen.errors import SpecError
from specgen.files import write_atomic


def fail(message: str) -> NoReturn:
    click.echo(message, err=True)
    sys.exit(1)


@dataclass(frozen=True)
class Generated:
    """An example's generated files and page: where they are and how they are made."""

    name: str  # the folder, e.g. "memory_grant": each line's prefix, the module to run
    here: Path
    document: Path
    options: pipeline.Options
    grants: Path
    profile: str
    #: The page, from the build and a fresh set of runs against the fake.
    render: Callable[[pipeline.Result], str]

    @contextmanager
    def refusals(self) -> Iterator[None]:
        """Bad input or an unwritable file is one line and exit 1, never a traceback."""
        try:
            yield
        except (SpecError, GrantsError) as exc:
            fail(str(exc))
        except ValueError as exc:  # e.g. a document that is not the pinned upstream file
            fail(f"{self.name}: {exc}")
        except OSError as exc:  # writing the files or the page: say which
            fail(f"{self.name}: write {exc.filename or ''}: {exc.strerror or exc}")

    def regenerate(self, page: Path, *, check: bool) -> None:
        with self.refusals():
            spec = pipeline.run(str(self.document), self.options)
            drift = grant_drift(spec, self.grants, self.profile)
            if drift:
                fail(f"{self.name}: " + "; ".join(drift))
            if check:
                self.check(spec, page)
            else:
                self.write(spec, page)

    def write(self, spec: pipeline.Result, page: Path) -> None:
        pipeline.write(spec, self.here)  # the grant's preamble_file is read after this, fresh
        write_atomic(page, self.render(spec).encode())
        click.echo(f"{self.name}: wrote {', '.join(spec.files)} and the page: {page}")

    def check(self, spec: pipeline.Result, page: Path) -> None:
        stale = list(compare(spec, self.here))
        text = self.render(spec)
        if not page.exists() or page.read_text(encoding="utf-8") != text:
            stale.append(page.name)
        if stale:
            fail(
                f"{self.name}: stale: {', '.join(stale)}; "
                f"regenerate with: python -m examples.{self.name}"
            )
        click.echo(f"{self.name}: the generated files and the page are current")
