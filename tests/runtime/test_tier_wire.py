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


class _Selects:
    """The reader's sleeps in `select` on `fd` (no other thread's), and when each began."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, fd: int) -> None:
        self.times: list[float] = []
        real = wire.select.select

        def counted(readable: list[int], *args: object) -> object:
            if fd in readable:
                self.times.append(time.monotonic())
            return real(readable, *args)

        monkeypatch.setattr(wire.select, "select", counted)

    @property
    def count(self) -> int:
        return len(self.times)


#: The spin window of the tests below, and waits well inside and well past it.
WINDOW, SHORT, LONG = 0.2, 0.02, 0.5


def _first_sleep(reader: wire.FrameReader, selects: _Selects, w: int, after_s: float) -> float:
    """Read a frame written `after_s` from now: seconds from the read's start to its
    first sleep in `select` (inf: it never slept)."""
    selects.times.clear()
    begun = time.monotonic()
    writer = _later(w, wire.encode({"t": "reply"}), after_s)
    assert reader.read(deadline=begun + 10) == ({"t": "reply"}, b"")
    writer.join()
    return selects.times[0] - begun if selects.times else float("inf")


@pytest.fixture
def spinning(
    pipe: tuple[int, int], monkeypatch: pytest.MonkeyPatch
) -> tuple[wire.FrameReader, _Selects, int]:
    """A reader with a 200 ms window on a non-blocking pipe, its sleeps, the write end:
    the window is wide, so a loaded machine's late thread still writes within it."""
    r, w = pipe
    os.set_blocking(r, False)
    return wire.FrameReader(r, spin_s=WINDOW), _Selects(monkeypatch, r), w


def test_a_frame_within_the_spin_is_read_without_sleeping(
    spinning: tuple[wire.FrameReader, _Selects, int],
) -> None:
    assert _first_sleep(*spinning, after_s=SHORT) == float("inf")


def test_a_frame_after_the_spin_is_slept_for_once_the_window_has_passed(
    spinning: tuple[wire.FrameReader, _Selects, int],
) -> None:
    assert WINDOW <= _first_sleep(*spinning, after_s=LONG) < float("inf")


def test_a_deadline_cuts_the_spin_short(pipe: tuple[int, int]) -> None:
    r, _ = pipe
    os.set_blocking(r, False)
    long_window = wire.FrameReader(r, spin_s=30.0)  # a window far past the deadline
    begun = time.monotonic()
    with pytest.raises(wire.WireTimeout):
        long_window.read(deadline=time.monotonic() + 0.1)
    assert time.monotonic() - begun < 2


def test_after_a_wait_the_spin_missed_the_next_sleeps_until_a_wait_is_short_again(
    spinning: tuple[wire.FrameReader, _Selects, int],
) -> None:
    """Waits as long as upstream calls are slept through, not spun through in turn."""
    reader = spinning[0]
    assert _first_sleep(*spinning, after_s=LONG) >= WINDOW  # spun, then slept: spin off
    assert _first_sleep(*spinning, after_s=LONG) < WINDOW / 2  # slept at once: still off
    assert _first_sleep(*spinning, after_s=SHORT) < WINDOW / 2  # slept, short: on again
    assert _first_sleep(*spinning, after_s=SHORT) == float("inf")  # caught by the spin
    assert _first_sleep(*spinning, after_s=LONG) >= WINDOW
    reader.set_spin(WINDOW)  # a new run: a fresh guess
    assert _first_sleep(*spinning, after_s=SHORT) == float("inf")


def test_at_the_deadline_a_frame_already_there_is_still_read(pipe: tuple[int, int]) -> None:
    r, w = pipe  # a blocking pipe: its reader waits before it reads
    os.write(w, wire.encode({"t": "done"}))
    reader = wire.FrameReader(r)
    assert reader.read(deadline=time.monotonic() - 1) == ({"t": "done"}, b"")


def test_a_refused_yield_ends_the_spin_and_the_frame_is_slept_for(
    pipe: tuple[int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Looking again without yielding could starve the peer on this CPU, so a filter
    refusing sched_yield turns the spin off; the read itself still succeeds."""
    r, w = pipe
    os.set_blocking(r, False)

    def refused() -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(wire.os, "sched_yield", refused)
    reader = wire.FrameReader(r, spin_s=1.0)
    writer = _later(w, wire.encode({"t": "reply"}), 0.05)
    assert reader.read(deadline=time.monotonic() + 10) == ({"t": "reply"}, b"")
    writer.join()
    assert reader.spin_s == 0.0


@pytest.mark.parametrize(
    ("cpus", "busy", "spins"),
    [(2, 1, True), (2, 2, False), (4, 2, True), (4, 3, False), (1, 1, False)],
)
def test_a_run_spins_only_while_each_busy_reader_has_a_cpu(
    monkeypatch: pytest.MonkeyPatch, cpus: int, busy: int, spins: bool
) -> None:
    monkeypatch.setattr(wire.os, "sched_getaffinity", lambda _pid: set(range(cpus)))
    assert wire.spin_for(busy) == (wire.SPIN_S if spins else 0.0)


# -- the engine process's end: whichever thread waits reads ------------------------------


class _Ends:
    """An engine process's `_Pipe` on two fresh pipes, and the broker's ends of them."""

    def __init__(self) -> None:
        from runtime.tiers.engine_process import _Pipe

        self._to_engine = os.pipe()
        self._to_broker = os.pipe()
        os.set_blocking(self._to_engine[0], False)
        self.pipe = _Pipe(self._to_engine[0], self._to_broker[1])
        self.frames = wire.FrameReader(self._to_broker[0])

    def say(self, header: dict, blob: bytes = b"") -> None:
        wire.write_frame(self._to_engine[1], header, blob)

    def reply(self, call_id: int, body: bytes) -> None:
        fields = {"status": 200, "content_type": "", "headers": [], "upstream": True}
        self.say({"t": "reply", "id": call_id, **fields}, body)

    def hang_up(self) -> None:
        os.close(self._to_engine[1])

    def close(self) -> None:
        for fd in (self._to_engine[0], *self._to_broker):
            os.close(fd)


@pytest.fixture
def ends() -> Iterator[_Ends]:
    ends = _Ends()
    try:
        yield ends
    finally:
        ends.close()


def _request(n: int):
    from runtime.contract import HostRequest

    return HostRequest(method="GET", path=f"/v1/items/{n}")


def test_each_waiting_thread_gets_its_own_reply_in_any_order(ends: _Ends) -> None:
    got: dict[int, bytes] = {}

    def call(n: int) -> None:
        call_id = ends.pipe.ask("call", _request(n))
        got[n] = ends.pipe.reply(call_id, lambda: time.monotonic() + 10).body

    threads = [threading.Thread(target=call, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    asked = {}
    for _ in threads:
        frame, _ = ends.frames.read(deadline=time.monotonic() + 10)
        asked[frame["id"]] = frame["path"]
    for call_id in sorted(asked, reverse=True):  # the last asked is answered first
        ends.say({"t": "hold"})
        ends.reply(call_id, asked[call_id].encode())
    for thread in threads:
        thread.join(timeout=10)
    assert got == {n: f"/v1/items/{n}".encode() for n in range(4)}


def test_a_reader_that_gives_up_leaves_the_reading_to_the_next_waiter(ends: _Ends) -> None:
    impatient = ends.pipe.ask("call", _request(1))
    patient = ends.pipe.ask("call", _request(2))
    outcomes: dict[str, object] = {}

    def wait(name: str, call_id: int, for_s: float) -> None:
        deadline = time.monotonic() + for_s
        try:
            outcomes[name] = ends.pipe.reply(call_id, lambda: deadline).body
        except TimeoutError as exc:
            outcomes[name] = exc

    first = threading.Thread(target=wait, args=("impatient", impatient, 0.3))
    first.start()  # it reads the pipe: nobody else is waiting yet
    time.sleep(0.1)
    second = threading.Thread(target=wait, args=("patient", patient, 10))
    second.start()
    first.join(timeout=10)
    assert isinstance(outcomes["impatient"], TimeoutError)
    ends.reply(impatient, b"too late")  # dropped: nobody waits for it any more
    ends.reply(patient, b"in time")
    second.join(timeout=10)
    assert outcomes["patient"] == b"in time"


def test_orders_reach_the_main_loop_and_a_closed_pipe_ends_it(ends: _Ends) -> None:
    ends.say({"t": "run", "code": "1"})
    assert ends.pipe.next_order() == ({"t": "run", "code": "1"}, b"")
    call_id = ends.pipe.ask("call", _request(1))
    ends.hang_up()
    with pytest.raises(ConnectionError):
        ends.pipe.reply(call_id, lambda: time.monotonic() + 10)
    assert ends.pipe.next_order() is None
