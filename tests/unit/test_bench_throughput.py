"""The burst behind the throughput section: every send once, all senders at once."""

import threading
import time
from functools import partial

from bench.throughput import burst


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

    started = time.perf_counter()
    result = burst([partial(send, i) for i in range(sends)], senders)
    elapsed = time.perf_counter() - started

    assert sorted(sent) == list(range(sends))
    assert len(result.latencies_ms) == sends
    assert result.answers == {"new": 5, "duplicate": 5}
    # The burst lasts at least as long as its slowest send, and no longer than the call.
    assert sends / elapsed <= result.per_second <= sends * 1000 / max(result.latencies_ms)
