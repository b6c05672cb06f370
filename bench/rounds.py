"""A poller round as the bench runs it (``bench.stack.Stack.tick``): each tick names a round
of its own, and a round is measured only if its runs worked every shard it assigned."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

from devstack.lambda_context import LambdaContext

SCHEDULED = {
    "version": "0",
    "id": "bench",
    "detail-type": "Scheduled Event",
    "source": "aws.events",
}
"""What the schedule hands the poller: the round's tick."""

Handler = Callable[[dict[str, Any], Any], Any]


class RoundRefused(RuntimeError):
    """A run of the round found shards held by another run: what it cost is not a round's."""


def poller_context() -> LambdaContext:
    """A context for one poller invocation: its own deadline, as Lambda gives each (one
    made at import would leave a run minutes later no time, and it would poll nothing)."""
    return LambdaContext("sume-bench-poller", timeout_seconds=120)


def wait_past(round_: int) -> None:
    """Until the clock's second is past ``round_``, the round the last tick named.

    A tick names its round by its own clock (``FanOut.start``), which may be a
    second later than its caller's when the invocation is slow to start; a tick
    that named the same round again would have every claim of its runs refused.
    """
    while int(time.time()) <= round_:
        time.sleep(0.05)


def check_worked(answers: Iterable[dict[str, Any]]) -> None:
    """Raise ``RoundRefused`` if a run was refused a shard (``RunSummary.taken``).

    ``answers``: what the poller answered the round's shards-queue invocations
    (and any others the event sources made meanwhile; those hold no runs)."""
    runs = [run for answer in answers for run in answer.get("runs", [])]
    taken = sorted(shard for run in runs for shard in run.get("taken", ()))
    if taken:
        raise RoundRefused(f"shards {taken} were held by another run: the round is not measured")
