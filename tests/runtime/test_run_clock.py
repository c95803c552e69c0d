"""RunClock: holds move the deadline; `end` fixes it at now for good."""

from __future__ import annotations

from runtime.run_clock import RunClock


class _Now:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_end_makes_the_deadline_now_and_says_what_was_left_held_time_included() -> None:
    now = _Now()
    clock = RunClock(10.0, now=now)
    with clock.hold():
        now.t += 4.0  # held: the deadline moves with the clock
        assert clock.deadline() == 114.0
        now.t += 1.0
        assert clock.end() == 10.0  # 10 s of run left, the 5 s held not counted against it
        assert clock.deadline() == 105.0
        now.t += 3.0
    # neither the open hold nor a new one moves an ended run's deadline
    assert clock.deadline() == 105.0
    with clock.hold():
        now.t += 2.0
        assert clock.deadline() == 105.0
    assert clock.end() == 0.0  # a second end changes nothing


def test_end_after_the_deadline_leaves_nothing_and_never_moves_it_later() -> None:
    now = _Now()
    clock = RunClock(1.0, now=now)
    now.t += 5.0
    assert clock.end() == 0.0
    assert clock.deadline() == 101.0
