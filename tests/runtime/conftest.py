"""Fixtures shared by the runtime tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.runtime.loopback import FakeAPI


@pytest.fixture
def api() -> Iterator[FakeAPI]:
    """A real loopback API that records every request (test_broker.py overrides it with respx)."""
    server = FakeAPI()
    yield server
    server.close()
