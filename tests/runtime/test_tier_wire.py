"""The pipe's framing on its own (runtime/tiers/wire.py): writes tried before any wait,
reads tried before any wait on a non-blocking pipe, and a deadline on both still
ending every wait for a peer that stops reading or writing."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator

import pytest

from runtime.tiers import wire


@pytest.fixture
def pipe() -> Iterator[tuple[int, int]]:
    r, w = os.pipe()
    try:
        yield r, w
    finally:
        for fd in (r, w):
            os.close(fd)


def test_a_write_to_a_peer_that_never_reads_times_out(pipe: tuple[int, int]) -> None:
    _, w = pipe
    os.set_blocking(w, False)
    begun = time.monotonic()
    with pytest.raises(wire.WireTimeout):
        for _ in range(10_000):  # the pipe fills (64 KiB) long before this ends
            wire.write_frame(w, {"t": "x"}, b"z" * 4096, deadline=time.monotonic() + 0.3)
    assert time.monotonic() - begun < 5


def test_a_frame_larger_than_the_pipe_is_written_while_the_peer_reads(
    pipe: tuple[int, int],
) -> None:
    r, w = pipe
    os.set_blocking(w, False)
    got: list[tuple[dict, bytes]] = []
    reader = threading.Thread(target=lambda: got.append(wire.FrameReader(r).read()))
    reader.start()
    blob = os.urandom(1 << 20)
    wire.write_frame(w, {"t": "big"}, blob, deadline=time.monotonic() + 10)
    reader.join(timeout=10)
    assert got == [({"t": "big"}, blob)]


def _later(fd: int, data: bytes, after_s: float) -> threading.Thread:
    def write() -> None:
        time.sleep(after_s)
        os.write(fd, data)

    thread = threading.Thread(target=write)
    thread.start()
    return thread


@pytest.mark.parametrize("blocking", [True, False], ids=["blocking", "non-blocking"])
def test_a_read_waits_for_a_frame_in_pieces_and_times_out_on_silence(
    pipe: tuple[int, int], blocking: bool
) -> None:
    r, w = pipe
    os.set_blocking(r, blocking)
    reader = wire.FrameReader(r)
    frame = wire.encode({"t": "reply", "id": 1}, b"body")
    os.write(w, frame[:5])  # the head, cut short
    with pytest.raises(wire.WireTimeout):
        reader.read(deadline=time.monotonic() + 0.1)
    writer = _later(w, frame[5:], 0.1)
    assert reader.read(deadline=time.monotonic() + 5) == ({"t": "reply", "id": 1}, b"body")
    writer.join()
    begun = time.monotonic()
    with pytest.raises(wire.WireTimeout):
        reader.read(deadline=time.monotonic() + 0.2)
    assert 0.15 < time.monotonic() - begun < 2


def test_a_non_blocking_read_without_deadline_waits_for_the_frame() -> None:
    r, w = os.pipe()
    try:
        os.set_blocking(r, False)
        writer = _later(w, wire.encode({"t": "run"}) * 2, 0.1)
        reader = wire.FrameReader(r)
        assert reader.read() == ({"t": "run"}, b"")
        assert reader.read() == ({"t": "run"}, b"")  # from what the first read brought
        writer.join()
        os.close(w)
        with pytest.raises(wire.PeerGone):
            reader.read()
    finally:
        os.close(r)
