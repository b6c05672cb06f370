"""The window replay's pace: a token bucket of one."""

from __future__ import annotations

from sume_cli.replaying import Pace


class Clock:
    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(round(seconds, 6))
        self.now += seconds


def test_waits_space_the_calls_at_the_rate_and_the_first_goes_at_once() -> None:
    clock = Clock()
    pace = Pace(4, clock, clock.sleep)
    for _ in range(5):
        pace.wait()
    assert clock.slept == [0.25] * 4
    assert clock.now == 101.0


def test_time_spent_elsewhere_is_not_slept_again_nor_saved_up_as_a_burst() -> None:
    clock = Clock()
    pace = Pace(2, clock, clock.sleep)
    pace.wait()
    clock.now += 0.2  # the write and the send took 0.2 s
    pace.wait()
    clock.now += 10  # a long pause: the next call goes at once, the one after is paced
    pace.wait()
    pace.wait()
    assert clock.slept == [0.3, 0.5]
