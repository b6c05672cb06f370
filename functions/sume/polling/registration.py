"""Registering a submitted job by an event on the stack's bus, from any language.

An application puts an event with detail-type ``REGISTRATION_DETAIL_TYPE``,
a source of its own and the detail ``{"job_id", "status_url", "metadata"?}``
on the bus. A rule sends it to the registrations queue, whose event source
hands it to the poller, which registers it here through ``Registry.expect``:
the same checks and the same conditional write as the Python call.

An event that can never register (not a registration, a field missing or
unknown, a value ``expect`` refuses, a write DynamoDB refuses as invalid) is
announced on the bus (``Sume Job Registration Refused``: the reason code, why,
the job_id when readable, the application's event id), so the application
learns of it, then parked in the registrations DLQ at once, with why as
message attributes, and reported as refused. A failure that may pass
(DynamoDB, SQS or EventBridge unavailable) is raised instead, so SQS retries
the message and moves it to that same DLQ after its last receive; a retry
after a failed park announces again, with the same event id, which is what a
consumer dedupes on.

Numbers are read as Decimals, so metadata keeps every digit it was sent with
(``expect`` refuses what DynamoDB cannot keep exactly).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from sume.contract.envelope import MAX_DEPTH, MalformedEvent, load_json
from sume.core.bounded import bounded_text
from sume.core.errors import PermanentError
from sume.core.names import REGISTRATION_DETAIL_TYPE, REGISTRATION_REFUSED_DETAIL_TYPE
from sume.net.policy import URL_REFUSALS
from sume.polling.registering import (
    INVALID_REGISTRATION,
    REFUSED_BY_DYNAMODB,
    InvalidRegistration,
    Registry,
)
from sume.store.announcing import DETAIL_VERSION
from sume.store.bus import EventBus, iso_time
from sume.store.queue import DeadLetterQueue

MALFORMED_EVENT = "malformed_event"
NOT_A_REGISTRATION = "not_a_registration"
UNKNOWN_FIELD = "unknown_field"
MISSING_FIELD = "missing_field"
# Every reason a registration event is refused for: the DLQ message's
# ``reason`` attribute and the refusal announcement's (its schema's enum).
REFUSAL_REASONS = (
    MALFORMED_EVENT,
    NOT_A_REGISTRATION,
    UNKNOWN_FIELD,
    MISSING_FIELD,
    INVALID_REGISTRATION,
    *URL_REFUSALS,
    REFUSED_BY_DYNAMODB,
)
FIELDS = ("job_id", "status_url", "metadata")
REQUIRED = ("job_id", "status_url")
# A refused event's id and source go into log lines: whatever was sent, cut.
MAX_LOGGED_BYTES = 256
# A refusal's message in its announcement.
MAX_MESSAGE_BYTES = 1024


class Refused(PermanentError):
    """The event can never register; ``reason`` is a code, the message says why."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class Registration:
    """What became of one registration event. Never holds the metadata."""

    job_id: str | None
    source: str | None
    new: bool = False
    """The job is now awaiting (False: it was known already, or the event was refused)."""
    refused: str | None = None
    """The reason code when the event was refused and parked in the DLQ."""
    message: str = ""


def event_id(body: str) -> str | None:
    """The ``id`` of the EventBridge event an SQS message body carries, if readable."""
    try:
        event = load_json(body, Decimal)
    except (MalformedEvent, ValueError):
        return None
    value = event.get("id") if isinstance(event, Mapping) else None
    return _logged(value)


def refusal_detail(
    refused: Refused, job_id: Any, registration_event_id: str | None, now: int
) -> dict[str, Any]:
    """The detail of ``Sume Job Registration Refused`` (docs/announcements.md)."""
    return {
        "version": DETAIL_VERSION,
        "reason": refused.reason,
        "message": bounded_text(str(refused), MAX_MESSAGE_BYTES),
        "job_id": _logged(job_id),
        "registration_event_id": registration_event_id,
        "refused_at": iso_time(now),
    }


def registration_event(body: str) -> tuple[Mapping[str, Any], Any]:
    """The detail and source of the registration event an SQS message body carries."""
    try:
        event = load_json(body, Decimal)
    except MalformedEvent:
        raise Refused(
            MALFORMED_EVENT, f"the message nests deeper than {MAX_DEPTH} levels"
        ) from None
    except ValueError:
        raise Refused(MALFORMED_EVENT, "the message is not a JSON event") from None
    if not isinstance(event, Mapping):
        raise Refused(MALFORMED_EVENT, "the message is not a JSON object")
    if event.get("detail-type") != REGISTRATION_DETAIL_TYPE:
        raise Refused(NOT_A_REGISTRATION, f"detail-type is not {REGISTRATION_DETAIL_TYPE!r}")
    detail = event.get("detail")
    if not isinstance(detail, Mapping):
        raise Refused(MALFORMED_EVENT, "detail is not a JSON object")
    return detail, event.get("source")


def check_fields(detail: Mapping[str, Any]) -> None:
    # A misspelt "metadata" would otherwise register the job without it.
    unknown = sorted(str(name) for name in detail if name not in FIELDS)
    if unknown:
        raise Refused(UNKNOWN_FIELD, f"detail has fields it cannot take: {', '.join(unknown)}")
    missing = [name for name in REQUIRED if name not in detail]
    if missing:
        raise Refused(MISSING_FIELD, f"detail lacks {', '.join(missing)}")


def _logged(value: Any) -> str | None:
    return bounded_text(value, MAX_LOGGED_BYTES) if isinstance(value, str) else None


class Registrations:
    def __init__(
        self,
        registry: Registry,
        dead_letters: DeadLetterQueue,
        bus: EventBus,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._registry = registry
        self._dead_letters = dead_letters
        self._bus = bus
        self._clock = clock

    def handle(self, body: str) -> Registration:
        """Register the job ``body`` names, or park ``body`` in the DLQ saying why."""
        try:
            detail, source = registration_event(body)
        except Refused as refused:
            return self._park(body, refused, None, None)
        # Any JSON at all: expect checks it.
        job_id: Any = detail.get("job_id")
        try:
            check_fields(detail)
            new = self._registry.expect(job_id, detail["status_url"], detail.get("metadata"))
        except Refused as refused:
            return self._park(body, refused, job_id, source)
        except InvalidRegistration as exc:
            return self._park(body, Refused(exc.reason, str(exc)), job_id, source)
        return Registration(_logged(job_id), _logged(source), new=new)

    def _park(self, body: str, refused: Refused, job_id: Any, source: Any) -> Registration:
        message = str(refused)
        now = int(self._clock())
        detail = refusal_detail(refused, job_id, event_id(body), now)
        self._bus.put(REGISTRATION_REFUSED_DETAIL_TYPE, detail, now, [])
        self._dead_letters.park(body, refused.reason, message)
        return Registration(
            _logged(job_id), _logged(source), refused=refused.reason, message=message
        )
