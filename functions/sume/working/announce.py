"""Announcing each job's ending on EventBridge: a public API.

Source ``sume.webhooks``, one detail-type per result (``sume.core.names.DETAIL_TYPES``),
and a detail whose shape is documented in docs/announcements.md. Other services subscribe
with a rule; nothing here changes when they do. Fields are only ever added;
``version`` changes if one ever has to change meaning.

Every announcement of a job carries its ``sequence`` (``Job.sequence``: the same
for every copy of one announcement, higher for each later one, so consumers
dedupe on ``(job_id, sequence)``), the registration's ``metadata`` and
``lost_at``. ``Announcement`` is a processed job's (completed, failed,
canceled, processing error); ``LostAnnouncement`` a job the poller gave up
(``sume.store.announcing``: the poller puts it too).

The entry's ``resources`` are the S3 object ARNs of the artifacts the detail
lists, in the same order, as AWS services name what an event is about.

EventBridge refuses an entry over 1 MB, and a refused announcement would be
retried forever, so the entry is bounded by construction: Sume's ``error``
goes through ``sume.core.bounded.announced_error``, ``event`` and ``status`` are
cut, metadata was bounded at registration (64 KiB as ASCII-escaped JSON, the
form it is sent in), and the artifact list keeps its first records while the
detail and the resources together stay within ``MAX_ENTRY_BYTES``; a record
and its ARN are kept or left out together. ``artifact_count`` always says how
many there were, ``artifacts_truncated`` whether some were left out of both.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sume.core.bounded import announced_error
from sume.core.names import DETAIL_TYPES
from sume.store.announcing import DETAIL_VERSION, Announcer, LostAnnouncement, name, when
from sume.store.bus import MAX_ENTRY_BYTES, AnnounceFailed, iso_time, to_json

__all__ = [
    "MAX_ENTRY_BYTES",
    "AnnounceFailed",
    "Announcement",
    "Announcer",
    "LostAnnouncement",
    "iso_time",
    "to_json",
]

ARTIFACT_FIELDS = ("bucket", "key", "uri", "size", "sha256", "content_type", "source_url")


@dataclass(frozen=True)
class Announcement:
    job_id: str
    result: str
    """completed | failed | canceled | processing_error: picks the detail-type."""
    outcome: str | None
    """Sume's outcome (completed | failed | canceled); None if the event was unreadable."""
    event: str | None
    status: str | None
    processed_at: int
    error: Any = None
    processing_error: dict[str, Any] | None = None
    artifacts: list[dict[str, Any]] = field(default_factory=list)
    replay: bool = False
    sequence: int = 1
    metadata: dict[str, Any] | None = None
    lost_at: int | None = None
    artifact_count: int | None = None
    """Artifacts stored, when more than ``artifacts`` lists (those left off the item)."""

    @property
    def detail_type(self) -> str:
        return DETAIL_TYPES[self.result]

    @property
    def at(self) -> int:
        return self.processed_at

    def contents(self, partition: str = "aws") -> tuple[dict[str, Any], list[str]]:
        """The detail and the resources (S3 object ARNs in ``partition``), cut together."""
        error, error_truncated = announced_error(self.error)
        detail = {
            "version": DETAIL_VERSION,
            "job_id": self.job_id,
            "outcome": self.outcome,
            "event": name(self.event),
            "status": name(self.status),
            "error": error,
            "error_truncated": error_truncated,
            "processing_error": self.processing_error,
            "artifacts": [],
            "artifact_count": max(len(self.artifacts), self.artifact_count or 0),
            "artifacts_truncated": len(self.artifacts) < (self.artifact_count or 0),
            "processed_at": iso_time(self.processed_at),
            "replay": self.replay,
            "sequence": self.sequence,
            "metadata": self.metadata,
            "lost_at": when(self.lost_at),
        }
        room = MAX_ENTRY_BYTES - len(to_json(detail))
        kept = detail["artifacts"]
        resources: list[str] = []
        for artifact in self.artifacts:
            record = {k: artifact.get(k) for k in ARTIFACT_FIELDS}
            arn = object_arn(partition, str(record["bucket"]), str(record["key"]))
            room -= len(to_json(record)) + (1 if kept else 0) + len(arn.encode("utf-8"))
            if room < 0:
                detail["artifacts_truncated"] = True
                break
            kept.append(record)
            resources.append(arn)
        return detail, resources


def object_arn(partition: str, bucket: str, key: str) -> str:
    """The ARN of an S3 object: no region or account, the key as it is."""
    return f"arn:{partition}:s3:::{bucket}/{key}"
