"""Section 4, bursts through the local stack: many senders at once, ours beside the floor.

Sume's simulator sends each delivery on a connection of its own, as Sume does, to our receiver
as the local stack runs it and to the floor handler (``bench.references``) behind the same API
stand-in and moto server. The two take turns, round after round, so a noisy moment hits both.
The figures compare ours with the floor under one load; they do not predict production.
"""

from __future__ import annotations

import math
import statistics
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import Any

from botocore.config import Config

from bench import harness as h
from bench.references import floor_handler
from devstack.apigw import HttpApiServer
from devstack.settings import DevStackSettings
from devstack.simulator import Sume
from devstack.stack import DevStack
from infra.spec import RECEIVER_TIMEOUT
from sume.core.aws import MAX_POOL_CONNECTIONS
from sume.core.names import WEBHOOK_PATH, Env

SENDERS = 32
ROUNDS = 3
MIXES = ("new", "duplicate")


@dataclass(frozen=True)
class Burst:
    per_second: float
    latencies_ms: list[float]
    answers: Counter[str]


def burst(sends: Sequence[Callable[[], Any]], senders: int) -> Burst:
    """Every send once, from ``senders`` threads at once; timed from the first to the last."""

    def timed(send: Callable[[], Any]) -> tuple[float, str]:
        start = time.perf_counter()
        results = send().results()
        return (time.perf_counter() - start) * 1000, str(results[-1]) if results else "no answer"

    with ThreadPoolExecutor(senders) as pool:
        start = time.perf_counter()
        outcomes = list(pool.map(timed, sends))
        rate = len(outcomes) / (time.perf_counter() - start)
    return Burst(rate, [ms for ms, _ in outcomes], Counter(a for _, a in outcomes))


def measure(deliveries: int) -> dict[tuple[str, str], list[Burst]]:
    bursts: dict[tuple[str, str], list[Burst]] = {}  # per (design, mix), a burst per round
    # Duplicates stay plain duplicates however long the run takes.
    lambda_env = {Env.REDELIVER_GRACE_SECONDS: "3600"}
    settings = DevStackSettings(
        port=0, moto_port=0, worker=False, poller=False, ship_logs=False, lambda_env=lambda_env
    )
    with h.silenced(), DevStack(settings) as stack:
        # The floor's plain clients have ours' pool size: a pool smaller than the senders
        # would make it open a connection per call over it.
        config = Config(max_pool_connections=MAX_POOL_CONNECTIONS)
        assert stack.names is not None
        session, url, secret = stack.session(), stack.endpoint_url, stack.signing_secret
        ddb, sqs = (session.client(s, endpoint_url=url, config=config) for s in ("dynamodb", "sqs"))
        handler = floor_handler(ddb, sqs, stack.names.table, stack.names.queue_url, secret.encode())
        with (
            HttpApiServer(("127.0.0.1", 0), handler, "floor", RECEIVER_TIMEOUT) as server,
            Sume(stack.url, [secret], attempts=1) as ours,
            Sume(server.url(WEBHOOK_PATH), [secret], attempts=1) as floor,
        ):
            for sume in (ours, floor):  # the first deliveries build clients and pools
                burst([partial(sume.deliver, sume.new_job()) for _ in range(SENDERS)], SENDERS)
            for round_ in range(ROUNDS):
                turns = [("ours", ours), ("floor", floor)]
                for design, sume in turns if round_ % 2 == 0 else turns[::-1]:
                    jobs = [sume.new_job() for _ in range(deliveries)]
                    for mix in MIXES:  # new jobs, then the same again: duplicates
                        sends = [partial(sume.deliver, job) for job in jobs]
                        bursts.setdefault((design, mix), []).append(burst(sends, SENDERS))
    return bursts


def section(ctx: h.Context) -> None:
    deliveries = ctx.pick(100, 30)
    bursts = measure(deliveries)
    print(
        f"## 4. Bursts on the local stack ({deliveries} deliveries from {SENDERS} "
        f"senders at once, {ROUNDS} rounds, ours and the floor taking turns; HTTP -> "
        "handler -> moto server, one process). BOUNDED BY MOTO, not by AWS\n"
    )
    rows = []
    for (design, mix), runs in bursts.items():
        ms = sorted(m for b in runs for m in b.latencies_ms)
        answers = sum((b.answers for b in runs), Counter())
        rate = statistics.median(b.per_second for b in runs)
        p50, p99 = statistics.median(ms), ms[math.ceil(0.99 * len(ms)) - 1]
        said = ", ".join(f"{k} {v}" for k, v in sorted(answers.items()))
        rows.append((design, mix, len(ms), f"{rate:.1f}", f"{p50:.0f}", f"{p99:.0f}", said))
    headers = ["design", "mix", "deliveries", "per second (median burst)", "p50 ms", "p99 ms"]
    print(h.table([*headers, "answers"], rows))
    rates = {case: [b.per_second for b in runs] for case, runs in bursts.items()}
    ratios = (h.paired_ratios(rates[("floor", mix)], rates[("ours", mix)]) for mix in MIXES)
    spreads = ", ".join(f"{mix} {h.spread(r)}" for mix, r in zip(MIXES, ratios, strict=True))
    print(f"\nFloor deliveries/s over ours under the same burst (1.00x: as fast): {spreads}.\n")
