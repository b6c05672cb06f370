"""Sume's event envelope, parsed only after the signature has been verified."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

TERMINAL_EVENTS = {
    "job.completed": "completed",
    "job.failed": "failed",
    "job.canceled": "canceled",
}
TEST_EVENT = "webhook.test"


class MalformedEvent(Exception):
    """A genuine delivery whose body is not a usable Sume event (answer 400)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class JobEvent:
    """A terminal event for one job. ``raw`` is the body exactly as received."""

    job_id: str
    event: str
    status: str
    raw: str
    data: dict[str, Any] = field(repr=False, compare=False)

    @property
    def outcome(self) -> str:
        return TERMINAL_EVENTS[self.event]


@dataclass(frozen=True)
class Ping:
    request_id: str | None


@dataclass(frozen=True)
class UnknownEvent:
    event: str | None


Delivery = JobEvent | Ping | UnknownEvent


def parse(raw_body: bytes) -> Delivery:
    try:
        text = raw_body.decode("utf-8")
        data = json.loads(text)
    except (UnicodeDecodeError, ValueError) as exc:
        raise MalformedEvent("body_not_json") from exc
    if not isinstance(data, dict):
        raise MalformedEvent("body_not_object")
    return from_mapping(data, text)


def from_mapping(data: dict[str, Any], raw: str) -> Delivery:
    """Classify an envelope; shared by webhook bodies and status-poll answers."""
    event = data.get("event")
    if event == TEST_EVENT:
        request_id = data.get("request_id")
        return Ping(request_id if isinstance(request_id, str) else None)
    if event not in TERMINAL_EVENTS:
        # A signed event we do not know is acknowledged, not retried ten times.
        return UnknownEvent(event if isinstance(event, str) else None)
    job_id = data.get("job_id")
    if not isinstance(job_id, str) or not job_id.strip():
        raise MalformedEvent("missing_job_id")
    if len(job_id.encode("utf-8")) > 1024:
        # DynamoDB caps a partition key at 2048 bytes; no real job id is near this.
        raise MalformedEvent("job_id_too_long")
    status = data.get("status")
    return JobEvent(
        job_id=job_id,
        event=event,
        status=status if isinstance(status, str) else "",
        raw=raw,
        data=data,
    )
