"""Jobs by state: from the due-work index when it holds them, else a bounded Scan.

The table is keyed by ``job_id`` and has one index, ``due-work``, holding only
items that need attention (awaiting, received, processing, and lost ones whose
announcement is still owed: ``unfinished``, the default listing). Those are read
from it shard by shard, so the cost follows due work, never table size.
Finished jobs (processed, failed, processing_error, lost and announced) are in no
index on purpose (an index by state would cost a write on every transition for a
question asked at 3 a.m.), so listing them takes a Scan: refused unless the
operator passes ``--scan``, and then bounded by a budget of items read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sume.store.job import Job, JobAttr, State
from sume.store.jobs import JobsTable
from sume.store.reads import Page
from sume.store.table import expression_values
from sume_cli import USAGE, OpsError

# state argument -> item states, or a filter of its own (failed).
INDEXED = {
    # A lost job stays in the index until its announcement is sent.
    "unfinished": (State.AWAITING, State.RECEIVED, State.PROCESSING, State.LOST),
    "awaiting": (State.AWAITING,),
    "owed": (State.RECEIVED, State.PROCESSING),
    "received": (State.RECEIVED,),
    "processing": (State.PROCESSING,),
}
SCANNED = {
    "processed": (State.PROCESSED,),
    "processing_error": (State.PROCESSING_ERROR,),
    "lost": (State.LOST,),
    "failed": (),
}
STATES = (*INDEXED, *SCANNED)
DEFAULT_STATE = "unfinished"
FAILED_EVENTS = ("job.failed", "job.canceled")

# The times --since compares with (any of them), and the ones shown, per listed state.
TIME_ATTRIBUTES = {
    "unfinished": (JobAttr.RECEIVED_AT, JobAttr.REGISTERED_AT),
    "awaiting": (JobAttr.REGISTERED_AT,),
    "owed": (JobAttr.RECEIVED_AT,),
    "received": (JobAttr.RECEIVED_AT,),
    "processing": (JobAttr.CLAIMED_AT,),
    "processed": (JobAttr.PROCESSED_AT,),
    "processing_error": (JobAttr.PROCESSED_AT,),
    "lost": (JobAttr.LOST_AT,),
    "failed": (JobAttr.RECEIVED_AT,),
}

SHOWN = (
    JobAttr.JOB_ID,
    JobAttr.STATE,
    JobAttr.EVENT,
    JobAttr.STATUS,
    JobAttr.OUTCOME,
    JobAttr.PROCESSING_ERROR,
    JobAttr.STATUS_URL,
    JobAttr.DUE_AT,
    *sorted({a for attributes in TIME_ATTRIBUTES.values() for a in attributes}),
)


@dataclass(frozen=True)
class Selection:
    """The jobs a listing keeps, and which of their attributes it reads.

    A job is kept when its ``attribute`` is one of ``among`` and, when
    ``since`` is given, any of ``since_attributes`` is at or after it.
    Only ``attributes`` are read, so a listing never carries the stored body.
    """

    attribute: JobAttr
    among: tuple[str, ...]
    attributes: tuple[str, ...]
    since: int | None = None
    since_attributes: tuple[str, ...] = ()


def _filtered(selection: Selection) -> dict[str, Any]:
    """A Query's or Scan's filter and projection for ``selection``, names and values included."""
    names = {f"#p{i}": attribute for i, attribute in enumerate(selection.attributes)}
    names["#kept"] = selection.attribute
    values: dict[str, Any] = {f"v{i}": value for i, value in enumerate(selection.among)}
    conditions = [f"#kept IN ({', '.join(f':v{i}' for i in range(len(selection.among)))})"]
    if selection.since is not None:
        compared = []
        for i, attribute in enumerate(selection.since_attributes):
            names[f"#since{i}"] = attribute
            compared.append(f"#since{i} >= :since")
        values["since"] = selection.since
        conditions.append(f"({' OR '.join(compared)})")
    return {
        "FilterExpression": " AND ".join(conditions),
        "ProjectionExpression": ", ".join(f"#p{i}" for i in range(len(selection.attributes))),
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": expression_values(**values),
    }


def due_page(
    jobs: JobsTable, shard: int, selection: Selection, limit: int, start: dict[str, Any] | None
) -> Page:
    """A page of one shard of the due-work index, soonest due first, kept by ``selection``."""
    request = _filtered(selection)
    request["ExpressionAttributeValues"].update(expression_values(shard=shard))
    request.update(
        IndexName=jobs.due_index,
        KeyConditionExpression=f"{JobAttr.DUE_SHARD} = :shard",
        Limit=limit,
    )
    return jobs.read_page("query", request, start)


def scan_page(
    jobs: JobsTable, selection: Selection, limit: int, start: dict[str, Any] | None
) -> Page:
    """A page of a Scan of the whole table (``limit`` items read), kept by ``selection``."""
    return jobs.read_page("scan", {**_filtered(selection), "Limit": limit}, start)


@dataclass(frozen=True)
class Listing:
    jobs: list[Job]
    time_attributes: tuple[str, ...]
    read: int
    """Items DynamoDB read to answer (the cost)."""
    complete: bool
    """False when the limit or the scan budget stopped the read early."""


def _selection(state: str, since: int | None) -> Selection:
    """The listed state's jobs, with the attributes a listing shows: never the stored body."""
    states = (INDEXED | SCANNED)[state]
    return Selection(
        JobAttr.STATE if states else JobAttr.EVENT,
        states or FAILED_EVENTS,
        SHOWN,
        since,
        TIME_ATTRIBUTES[state],
    )


def from_index(jobs: JobsTable, state: str, since: int | None, limit: int, shards: int) -> Listing:
    """Every shard of the due-work index, soonest due first, up to ``limit`` jobs."""
    selection = _selection(state, since)
    found: list[Job] = []
    read = 0
    complete = True
    for shard in range(shards):
        in_shard = 0
        start = None
        while True:
            page = due_page(jobs, shard, selection, limit, start)
            read += page.read
            found.extend(page.jobs)
            in_shard += len(page.jobs)
            start = page.start
            if not start:
                break
            if in_shard >= limit:
                # Each shard is sorted by due time, so its first `limit`
                # matches are all it can add to the overall first `limit`.
                complete = False
                break
    found.sort(key=lambda job: (job.due_at or 0, job.job_id))
    if len(found) > limit:
        complete = False
    return Listing(found[:limit], TIME_ATTRIBUTES[state], read, complete)


def by_scan(jobs: JobsTable, state: str, since: int | None, limit: int, budget: int) -> Listing:
    """A Scan that stops after ``budget`` items read or ``limit`` matches, whichever is first."""
    selection = _selection(state, since)
    found: list[Job] = []
    read = 0
    start = None
    while True:
        page = scan_page(jobs, selection, max(1, min(budget - read, 1000)), start)
        read += page.read
        found.extend(page.jobs)
        start = page.start
        if not start:
            complete = len(found) <= limit
            break
        if read >= budget or len(found) >= limit:
            complete = False
            break
    return Listing(found[:limit], TIME_ATTRIBUTES[state], read, complete)


def list_jobs(
    jobs: JobsTable,
    state: str,
    since: int | None,
    limit: int,
    scan_budget: int | None,
    shards: int,
) -> Listing:
    """``shards``: how many of the due-work index to read (a draining count's too)."""
    if limit < 1:
        raise OpsError("--limit must be at least 1", USAGE)
    if state in INDEXED:
        return from_index(jobs, state, since, limit, shards)
    if scan_budget is None:
        raise OpsError(
            f"{state} jobs are in no index (only awaiting and owed work are): "
            "pass --scan to read at most --scan-budget items of the table",
            USAGE,
        )
    if scan_budget < 1:
        raise OpsError("--scan-budget must be at least 1", USAGE)
    return by_scan(jobs, state, since, limit, scan_budget)
