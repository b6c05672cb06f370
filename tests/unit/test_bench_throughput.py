"""The burst behind the throughput section: every send once, all senders at once."""

import threading
from collections import Counter
from functools import partial

import pytest

from bench.throughput import Burst, burst, floor_ratios


class Answered:
    def __init__(self, result: str) -> None:
        self._result = result

    def results(self) -> list[str]:
        return [self._result]


def test_a_burst_runs_every_send_once_from_all_senders_at_once():
    senders, sends = 4, 10
    # Passes only while four sends are in flight together: with fewer senders
    # running at once, the barrier times out and the sends fail.
    together = threading.Barrier(senders, timeout=5)
    sent: list[int] = []
    lock = threading.Lock()

    def send(i: int) -> Answered:
        if i < senders:
            together.wait()
        with lock:
            sent.append(i)
        return Answered("new" if i % 2 else "duplicate")

    result = burst([partial(send, i) for i in range(sends)], senders)

    assert sorted(sent) == list(range(sends))
    assert len(result.latencies_ms) == sends
    assert result.answers == {"new": 5, "duplicate": 5}
    assert result.seconds > 0


def test_the_floor_ratio_is_the_median_of_the_rounds_ratios():
    def bursts(seconds: list[float]) -> list[Burst]:
        return [Burst(s, [1.0] * 100, Counter(new=100)) for s in seconds]

    # Per round, floor over ours: 2.0, 1.5, 4.0 (a noisy round for ours).
    measured = {("ours", "new"): bursts([2.0, 3.0, 8.0]), ("floor", "new"): bursts([1.0, 2.0, 2.0])}
    assert floor_ratios(measured, "new") == pytest.approx([2.0, 1.5, 4.0])
    assert measured[("ours", "new")][0].per_second == pytest.approx(50.0)
