"""Bursts through the local stack: many senders at once, ours beside the floor.

The simulator (playing Sume) releases a bounded burst of signed deliveries
from ``SENDERS`` threads at once, one connection per delivery as Sume does,
to two webhook URLs served the same way (the local stack's API Gateway
stand-in, one process): our receiver as the local stack runs it, and the
floor handler (``bench.references``) on the same moto server, its own job ids.
The two take turns, round after round, so a noisy moment hits both; the
ratio is the median of the rounds' ratios. Every AWS call crosses HTTP to
moto's server in the same process, so the figures are bounded by moto and by
this machine, not by AWS: they compare ours with the floor under one load and
catch regressions, they do not predict production throughput.
"""

from __future__ import annotations

import math
import statistics
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from bench.report import table
from bench.runtime import silenced
from sume.core.names import Env

SENDERS = 32
ROUNDS = 3
DESIGNS = ("ours", "floor")
MIXES = ("new", "duplicate")


@dataclass(frozen=True)
class Burst:
    deliveries: int
    seconds: float
    latencies_ms: list[float]
    answers: dict[str, int]

    @property
    def per_second(self) -> float:
        return self.deliveries / self.seconds


@dataclass
class Mix:
    design: str
    name: str
    bursts: list[Burst] = field(default_factory=list)

    @property
    def deliveries(self) -> int:
        return sum(b.deliveries for b in self.bursts)

    @property
    def per_second(self) -> float:
        """The median burst's rate."""
        return statistics.median(b.per_second for b in self.bursts)

    @property
    def answers(self) -> dict[str, int]:
        total: dict[str, int] = {}
        for burst in self.bursts:
            for answer, count in burst.answers.items():
                total[answer] = total.get(answer, 0) + count
        return total

    def percentile(self, p: float) -> float:
        ordered = sorted(ms for b in self.bursts for ms in b.latencies_ms)
        return ordered[min(len(ordered) - 1, math.ceil(p / 100 * len(ordered)) - 1)]


@dataclass
class ThroughputReport:
    senders: int
    burst: int
    rounds: int
    mixes: list[Mix] = field(default_factory=list)
    skipped: str | None = None

    def mix(self, design: str, name: str) -> Mix:
        return next(m for m in self.mixes if (m.design, m.name) == (design, name))

    def floor_ratio(self, name: str) -> float:
        """Floor deliveries/s over ours, median of the rounds (1.0: as fast as the floor)."""
        ours, floor = self.mix("ours", name), self.mix("floor", name)
        return statistics.median(
            f.per_second / o.per_second for o, f in zip(ours.bursts, floor.bursts, strict=True)
        )


def _timed(send: Callable[[], Any]) -> tuple[float, str]:
    start = time.perf_counter()
    delivery = send()
    elapsed = (time.perf_counter() - start) * 1000
    results = delivery.results()
    return elapsed, str(results[-1]) if results else "no answer"


def burst(sends: Sequence[Callable[[], Any]], senders: int) -> Burst:
    """Every send once, from ``senders`` threads released together; timed from the release."""
    pending: Iterator[Callable[[], Any]] = iter(sends)
    taking = threading.Lock()
    outcomes: list[tuple[float, str]] = []
    recording = threading.Lock()
    release = threading.Barrier(senders + 1)

    def sender() -> None:
        release.wait()
        while True:
            with taking:
                send = next(pending, None)
            if send is None:
                return
            outcome = _timed(send)
            with recording:
                outcomes.append(outcome)

    threads = [threading.Thread(target=sender, daemon=True) for _ in range(senders)]
    for thread in threads:
        thread.start()
    release.wait()
    start = time.perf_counter()
    for thread in threads:
        thread.join()
    seconds = time.perf_counter() - start
    answers: dict[str, int] = {}
    for _, answer in outcomes:
        answers[answer] = answers.get(answer, 0) + 1
    return Burst(len(outcomes), seconds, [ms for ms, _ in outcomes], answers)


@contextmanager
def _floor_url(stack: Any) -> Iterator[str]:
    """The floor handler behind the same API stand-in, on the stack's moto and queue."""
    from botocore.config import Config

    from bench.references import floor_handler
    from devstack.apigw import HttpApiServer
    from infra import spec
    from sume.core.aws import MAX_POOL_CONNECTIONS
    from sume.core.names import WEBHOOK_PATH

    assert stack.names is not None
    # Plain clients, with ours' pool size: a pool smaller than the senders
    # would make the floor open a connection per call over it.
    config = Config(max_pool_connections=MAX_POOL_CONNECTIONS)
    session = stack.session()
    handler = floor_handler(
        session.client("dynamodb", endpoint_url=stack.endpoint_url, config=config),
        session.client("sqs", endpoint_url=stack.endpoint_url, config=config),
        stack.names.table,
        stack.names.queue_url,
        stack.signing_secret.encode(),
    )
    server = HttpApiServer(("127.0.0.1", 0), handler, "floor", spec.RECEIVER_TIMEOUT)
    with server:
        yield server.url(WEBHOOK_PATH)


def measure(deliveries: int, senders: int = SENDERS, rounds: int = ROUNDS) -> ThroughputReport:
    report = ThroughputReport(senders, deliveries, rounds)
    try:
        from devstack.settings import DevStackSettings
        from devstack.simulator import Sume
        from devstack.stack import DevStack
    except ImportError as exc:
        report.skipped = f"local stack not available ({exc})"
        return report
    settings = DevStackSettings(
        port=0,
        moto_port=0,
        worker=False,
        poller=False,
        ship_logs=False,
        # Duplicates stay plain duplicates however long the run takes.
        lambda_env={Env.REDELIVER_GRACE_SECONDS: "3600"},
    )
    report.mixes = [Mix(design, name) for design in DESIGNS for name in MIXES]
    with silenced(), DevStack(settings) as stack, _floor_url(stack) as floor_url:
        secrets = [stack.signing_secret]
        with (
            Sume(stack.url, secrets, attempts=1) as ours,
            Sume(floor_url, secrets, attempts=1) as floor,
        ):
            simulators = {"ours": ours, "floor": floor}
            # A warm-up burst each: the first deliveries build clients and pools.
            for sume in simulators.values():
                burst([partial(sume.deliver, sume.new_job()) for _ in range(senders)], senders)
            for round_ in range(rounds):
                order = DESIGNS if round_ % 2 == 0 else DESIGNS[::-1]
                for design in order:
                    sume = simulators[design]
                    jobs = [sume.new_job() for _ in range(deliveries)]
                    for name in MIXES:
                        sends = [partial(sume.deliver, job) for job in jobs]
                        report.mix(design, name).bursts.append(burst(sends, senders))
    return report


def median_ms(mix: Mix) -> float:
    return statistics.median(ms for b in mix.bursts for ms in b.latencies_ms)


def render(report: ThroughputReport) -> None:
    print(
        f"## 4. Bursts on the local stack ({report.burst} deliveries from {report.senders} "
        f"senders at once, {report.rounds} rounds, ours and the floor taking turns; HTTP -> "
        "handler -> moto server, one process). BOUNDED BY MOTO, not by AWS\n"
    )
    if report.skipped:
        print(f"Not measured: {report.skipped}\n")
        return
    print(
        table(
            ["design", "mix", "deliveries", "per second", "p50 ms", "p99 ms", "answers"],
            [
                (
                    m.design,
                    m.name,
                    m.deliveries,
                    f"{m.per_second:.1f}",
                    f"{median_ms(m):.0f}",
                    f"{m.percentile(99):.0f}",
                    ", ".join(f"{k} {v}" for k, v in sorted(m.answers.items())),
                )
                for m in report.mixes
            ],
        )
    )
    ratios = ", ".join(f"{name} {report.floor_ratio(name):.2f}x" for name in MIXES)
    print(
        f"\nFloor deliveries/s over ours under the same burst (median of the rounds' ratios; "
        f"1.00x: as fast as the floor): {ratios}.\n"
    )
