"""The broker's send slots: a run's calls never exceed them, and ending a run waits for
the calls still holding one (runtime/broker/slots.py)."""

from __future__ import annotations

import threading
import time

import pytest

from runtime.broker.slots import Slots


def test_a_take_beyond_the_size_fails_at_once_or_after_its_timeout() -> None:
    slots = Slots(2)
    assert slots.take(0) and slots.take(0)
    assert not slots.take(0)
    t0 = time.monotonic()
    assert not slots.take(0.05)
    assert time.monotonic() - t0 >= 0.04
    slots.give()
    assert slots.take(0)


def test_a_waiting_take_gets_the_slot_given_back() -> None:
    slots = Slots(1)
    assert slots.take(0)
    got: list[bool] = []
    waiter = threading.Thread(target=lambda: got.append(slots.take(5)))
    waiter.start()
    time.sleep(0.05)
    slots.give()
    waiter.join(5)
    assert got == [True]


def test_drain_waits_for_the_slot_still_held_then_takes_every_slot() -> None:
    slots = Slots(3)
    assert slots.take(0)
    threading.Timer(0.1, slots.give).start()
    t0 = time.monotonic()
    assert slots.drain(5) == 3
    assert 0.05 <= time.monotonic() - t0 < 4
    assert not slots.take(0)  # drained: nothing left until given back
    slots.give(3)
    assert slots.take(0)


def test_drain_gives_up_after_its_timeout_with_what_was_free() -> None:
    slots = Slots(3)
    assert slots.take(0)
    t0 = time.monotonic()
    assert slots.drain(0.05) == 2
    assert time.monotonic() - t0 >= 0.04
    slots.give(2)
    slots.give()
    assert slots.drain(0) == 3


def test_a_slot_given_back_while_a_drain_waits_still_reaches_a_waiting_take() -> None:
    slots = Slots(2)
    assert slots.take(0) and slots.take(0)
    drained: list[int] = []
    drainer = threading.Thread(target=lambda: drained.append(slots.drain(5)))
    drainer.start()  # waiting first: a give that woke only one waiter would wake it
    time.sleep(0.05)
    taken: list[float] = []

    def take() -> None:
        t0 = time.monotonic()
        if slots.take(2):
            taken.append(time.monotonic() - t0)

    taker = threading.Thread(target=take)
    taker.start()
    time.sleep(0.05)
    slots.give()
    taker.join(3)
    assert len(taken) == 1 and taken[0] < 1.5
    slots.give()
    slots.give()  # the taker's
    drainer.join(5)
    assert drained == [2]


def test_giving_back_more_than_was_taken_is_an_error() -> None:
    slots = Slots(2)
    with pytest.raises(ValueError):
        slots.give()
    assert slots.take(0)
    with pytest.raises(ValueError):
        slots.give(2)
