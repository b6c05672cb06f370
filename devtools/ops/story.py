"""A job's whole story from its one item, for people (text) and scripts (JSON)."""

from __future__ import annotations

import json
from typing import Any

from devtools.ops.times import iso

# Item attributes holding epoch seconds; shown as ISO 8601 UTC everywhere.
TIME_ATTRIBUTES = frozenset(
    {
        "first_seen",
        "received_at",
        "last_delivery_at",
        "due_at",
        "lease_until",
        "claimed_at",
        "processed_at",
        "registered_at",
        "last_polled_at",
        "lost_at",
        "expires_at",
    }
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


def as_json(item: dict[str, Any]) -> dict[str, Any]:
    """The item with its times in ISO UTC; every other attribute as stored."""
    return {k: iso(v) if k in TIME_ATTRIBUTES else v for k, v in sorted(item.items())}


def _compact(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _artifact(value: Any) -> str:
    if isinstance(value, dict):
        return "  ".join(f"{k}={_compact(v)}" for k, v in sorted(value.items()))
    return _compact(value)


def render(item: dict[str, Any]) -> str:
    """The item as labelled lines, most telling first; absent attributes are skipped."""
    state = str(item.get("state", "?"))
    lines: list[tuple[str, str]] = [
        ("job", str(item["job_id"])),
        ("state", f"{state} ({MEANING.get(state, 'unknown state')})"),
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
    add("error", item.get("error"))
    add("processing error", item.get("processing_error"))
    add("processed", when("processed_at"))
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
    width = max(len(label) for label, _ in lines)
    return "\n".join(f"{label:<{width}}  {value}" for label, value in lines)
