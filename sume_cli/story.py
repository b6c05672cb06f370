"""A job's whole story from its one item, for people (text) and scripts (JSON)."""

from __future__ import annotations

import json
import time
from typing import Any

from sume_cli.times import iso

# Item attributes holding epoch seconds, shown as ISO 8601 UTC everywhere; any
# other ``*_at`` attribute (the worker and poller may add some) counts too.
TIME_ATTRIBUTES = frozenset({"first_seen", "lease_until"})


def is_time(attribute: str, value: Any) -> bool:
    return (attribute in TIME_ATTRIBUTES or attribute.endswith("_at")) and isinstance(
        value, int | float
    )


# What each state means to an operator at 3 a.m.
MEANING = {
    "awaiting": "registered; waiting for its webhook or the next status poll",
    "received": "terminal event stored; follow-up work owed",
    "processing": "a worker holds the job under a lease",
    "processed": "follow-up work done",
    "processing_error": "follow-up work failed in a way retrying cannot fix",
    "lost": "status polling gave up before a terminal event arrived",
}


def lease_ended(item: dict[str, Any], now: float) -> str | None:
    """What a processing job whose lease has run out is waiting for, if it has."""
    lease = item.get("lease_until")
    if item.get("state") != "processing" or not isinstance(lease, int | float) or lease >= now:
        return None
    # A worker that failed gives its claim back at once and notes why
    # (last_error_at); a claim taken after that note was abandoned instead.
    if "last_error" in item and item.get("last_error_at", 0) >= item.get("claimed_at", 0):
        return "released, waiting for a retry"
    return "lease expired: its worker stopped; the sweeper queues it again"


SHOWN = frozenset(
    {
        "job_id",
        "state",
        "replay",
        "source",
        "event",
        "status",
        "deliveries",
        "conflicts",
        "first_seen",
        "last_delivery_at",
        "received_at",
        "outcome",
        "error",
        "error_truncated",
        "details_dropped",
        "processing_error",
        "last_error",
        "last_error_at",
        "processed_at",
        "artifacts",
        "artifact_count",
        "artifacts_truncated",
        "due_at",
        "due_shard",
        "claim_id",
        "lease_until",
        "attempts",
        "claimed_at",
        "sweeps",
        "status_url",
        "metadata",
        "registered_at",
        "poll_attempts",
        "last_polled_at",
        "lost_at",
        "expires_at",
        "body",
        "body_ref",
    }
)
"""Attributes ``render`` places itself; the claim id is an internal token."""


def _with_iso_times(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: iso(v) if is_time(k, v) else _with_iso_times(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_with_iso_times(v) for v in value]
    return value


def as_json(item: dict[str, Any]) -> dict[str, Any]:
    """The item with its times (also inside artifact records) in ISO UTC; the rest as stored."""
    converted: dict[str, Any] = _with_iso_times(dict(sorted(item.items())))
    return converted


def _compact(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _artifact(value: Any) -> str:
    if isinstance(value, dict) and "uri" in value:
        parts = [str(value["uri"])]
        if "size" in value:
            parts.append(f"{value['size']} bytes")
        if "source_url" in value:
            parts.append(f"from {value['source_url']}")
        if "stored_at" in value:
            parts.append(f"stored {iso(value['stored_at'])}")
        return "  ".join(parts)
    if isinstance(value, dict):
        return "  ".join(f"{k}={_compact(v)}" for k, v in sorted(value.items()))
    return _compact(value)


DROPPED = "not recorded: DynamoDB refused the finish (the announcement has them)"


def _listed(item: dict[str, Any]) -> str | None:
    """How many artifacts the item lists, when it could not list them all."""
    if not item.get("artifacts_truncated"):
        return None
    listed = len(item.get("artifacts") or [])
    return f"{item.get('artifact_count')} stored; the item lists the first {listed}"


def _sume_error(item: dict[str, Any]) -> Any:
    """Sume's error as the worker keeps it: JSON text, cut when ``error_truncated``.

    Shown as stored (ASCII, with escapes), so even a lone surrogate prints;
    items finished before the text form hold a map.
    """
    error = item.get("error")
    if isinstance(error, str) and item.get("error_truncated"):
        return f"{error}... (cut at {len(error)} characters)"
    return error


def render(item: dict[str, Any]) -> str:
    """The item as labelled lines, most telling first; absent attributes are skipped.

    Attributes this view does not know yet are listed last, under their own
    names, so the story is never silently incomplete.
    """
    state = str(item.get("state", "?"))
    meaning = lease_ended(item, time.time())
    lines: list[tuple[str, str]] = [
        ("job", str(item["job_id"])),
        ("state", f"{state} ({meaning or MEANING.get(state, 'unknown state')})"),
    ]

    def add(label: str, value: Any) -> None:
        if value not in (None, "", [], {}):
            lines.append((label, value if isinstance(value, str) else _compact(value)))

    def when(attribute: str) -> str | None:
        return iso(item.get(attribute))

    if item.get("replay"):
        add("replay", "requested: artifacts will be copied again")
    add("source", item.get("source"))
    if item.get("event"):
        add("event", f"{item['event']}  status={item.get('status', '')}")
    if "deliveries" in item:
        add("deliveries", f"{item['deliveries']}  conflicts={item.get('conflicts', 0)}")
    add("first seen", when("first_seen"))
    add("last delivery", when("last_delivery_at"))
    add("received", when("received_at"))
    add("outcome", item.get("outcome"))
    add("error", _sume_error(item))
    add("details", DROPPED if item.get("details_dropped") else None)
    add("processing error", item.get("processing_error"))
    if "last_error" in item:
        add("last error", f"{when('last_error_at') or '-'}  {_compact(item['last_error'])}")
    add("processed", when("processed_at"))
    add("artifacts", _listed(item))
    for artifact in item.get("artifacts") or []:
        add("artifact", _artifact(artifact))
    if "due_at" in item:
        add("due", f"{when('due_at')}  shard={item.get('due_shard')}")
    if "claim_id" in item:
        add(
            "claim",
            f"lease until {when('lease_until') or '-'}  attempts={item.get('attempts', 0)}  "
            f"claimed {when('claimed_at')}",
        )
    if "sweeps" in item:
        add("sweeps", str(item["sweeps"]))
    add("status url", item.get("status_url"))
    add("metadata", item.get("metadata"))
    add("registered", when("registered_at"))
    if "poll_attempts" in item:
        add("polls", f"{item['poll_attempts']}  last {when('last_polled_at') or 'never'}")
    add("lost", when("lost_at"))
    add("expires", when("expires_at"))
    if "body" in item:
        add("body", f"{len(str(item['body']).encode('utf-8'))} bytes inline (--json shows it)")
    add("body ref", item.get("body_ref"))
    for attribute in sorted(set(item) - SHOWN):
        value = item[attribute]
        add(attribute, iso(value) if is_time(attribute, value) else value)
    width = max(len(label) for label, _ in lines)
    return "\n".join(f"{label:<{width}}  {value}" for label, value in lines)
