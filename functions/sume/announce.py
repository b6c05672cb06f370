"""Announcing each processed job on EventBridge: a public API.

Source ``sume.webhooks``, one detail-type per result (``sume.schema.DETAIL_TYPES``),
and a detail whose shape is documented in the README. Other services subscribe
with a rule; nothing here changes when they do. Fields are only ever added;
``version`` changes if one ever has to change meaning.
"""

from __future__ import annotations

import datetime
import json
from dataclasses import dataclass, field
from typing import Any

from sume.schema import DETAIL_TYPES, EVENT_SOURCE

DETAIL_VERSION = 1
ARTIFACT_FIELDS = ("bucket", "key", "uri", "size", "sha256", "content_type", "source_url")


class AnnounceFailed(Exception):
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

    def detail(self) -> dict[str, Any]:
        return {
            "version": DETAIL_VERSION,
            "job_id": self.job_id,
            "outcome": self.outcome,
            "event": self.event,
            "status": self.status,
            "error": self.error,
            "processing_error": self.processing_error,
            "artifacts": [{k: a.get(k) for k in ARTIFACT_FIELDS} for a in self.artifacts],
            "processed_at": iso_time(self.processed_at),
            "replay": self.replay,
        }


class Announcer:
    def __init__(self, events: Any, bus_name: str) -> None:
        self._events = events
        self._bus = bus_name

    def announce(self, announcement: Announcement) -> None:
        """Put one event; raise ``AnnounceFailed`` if EventBridge rejected it."""
        response = self._events.put_events(
            Entries=[
                {
                    "Source": EVENT_SOURCE,
                    "DetailType": announcement.detail_type,
                    "Detail": json.dumps(announcement.detail(), separators=(",", ":")),
                    "EventBusName": self._bus,
                    "Time": datetime.datetime.fromtimestamp(
                        announcement.processed_at, datetime.UTC
                    ),
                    "Resources": [],
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
