"""The artifact records of one attempt, and the room the job's item leaves for them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sume.store.job import Job, JobAttr
from sume.store.sizing import MAX_ITEM_BYTES, plain_item_size, plain_size
from sume.working.failures import noted

# Kept free on the item for what the finish and a release add besides artifact
# records: Sume's error text (16 KiB), a processing error and a last error.
FINISH_RESERVE_BYTES = 32 * 1024


@dataclass
class Progress:
    room: int
    """Bytes the item can give to artifact records (see ``room_for_records``)."""
    earlier: list[dict[str, Any]] = field(default_factory=list)
    """The records on the item before this attempt: each stays until this attempt
    stores its key again, so no ending forgets a copy already made."""
    artifacts: list[dict[str, Any]] = field(default_factory=list)
    """This attempt's records, reused or copied, in the event's order."""
    copied: int = 0
    bytes: int = 0

    @classmethod
    def of(cls, job: Job) -> Progress:
        records = [r for r in job.artifacts or [] if isinstance(r, dict)]
        return cls(room_for_records(job), earlier=records)

    @staticmethod
    def refused(exc: BaseException) -> dict[str, str]:
        """The processing error of records DynamoDB refused (the item would grow too large)."""
        return noted("write_refused", f"DynamoDB refused the job's progress: {exc}")

    def records(self) -> list[dict[str, Any]]:
        """Every artifact stored: this attempt's, then those of earlier ones not replaced."""
        keys = {r.get("key") for r in self.artifacts}
        return [*self.artifacts, *(r for r in self.earlier if r.get("key") not in keys)]

    def on_item(self) -> list[dict[str, Any]]:
        """The records that fit in the item's room, in order; the rest are only counted."""
        kept: list[dict[str, Any]] = []
        used = plain_size(kept)
        for record in self.records():
            used += 1 + plain_size(record)
            if used > self.room:
                break
            kept.append(record)
        return kept


def room_for_records(job: Job) -> int:
    """What the claimed job's item leaves for artifact records under DynamoDB's 400 KB.

    The inline event and registration metadata can take most of an item, and a
    job may list thousands of artifacts.
    """
    others = {name: value for name, value in job.as_item().items() if name != JobAttr.ARTIFACTS}
    return MAX_ITEM_BYTES - FINISH_RESERVE_BYTES - plain_item_size(others)


def reusable_records(job: Job) -> dict[str, dict[str, Any]]:
    """Artifacts already stored for this job, by key.

    After an operator's replay only those stored since the replay count,
    so a replay copies everything again while a retry of the replay
    still skips what it already stored.
    """
    records = [r for r in job.artifacts or [] if isinstance(r, dict)]
    if job.replay:
        since = job.received_at or 0
        records = [r for r in records if int(r.get("stored_at", 0)) > since]
    return {str(r.get("key")): r for r in records}
