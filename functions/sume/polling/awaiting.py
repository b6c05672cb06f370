"""The ``JobsAwaiting`` gauge: how many registered jobs still await their terminal event.

Counted by each scheduled run over the due-work index (never on the receiver's
path), so an alarm can tell "no webhook because nothing is running" from "no
webhook while jobs wait" (docs/operations.md, ``DeliverySilence``).
"""

from __future__ import annotations

from dataclasses import dataclass

from sume.store.jobs import JobsTable


@dataclass(frozen=True)
class Awaiting:
    jobs: int
    """Awaiting jobs counted; a lower bound unless ``exact``."""
    exact: bool
    """Every shard was counted to its end (no shard had over the limit of items)."""


class AwaitingGauge:
    def __init__(self, jobs: JobsTable, shards: int, limit: int) -> None:
        self._jobs = jobs
        self._shards = shards
        self._limit = limit

    def count(self) -> Awaiting:
        """One bounded ``Select=COUNT`` query a shard: at most ``limit`` items read each."""
        total, exact = 0, True
        for shard in range(self._shards):
            found, whole = self._jobs.count_awaiting(shard, self._limit)
            total += found
            exact = exact and whole
        return Awaiting(total, exact)
