"""One harness (fake API, broker endpoint, node process) for the whole differential suite."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.differential.harness import Harness, harness


@pytest.fixture(scope="session")
def differential() -> Iterator[Harness]:
    with harness() as h:
        yield h
