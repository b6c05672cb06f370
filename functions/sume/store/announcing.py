"""What the worker and the poller both announce with: the ``Announcer``, and a lost job's
announcement, which the poller's run that gives a job up puts (the worker a queued one's).

The detail's rules (``version``, the names cut, the times) are the worker's
announcements' too: ``sume.working.announce`` builds a processed job's on these.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from sume.core.bounded import bounded_text
from sume.core.names import DETAIL_TYPES
from sume.store.bus import EventBus, iso_time
from sume.store.job import Job

DETAIL_VERSION = 1
MAX_NAME_BYTES = 256


def when(epoch: int | None) -> str | None:
    return None if epoch is None else iso_time(epoch)


def name(value: str | None) -> str | None:
    """An outside name (an event, a status, a poll error) as announced: cut to 256 bytes."""
    return None if value is None else bounded_text(value, MAX_NAME_BYTES)


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
        """The announcement of a lost job, from its item as ``mark_lost`` or ``claim_lost``
        left it: every copy is the same."""
        assert job.lost_at is not None  # both take only lost jobs
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
            "registered_at": when(self.registered_at),
            "lost_at": iso_time(self.lost_at),
            "polls": self.polls,
            "last_poll_error": name(self.last_poll_error),
            "replay": self.replay,
        }
        return detail, []


class Announceable(Protocol):
    @property
    def detail_type(self) -> str: ...
    @property
    def at(self) -> int: ...
    def contents(self, partition: str = "aws") -> tuple[dict[str, Any], list[str]]: ...


class Announcer:
    def __init__(self, events: Any, bus_name: str, partition: str | None = None) -> None:
        self._bus = EventBus(events, bus_name)
        self._partition = partition

    def announce(self, announcement: Announceable) -> None:
        """Put one event; raise ``AnnounceFailed`` if EventBridge rejected it."""
        # The artifacts' ARNs name the bucket's partition, which is the bus's.
        detail, resources = announcement.contents(self._partition or self._bus.partition)
        self._bus.put(announcement.detail_type, detail, announcement.at, resources)
