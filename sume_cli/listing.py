"""Jobs by state: from the due-work index when it holds them, else a bounded Scan.

The table is keyed by ``job_id`` and has one index, ``due-work``, holding only
items that need attention (awaiting, received, processing: ``unfinished``, the
default listing). Those states are read from it shard by shard, so the cost
follows due work, never table size.
Finished states (processed, failed, lost, processing_error) are in no index on
purpose (an index by state would cost a write on every transition for a
question asked at 3 a.m.), so listing them takes a Scan: refused unless the
operator passes ``--scan``, and then bounded by a budget of items read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from boto3.dynamodb.types import TypeSerializer

from sume.jobs import from_item
from sume.names import DUE_AT, DUE_INDEX, DUE_SHARD
from sume_cli import USAGE, OpsError

# state argument -> item states, or a filter of its own (failed).
INDEXED = {
    "unfinished": ("awaiting", "received", "processing"),
    "awaiting": ("awaiting",),
    "owed": ("received", "processing"),
    "received": ("received",),
    "processing": ("processing",),
}
SCANNED = {
    "processed": ("processed",),
    "processing_error": ("processing_error",),
    "lost": ("lost",),
    "failed": (),
}
STATES = (*INDEXED, *SCANNED)
DEFAULT_STATE = "unfinished"
FAILED_EVENTS = ("job.failed", "job.canceled")

# The times --since compares with (any of them), and the ones shown, per listed state.
TIME_ATTRIBUTES = {
    "unfinished": ("received_at", "registered_at"),
    "awaiting": ("registered_at",),
    "owed": ("received_at",),
    "received": ("received_at",),
    "processing": ("claimed_at",),
    "processed": ("processed_at",),
    "processing_error": ("processed_at",),
    "lost": ("lost_at",),
    "failed": ("received_at",),
}

SHOWN = (
    "job_id",
    "state",
    "event",
    "status",
    "outcome",
    "processing_error",
    "status_url",
    DUE_AT,
    *sorted({a for attributes in TIME_ATTRIBUTES.values() for a in attributes}),
)

_serializer = TypeSerializer()


@dataclass(frozen=True)
class Listing:
    items: list[dict[str, Any]]
    time_attributes: tuple[str, ...]
    read: int
    """Items DynamoDB read to answer (the cost)."""
    complete: bool
    """False when the limit or the scan budget stopped the read early."""


def _request(state: str, since: int | None) -> dict[str, Any]:
    """Filter and projection: the stored body never leaves the table for a listing."""
    names = {f"#p{i}": attribute for i, attribute in enumerate(SHOWN)}
    values: dict[str, Any] = {}
    states = (INDEXED | SCANNED)[state]
    if states:
        names["#state"] = "state"
        placeholders = []
        for i, value in enumerate(states):
            values[f":s{i}"] = value
            placeholders.append(f":s{i}")
        conditions = [f"#state IN ({', '.join(placeholders)})"]
    else:
        names["#event"] = "event"
        for i, value in enumerate(FAILED_EVENTS):
            values[f":e{i}"] = value
        conditions = [f"#event IN ({', '.join(f':e{i}' for i in range(len(FAILED_EVENTS)))})"]
    if since is not None:
        compared = []
        for i, attribute in enumerate(TIME_ATTRIBUTES[state]):
            names[f"#since{i}"] = attribute
            compared.append(f"#since{i} >= :since")
        values[":since"] = since
        conditions.append(f"({' OR '.join(compared)})")
    return {
        "FilterExpression": " AND ".join(conditions),
        "ProjectionExpression": ", ".join(f"#p{i}" for i in range(len(SHOWN))),
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": {k: _serializer.serialize(v) for k, v in values.items()},
    }


def from_index(
    client: Any, table: str, shards: int, state: str, since: int | None, limit: int
) -> Listing:
    """Every shard of the due-work index, soonest due first, up to ``limit`` jobs."""
    common = {"TableName": table, "IndexName": DUE_INDEX, **_request(state, since)}
    common["ExpressionAttributeNames"]["#shard"] = DUE_SHARD
    found: list[dict[str, Any]] = []
    read = 0
    complete = True
    for shard in range(shards):
        values = {**common["ExpressionAttributeValues"], ":shard": {"N": str(shard)}}
        request = {
            **common,
            "KeyConditionExpression": "#shard = :shard",
            "ExpressionAttributeValues": values,
        }
        in_shard = 0
        while True:
            response = client.query(**request, Limit=limit)
            read += response.get("ScannedCount", 0)
            items = [from_item(i) for i in response.get("Items", [])]
            found.extend(items)
            in_shard += len(items)
            start = response.get("LastEvaluatedKey")
            if not start:
                break
            if in_shard >= limit:
                # Each shard is sorted by due time, so its first `limit`
                # matches are all it can add to the overall first `limit`.
                complete = False
                break
            request["ExclusiveStartKey"] = start
    found.sort(key=lambda i: (i.get(DUE_AT, 0), i["job_id"]))
    if len(found) > limit:
        complete = False
    return Listing(found[:limit], TIME_ATTRIBUTES[state], read, complete)


def by_scan(
    client: Any, table: str, state: str, since: int | None, limit: int, budget: int
) -> Listing:
    """A Scan that stops after ``budget`` items read or ``limit`` matches, whichever is first."""
    request: dict[str, Any] = {"TableName": table, **_request(state, since)}
    found: list[dict[str, Any]] = []
    read = 0
    while True:
        response = client.scan(**request, Limit=max(1, min(budget - read, 1000)))
        read += response.get("ScannedCount", 0)
        found.extend(from_item(i) for i in response.get("Items", []))
        start = response.get("LastEvaluatedKey")
        if not start:
            complete = len(found) <= limit
            break
        if read >= budget or len(found) >= limit:
            complete = False
            break
        request["ExclusiveStartKey"] = start
    return Listing(found[:limit], TIME_ATTRIBUTES[state], read, complete)


def list_jobs(
    client: Any,
    table: str,
    shards: int,
    state: str,
    since: int | None,
    limit: int,
    scan_budget: int | None,
) -> Listing:
    if limit < 1:
        raise OpsError("--limit must be at least 1", USAGE)
    if state in INDEXED:
        return from_index(client, table, shards, state, since, limit)
    if scan_budget is None:
        raise OpsError(
            f"{state} jobs are in no index (only awaiting and owed work are): "
            "pass --scan to read at most --scan-budget items of the table",
            USAGE,
        )
    if scan_budget < 1:
        raise OpsError("--scan-budget must be at least 1", USAGE)
    return by_scan(client, table, state, since, limit, scan_budget)
