"""The MRSC jobs table's expiry (two regions; docs/regions.md, "Expiry without TTL").

An MRSC global table takes no TTL, so once a day the poller deletes the jobs
the single-region table's TTL would have: ended, with ``expires_at`` (set by
the finish, ``RETENTION_DAYS`` after it) past. They are found without a Scan:
a job entered the report index's window (its ``report_at``) before it ended,
so one that expired by now entered it by ``now - RETENTION_DAYS``; the run
reads each report partition of the ``EXPIRY_LOOKBACK_DAYS`` days up to that
cutoff, reads the jobs it lists, and deletes those expired by a conditional
delete that keeps whatever a replay re-opened meanwhile. Each region's
schedule runs it at its own hour; a run racing the other region's deletes
nothing twice (the condition), and an outage delays expiry by half a day.
"""

from __future__ import annotations

import concurrent.futures
from dataclasses import dataclass
from typing import Any, Final

from sume.core.names import REPORT_SHARDS, report_buckets
from sume.core.runtime import Clock, TimeLeft
from sume.core.settings import DAY_SECONDS
from sume.store.expiry import JobExpiry

# A run stops starting partitions this long before its invocation ends.
TIME_MARGIN_SECONDS: Final = 10
# Report partitions read at once: queries wait on DynamoDB, not on the CPU.
PARALLEL_PARTITIONS: Final = 8


@dataclass(frozen=True)
class ExpiryRun:
    read: int
    """Jobs the partitions listed (entered the window by the cutoff)."""
    deleted: int
    kept: int
    """Listed jobs not deleted: not ended, retention not over, or re-opened meanwhile."""
    complete: bool
    """False when the run ran out of time; the next one reads the rest."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "read": self.read,
            "deleted": self.deleted,
            "kept": self.kept,
            "complete": self.complete,
        }


class Expiry:
    def __init__(
        self,
        expiry: JobExpiry,
        retention_days: int,
        lookback_days: int,
        shards: int,
        clock: Clock,
    ) -> None:
        self._expiry = expiry
        self._retention = retention_days * DAY_SECONDS
        self._lookback = lookback_days * DAY_SECONDS
        self._shards = max(REPORT_SHARDS, shards)
        self._clock = clock

    def run(self, remaining: TimeLeft) -> ExpiryRun:
        now = int(self._clock())
        cutoff = now - self._retention
        buckets = report_buckets(cutoff - self._lookback, cutoff, self._shards)
        read = deleted = 0
        complete = True
        with concurrent.futures.ThreadPoolExecutor(PARALLEL_PARTITIONS) as pool:
            pending = [pool.submit(self._partition, b, cutoff, now, remaining) for b in buckets]
            for done in pending:
                result = done.result()
                if result is None:
                    complete = False
                    continue
                read += result[0]
                deleted += result[1]
        return ExpiryRun(read, deleted, read - deleted, complete)

    def _partition(
        self, bucket: str, cutoff: int, now: int, remaining: TimeLeft
    ) -> tuple[int, int] | None:
        """(listed, deleted) of one report partition; None when no time was left for it."""
        if remaining() < TIME_MARGIN_SECONDS:
            return None
        job_ids = self._expiry.entered(bucket, cutoff)
        deleted = 0
        for job_id in self._expiry.expired(job_ids, now) if job_ids else []:
            deleted += self._expiry.delete(job_id, now)
        return len(job_ids), deleted
