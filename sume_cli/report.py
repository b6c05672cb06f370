"""The completeness report: how every job that entered a window ended, from two indexes.

A job enters the window when it is registered, or, never registered, when its
terminal event is first recorded (``Job.window_at``). Every job is in one of
two sparse indexes, or both: ``due-work`` while it is not ended (awaiting,
received, processing), ``report-window`` from the write that ended it
(processed, processing_error, lost). The report reads the due-work index's
shards first, then the report index's partitions for the window's days and
the ended jobs' items (BatchGetItem): a job that ends in between is found in
the second read, so none is missed for moving. No Scan: the cost follows the
window's jobs and the work still due, never the table's size (docs/cli.md).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from sume.contract.envelope import TERMINAL_EVENTS
from sume.core.names import REPORT_INDEX, REPORT_SHARDS, report_buckets
from sume.store.job import Job, JobAttr, Source, State
from sume.store.jobs import JobsTable
from sume.store.table import expression_values
from sume_cli.codes import cause

# What the report reads of each job: never the stored body.
READ = (
    JobAttr.JOB_ID,
    JobAttr.STATE,
    JobAttr.SOURCE,
    JobAttr.OUTCOME,
    JobAttr.REGISTERED_AT,
    JobAttr.FIRST_SEEN,
    JobAttr.REPLAYS,
    JobAttr.DUE_AT,
    JobAttr.PARKED_AT,
    JobAttr.REPORT_BUCKET,
)
# ... and of an ended job's item, what its error codes are (``codes.cause``): the
# due-work index, whose jobs are not ended, does not project them.
ITEM_READ = (*READ, JobAttr.PROCESSING_ERROR, JobAttr.LAST_ERROR)
# The longest window: the table keeps jobs RETENTION_DAYS (35 by default, at most
# a year is sensible), and each day costs one Query per shard.
MAX_WINDOW_DAYS = 366
PENDING = (State.AWAITING, State.RECEIVED, State.PROCESSING)
# Sume's outcomes, in its order; a processed item holding another is counted under it.
OUTCOMES = tuple(TERMINAL_EVENTS.values())
# The kinds of job that did not end right, in the order ``--check`` names them
# (``sume_cli.commands.report`` says what to run about each).
KINDS = ("lost", "processing_error", "parked", "overdue")


@dataclass(frozen=True)
class Window:
    """The jobs that entered at ``since`` or later and before ``until``: half-open, so
    consecutive windows (one's ``until`` the next's ``since``) hold each job once."""

    since: int
    until: int
    overdue_before: int
    """A job not ended whose due time is before this is overdue."""

    @property
    def last(self) -> int:
        """The window's last second (times are whole seconds): ``until`` is not in it."""
        return self.until - 1

    def holds(self, at: int) -> bool:
        return self.since <= at < self.until


def _in_window(window: Window) -> dict[str, Any]:
    """A filter keeping the due-work index's jobs that entered ``window`` (``Job.window_at``)."""
    names = {f"#p{i}": attribute for i, attribute in enumerate(READ)}
    names |= {"#registered": JobAttr.REGISTERED_AT, "#first": JobAttr.FIRST_SEEN}
    return {
        "FilterExpression": "(#registered BETWEEN :since AND :last) OR "
        "(attribute_not_exists(#registered) AND #first BETWEEN :since AND :last)",
        "ProjectionExpression": ", ".join(f"#p{i}" for i in range(len(READ))),
        "ExpressionAttributeNames": names,
    }


def _query_all(jobs: JobsTable, request: dict[str, Any]) -> tuple[list[Job], int]:
    found: list[Job] = []
    read = 0
    start = None
    while True:
        page = jobs.read_page("query", request, start)
        found.extend(page.jobs)
        read += page.read
        start = page.start
        if not start:
            return found, read


def not_ended(jobs: JobsTable, window: Window, shards: int) -> tuple[list[Job], int]:
    """The due-work index's jobs that entered the window, and the entries read: of
    ``shards`` shards, a lowered count's old ones too while they drain."""
    found: list[Job] = []
    read = 0
    for shard in range(shards):
        request = {
            **_in_window(window),
            "IndexName": jobs.due_index,
            "KeyConditionExpression": f"{JobAttr.DUE_SHARD} = :shard",
        }
        request["ExpressionAttributeValues"] = expression_values(
            shard=shard, since=window.since, last=window.last
        )
        shard_jobs, shard_read = _query_all(jobs, request)
        found.extend(shard_jobs)
        read += shard_read
    return found, read


def ended(jobs: JobsTable, window: Window, shards: int) -> tuple[list[str], int]:
    """The job_ids the report index holds for the window, and the entries read.

    Jobs that ended before the report shard was fixed are in a bucket below the
    due-work shard count of then: the larger count covers the current one.
    """
    job_ids: list[str] = []
    read = 0
    for bucket in report_buckets(window.since, window.last, max(REPORT_SHARDS, shards)):
        request = {
            "IndexName": REPORT_INDEX,
            "KeyConditionExpression": (
                f"{JobAttr.REPORT_BUCKET} = :bucket AND "
                f"{JobAttr.REPORT_AT} BETWEEN :since AND :last"
            ),
            "ExpressionAttributeValues": expression_values(
                bucket=bucket, since=window.since, last=window.last
            ),
        }
        bucket_jobs, bucket_read = _query_all(jobs, request)
        job_ids.extend(job.job_id for job in bucket_jobs)
        read += bucket_read
    return job_ids, read


@dataclass(frozen=True)
class Listed:
    """Job ids of one kind, the first ``limit`` of them (oldest in the window first)."""

    job_ids: list[str]
    count: int
    oldest: int | None = None
    """When the oldest of them entered the window (``Job.window_at``)."""

    @property
    def more(self) -> int:
        return self.count - len(self.job_ids)

    def as_dict(self) -> dict[str, Any]:
        return {"count": self.count, "job_ids": self.job_ids, "more": self.more}


@dataclass(frozen=True)
class Group:
    """Problem jobs of one kind (``KINDS``) and, for processing errors, one error code."""

    kind: str
    error_code: str | None
    """``codes.cause``: what ``replay --error-code`` selects them by."""
    listed: Listed


@dataclass(frozen=True)
class Report:
    window: Window
    jobs: int
    registered: int
    received_by_webhook: int
    recovered_by_poll: int
    processed: dict[str, int]
    """Processed jobs by Sume's outcome."""
    processing_error: Listed
    lost: Listed
    replayed: int
    pending: dict[str, int]
    """Jobs not ended, by state."""
    parked: Listed
    """Jobs not ended whose message waits in the jobs DLQ."""
    overdue: Listed
    entries_read: int
    """Index entries DynamoDB read (Query's ScannedCount)."""
    items_read: int
    """Items read by BatchGetItem."""
    errors: dict[str | None, Listed]
    """The processing errors by error code (``codes.cause``), most first."""

    @property
    def groups(self) -> list[Group]:
        """The jobs not ended right by kind, processing errors by error code too."""
        found = []
        for kind, listed in self.problems.items():
            if kind == "processing_error":
                found += [Group(kind, code, each) for code, each in self.errors.items()]
            else:
                found.append(Group(kind, None, listed))
        return found

    @property
    def problems(self) -> dict[str, Listed]:
        """What makes ``--check`` fail, by kind (``KINDS``): the jobs not ended right."""
        kinds = {
            "lost": self.lost,
            "processing_error": self.processing_error,
            "parked": self.parked,
            "overdue": self.overdue,
        }
        return {kind: listed for kind, listed in kinds.items() if listed.count}


def _listed(jobs: list[Job], limit: int) -> Listed:
    ordered = sorted(jobs, key=lambda job: (job.window_at() or 0, job.job_id))
    oldest = ordered[0].window_at() if ordered else None
    return Listed([job.job_id for job in ordered[:limit]], len(ordered), oldest)


def summarize(window: Window, jobs: list[Job], limit: int, entries: int, items: int) -> Report:
    """The report of ``jobs`` (each one job that entered ``window``, as read)."""
    states = Counter(job.state for job in jobs)
    open_jobs = [job for job in jobs if job.state in PENDING]
    overdue = [
        job for job in open_jobs if job.due_at is not None and job.due_at < window.overdue_before
    ]
    outcomes = Counter(str(job.outcome) for job in jobs if job.state == State.PROCESSED)
    errors: dict[str | None, list[Job]] = {}
    for job in jobs:
        if job.state == State.PROCESSING_ERROR:
            errors.setdefault(cause(job), []).append(job)
    by_count = sorted(errors.items(), key=lambda kv: (-len(kv[1]), kv[0] or ""))
    return Report(
        window=window,
        jobs=len(jobs),
        registered=sum(job.registered_at is not None for job in jobs),
        received_by_webhook=sum(job.source == Source.WEBHOOK for job in jobs),
        recovered_by_poll=sum(job.source == Source.POLL for job in jobs),
        processed={o: outcomes[o] for o in (*OUTCOMES, *sorted(set(outcomes) - set(OUTCOMES)))},
        processing_error=_listed([j for j in jobs if j.state == State.PROCESSING_ERROR], limit),
        lost=_listed([j for j in jobs if j.state == State.LOST], limit),
        replayed=sum((job.replays or 0) > 0 for job in jobs),
        pending={state.value: states[state] for state in PENDING},
        parked=_listed([job for job in open_jobs if job.parked_at is not None], limit),
        overdue=_listed(overdue, limit),
        entries_read=entries,
        items_read=items,
        errors={code: _listed(each, limit) for code, each in by_count},
    )


def report(jobs: JobsTable, window: Window, limit: int, shards: int) -> Report:
    """Every job that entered ``window``, read once from the two indexes and the table;
    ``shards`` of the due-work index (as the poller reads them)."""
    pending, pending_read = not_ended(jobs, window, shards)
    found = {job.job_id: job for job in pending}
    ids, ended_read = ended(jobs, window, shards)
    # The item as read now supersedes the due-work index's copy (it ended meanwhile).
    fresh = jobs.get_many(sorted(set(ids)), ITEM_READ)
    found.update((job.job_id, job) for job in fresh)
    kept = [
        job for job in found.values() if (at := job.window_at()) is not None and window.holds(at)
    ]
    return summarize(window, kept, limit, pending_read + ended_read, len(fresh))
