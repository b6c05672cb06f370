"""Announcing each processed job on EventBridge: a public API.

Source ``sume.webhooks``, one detail-type per result (``sume.core.names.DETAIL_TYPES``),
and a detail whose shape is documented in docs/announcements.md. Other services subscribe
with a rule; nothing here changes when they do. Fields are only ever added;
``version`` changes if one ever has to change meaning.

The entry's ``resources`` are the S3 object ARNs of the artifacts the detail
lists, in the same order, as AWS services name what an event is about.

EventBridge refuses an entry over 256 KB, and a refused announcement would be
retried forever, so the entry is bounded by construction: Sume's ``error``
goes through ``sume.core.bounded.announced_error``, ``event`` and ``status`` are
cut, and the artifact list keeps its first records while the detail and the
resources together stay within ``MAX_ENTRY_BYTES``; a record and its ARN are
kept or left out together. ``artifact_count`` always says how many there
were, ``artifacts_truncated`` whether some were left out of both.
"""

from __future__ import annotations

import datetime
import json
from dataclasses import dataclass, field
from typing import Any

from sume.core.bounded import announced_error, bounded_text
from sume.core.errors import RetryableError
from sume.core.names import DETAIL_TYPES, EVENT_SOURCE

DETAIL_VERSION = 1
ARTIFACT_FIELDS = ("bucket", "key", "uri", "size", "sha256", "content_type", "source_url")
# EventBridge's entry limit is 256 KiB for Source, DetailType, Detail, Time and
# Resources together; Detail and Resources get this much, and the rest of the
# entry is far under the 16 KiB this leaves.
MAX_ENTRY_BYTES = 240 * 1024
MAX_NAME_BYTES = 256


class AnnounceFailed(RetryableError):
    """EventBridge did not take the event; retrying may succeed."""


def iso_time(epoch: int) -> str:
    return datetime.datetime.fromtimestamp(epoch, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


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

    @property
    def detail_type(self) -> str:
        return DETAIL_TYPES[self.result]

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
            "artifact_count": len(self.artifacts),
            "artifacts_truncated": False,
            "processed_at": iso_time(self.processed_at),
            "replay": self.replay,
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


def _name(value: str | None) -> str | None:
    return None if value is None else bounded_text(value, MAX_NAME_BYTES)


def to_json(detail: dict[str, Any]) -> str:
    """The detail as sent: compact and ASCII-only, so its length is its size in bytes."""
    return json.dumps(detail, separators=(",", ":"))


class Announcer:
    def __init__(self, events: Any, bus_name: str, partition: str | None = None) -> None:
        self._events = events
        self._bus = bus_name
        self._partition = partition

    def announce(self, announcement: Announcement) -> None:
        """Put one event; raise ``AnnounceFailed`` if EventBridge rejected it."""
        # The artifacts' ARNs name the bucket's partition, which is the bus's:
        # the client knows it once it exists (aws, aws-cn, aws-us-gov).
        partition = self._partition or self._events.meta.partition
        detail, resources = announcement.contents(partition)
        response = self._events.put_events(
            Entries=[
                {
                    "Source": EVENT_SOURCE,
                    "DetailType": announcement.detail_type,
                    "Detail": to_json(detail),
                    "EventBusName": self._bus,
                    "Time": datetime.datetime.fromtimestamp(
                        announcement.processed_at, datetime.UTC
                    ),
                    "Resources": resources,
                }
            ]
        )
        # PutEvents answers 200 even when an entry failed (throttled, internal
        # error): only FailedEntryCount tells.
        if response.get("FailedEntryCount"):
            entry = (response.get("Entries") or [{}])[0]
            raise AnnounceFailed(
                f"{entry.get('ErrorCode', 'unknown')}: {entry.get('ErrorMessage', '')}"
            )
