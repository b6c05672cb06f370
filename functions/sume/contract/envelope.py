"""Sume's event envelope, parsed only after the signature has been verified.

``parse`` and ``from_mapping`` read what comes from outside (a webhook body, a
status answer) and refuse what breaks the rules; ``stored_event`` reads back, for
the worker, an event that passed them on its way in.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any

from sume.core.bounded import bounded_text
from sume.core.errors import PermanentError
from sume.core.ids import InvalidJobId, check_job_id

TERMINAL_EVENTS = {
    "job.completed": "completed",
    "job.failed": "failed",
    "job.canceled": "canceled",
}
TEST_EVENT = "webhook.test"
# Sume's envelopes nest a few levels (payload.artifacts[].url is four). 64 is
# far beyond any real event and far below Python's recursion limit, so the
# parser and every later walk of the data (serializers, the status wrapper,
# the worker) are safe. Checked on the text, before parsing, without recursion.
MAX_DEPTH = 64
# Sume's status is "OK" or "ERROR". The item and the announcement keep a
# bounded copy, so no value can push the item past DynamoDB's 400 KB; the
# stored body keeps the value whole.
MAX_STATUS_BYTES = 64

_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_DEPTH_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


class MalformedEvent(PermanentError):
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


def _too_deep(text: str) -> bool:
    # A body with fewer brackets than the limit cannot nest deeper (nearly all).
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return False
    brackets = _NOT_BRACKET.sub("", _JSON_STRING.sub("", text))
    return max(accumulate(map(_DEPTH_STEP.__getitem__, brackets)), default=0) > MAX_DEPTH


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def load_json(text: str, number: Callable[[str], Any] | None = None) -> Any:
    """Parse JSON text from outside: strict JSON (no NaN or Infinity), at most MAX_DEPTH deep.

    ``number`` (``Decimal`` for one) reads every number, whole ones too, when
    each digit matters. Raises ``MalformedEvent("body_too_deep")`` or ``ValueError``.
    """
    if _too_deep(text):
        raise MalformedEvent("body_too_deep")
    return json.loads(text, parse_constant=_no_constant, parse_float=number, parse_int=number)


def parse(raw_body: bytes) -> Delivery:
    try:
        text = raw_body.decode("utf-8")
        data = load_json(text)
    except (UnicodeDecodeError, ValueError) as exc:
        raise MalformedEvent("body_not_json") from exc
    if not isinstance(data, dict):
        raise MalformedEvent("body_not_object")
    return from_mapping(data, text)


def from_mapping(data: dict[str, Any], raw: str) -> Delivery:
    """Classify an envelope; shared by webhook bodies, status-poll answers and the worker."""
    event = data.get("event")
    if not isinstance(event, str):
        return UnknownEvent(None)
    if event == TEST_EVENT:
        request_id = data.get("request_id")
        return Ping(request_id if isinstance(request_id, str) else None)
    if event not in TERMINAL_EVENTS:
        # A signed event we do not know is acknowledged, not retried ten times.
        return UnknownEvent(bounded_text(event, MAX_STATUS_BYTES))
    try:
        job_id = check_job_id(data.get("job_id"))
    except InvalidJobId as exc:
        raise MalformedEvent(exc.reason) from None
    return JobEvent(job_id=job_id, event=event, status=_status(data), raw=raw, data=data)


def stored_event(raw: str, job_id: str) -> JobEvent:
    """The terminal event stored for ``job_id``, read back by the worker.

    It was verified and checked on its way in (strict JSON, depth, the job_id
    rule), so none of that is done again: the job is the item's. What the
    worker cannot do without is still checked, for a stored text it cannot
    read: ``ValueError`` or ``RecursionError`` when it is not JSON,
    ``MalformedEvent("not_terminal")`` when it is not a terminal event.
    """
    data = json.loads(raw)
    event = data.get("event") if isinstance(data, dict) else None
    if not isinstance(event, str) or event not in TERMINAL_EVENTS:
        raise MalformedEvent("not_terminal")
    return JobEvent(job_id=job_id, event=event, status=_status(data), raw=raw, data=data)


def _status(data: dict[str, Any]) -> str:
    status = data.get("status")
    return bounded_text(status, MAX_STATUS_BYTES) if isinstance(status, str) else ""
