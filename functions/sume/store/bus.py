"""The stack's EventBridge bus: one announcement put, bounded and checked.

Every event this system puts (a job's announcement by the worker, a refused
registration by the poller) goes through ``EventBus.put``, so they share the
source, the JSON form and the rule for a failed entry.
"""

from __future__ import annotations

import datetime
import sys
from typing import Any

from sume.core.bounded import encode
from sume.core.errors import RetryableError
from sume.core.names import EVENT_SOURCE

# EventBridge's entry limit is 1 MB for Source, DetailType, Detail, Time and
# Resources together (256 KB until 2026-01-29), read as 1,000,000 bytes;
# Detail and Resources get this much, and the rest of the entry is far under
# the 16,960 bytes this leaves. A job item (400 KB) holds fewer artifact
# records than this takes, so the cut is a bound by construction, not a limit
# an announcement meets.
MAX_ENTRY_BYTES = 960 * 1024


class AnnounceFailed(RetryableError):
    """EventBridge did not take the event; retrying may succeed."""


def iso_time(epoch: int) -> str:
    return datetime.datetime.fromtimestamp(epoch, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def to_json(detail: Any) -> str:
    """The detail as sent: compact and ASCII-only, so its length is its size in bytes.

    Metadata's fractions are Decimals (every digit kept), which ``json.dumps``
    refuses; ``sume.core.bounded.encode`` writes them as they are.
    """
    return encode(detail, sys.maxsize).text


class EventBus:
    def __init__(self, events: Any, bus_name: str) -> None:
        self._events = events
        self._bus = bus_name

    @property
    def partition(self) -> str:
        """The bus's partition (aws, aws-cn, aws-us-gov), which the client knows."""
        return str(self._events.meta.partition)

    def put(self, detail_type: str, detail: dict[str, Any], at: int, resources: list[str]) -> None:
        """Put one event; raise ``AnnounceFailed`` if EventBridge rejected it."""
        response = self._events.put_events(
            Entries=[
                {
                    "Source": EVENT_SOURCE,
                    "DetailType": detail_type,
                    "Detail": to_json(detail),
                    "EventBusName": self._bus,
                    "Time": datetime.datetime.fromtimestamp(at, datetime.UTC),
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
