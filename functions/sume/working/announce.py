"""Announcing each job's ending on EventBridge: a public API.

Source ``sume.webhooks``, one detail-type per result (``sume.core.names.DETAIL_TYPES``),
and a detail whose shape is documented in docs/announcements.md. Other services subscribe
with a rule; nothing here changes when they do. Fields are only ever added;
``version`` changes if one ever has to change meaning.

Every announcement of a job carries its ``sequence`` (``Job.sequence``: the same
for every copy of one announcement, higher for each later one, so consumers
dedupe on ``(job_id, sequence)``), the registration's ``metadata`` and
``lost_at``. ``Announcement`` is a processed job's (completed, failed,
canceled, processing error); ``LostAnnouncement`` a job the poller gave up.

The entry's ``resources`` are the S3 object ARNs of the artifacts the detail
lists, in the same order, as AWS services name what an event is about.

EventBridge refuses an entry over 256 KB, and a refused announcement would be
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
from typing import Any, Protocol

from sume.core.bounded import announced_error, bounded_text
from sume.core.names import DETAIL_TYPES
from sume.store.bus import MAX_ENTRY_BYTES, AnnounceFailed, EventBus, iso_time, to_json
from sume.store.job import Job

__all__ = [
    "MAX_ENTRY_BYTES",
    "AnnounceFailed",
    "Announcement",
    "Announcer",
    "LostAnnouncement",
    "iso_time",
    "to_json",
]

DETAIL_VERSION = 1
ARTIFACT_FIELDS = ("bucket", "key", "uri", "size", "sha256", "content_type", "source_url")
MAX_NAME_BYTES = 256


def _when(epoch: int | None) -> str | None:
    return None if epoch is None else iso_time(epoch)


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
            "event": _name(self.event),
            "status": _name(self.status),
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
            "lost_at": _when(self.lost_at),
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


@dataclass(frozen=True)
class LostAnnouncement:
    """The poller gave the job up: no terminal answer before its cut-off."""

    job_id: str
    lost_at: int
    registered_at: int | None
    polls: int
    last_poll_error: str | None
    sequence: int = 1
    metadata: dict[str, Any] | None = None
    replay: bool = False

    @classmethod
    def of(cls, job: Job) -> LostAnnouncement:
        """The announcement of a lost job, from its item as ``claim_lost`` left it."""
        assert job.lost_at is not None  # claim_lost takes only lost jobs
        return cls(
            job_id=job.job_id,
            lost_at=job.lost_at,
            registered_at=job.registered_at,
            polls=job.poll_attempts or 0,
            last_poll_error=job.last_poll_error,
            sequence=job.sequence or 1,
            metadata=job.metadata,
        )

    @property
    def detail_type(self) -> str:
        return DETAIL_TYPES["lost"]

    @property
    def at(self) -> int:
        return self.lost_at

    def contents(self, partition: str = "aws") -> tuple[dict[str, Any], list[str]]:
        detail = {
            "version": DETAIL_VERSION,
            "job_id": self.job_id,
            "sequence": self.sequence,
            "metadata": self.metadata,
            "registered_at": _when(self.registered_at),
            "lost_at": iso_time(self.lost_at),
            "polls": self.polls,
            "last_poll_error": _name(self.last_poll_error),
            "replay": self.replay,
        }
        return detail, []


class Announceable(Protocol):
    @property
    def detail_type(self) -> str: ...
    @property
    def at(self) -> int: ...
    def contents(self, partition: str = "aws") -> tuple[dict[str, Any], list[str]]: ...


def object_arn(partition: str, bucket: str, key: str) -> str:
    """The ARN of an S3 object: no region or account, the key as it is."""
    return f"arn:{partition}:s3:::{bucket}/{key}"


def _name(value: str | None) -> str | None:
    return None if value is None else bounded_text(value, MAX_NAME_BYTES)


class Announcer:
    def __init__(self, events: Any, bus_name: str, partition: str | None = None) -> None:
        self._bus = EventBus(events, bus_name)
        self._partition = partition

    def announce(self, announcement: Announceable) -> None:
        """Put one event; raise ``AnnounceFailed`` if EventBridge rejected it."""
        # The artifacts' ARNs name the bucket's partition, which is the bus's.
        detail, resources = announcement.contents(self._partition or self._bus.partition)
        self._bus.put(announcement.detail_type, detail, announcement.at, resources)
