"""Deliveries per second through the local stack: HTTP, the receiver, moto.

The simulator (playing Sume) posts signed deliveries to the local stack's
webhook URL from a few threads, one connection per delivery as Sume does.
Every AWS call crosses HTTP to moto's server in the same process, so these
figures are bounded by moto and by this machine, not by AWS: they compare
mixes and catch regressions, they do not predict production throughput.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from bench.runtime import silenced
from sume.core.names import Env

CONCURRENCY = 4


@dataclass(frozen=True)
class Mix:
    name: str
    deliveries: int
    seconds: float
    latencies_ms: list[float]
    answers: dict[str, int]

    @property
    def per_second(self) -> float:
        return self.deliveries / self.seconds

    def percentile(self, p: float) -> float:
        ordered = sorted(self.latencies_ms)
        return ordered[min(len(ordered) - 1, math.ceil(p / 100 * len(ordered)) - 1)]


@dataclass
class ThroughputReport:
    concurrency: int
    mixes: list[Mix] = field(default_factory=list)
    skipped: str | None = None


def _timed(send: Callable[[], Any]) -> tuple[float, str]:
    start = time.perf_counter()
    delivery = send()
    elapsed = (time.perf_counter() - start) * 1000
    results = delivery.results()
    return elapsed, str(results[-1]) if results else "no answer"


def _mix(name: str, sends: Sequence[Callable[[], Any]], concurrency: int) -> Mix:
    start = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        outcomes = list(pool.map(_timed, sends))
    seconds = time.perf_counter() - start
    answers: dict[str, int] = {}
    for _, answer in outcomes:
        answers[answer] = answers.get(answer, 0) + 1
    return Mix(name, len(sends), seconds, [ms for ms, _ in outcomes], answers)


def measure(deliveries: int, concurrency: int = CONCURRENCY) -> ThroughputReport:
    report = ThroughputReport(concurrency)
    try:
        from devstack.simulator import Sume
        from devstack.stack import DevStack, DevStackSettings
    except ImportError as exc:
        report.skipped = f"local stack not available ({exc})"
        return report
    settings = DevStackSettings(
        port=0,
        moto_port=0,
        worker=False,
        poller=False,
        # Duplicates stay plain duplicates however long the run takes.
        lambda_env={Env.REDELIVER_GRACE_SECONDS: "3600"},
    )
    with silenced(), DevStack(settings) as stack:
        sume = Sume(stack.url, [stack.signing_secret], attempts=1)
        with sume:
            jobs = [sume.new_job() for _ in range(deliveries)]
            warm = [sume.new_job() for _ in range(concurrency)]
            _mix("warm-up", [partial(sume.deliver, j) for j in warm], concurrency)
            report.mixes.append(_mix("new", [partial(sume.deliver, j) for j in jobs], concurrency))
            report.mixes.append(
                _mix("duplicate", [partial(sume.deliver, j) for j in jobs], concurrency)
            )
            fresh = [sume.new_job() for _ in range(deliveries // 2)]
            half = [partial(sume.deliver, j) for j in fresh]
            half += [partial(sume.deliver, j) for j in jobs[: deliveries - len(fresh)]]
            report.mixes.append(_mix("50% new / 50% duplicate", half, concurrency))
    return report


def median_ms(mix: Mix) -> float:
    return statistics.median(mix.latencies_ms)
