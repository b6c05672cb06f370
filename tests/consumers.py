"""Two subscribers of the announcements, as docs/announcements.md tells them to keep a job's ending.

- ``highest``: keeps, per job, the announcement with the highest ``sequence``; a copy
  (the same sequence) replaces the one it keeps.
- ``deduped``: works each (``job_id``, ``sequence``) once, the first copy to arrive, and
  takes the highest sequence worked as the job's ending.

EventBridge keeps no order, so both read the announcements as they arrived and in
reverse. Whatever the order, both must end where the job item ended: two different
endings under one sequence, or a later ending under a lower one, fail one of them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from sume.core.names import DETAIL_TYPES
from sume.store.job import Job, State

Ending = tuple[str, int, str | None, int | None]
"""detail-type, sequence, the processing error's code, the artifacts stored."""


def ending(announcement: dict[str, Any]) -> Ending:
    detail = announcement["detail"]
    problem = detail.get("processing_error")
    return (
        announcement["detail-type"],
        detail["sequence"],
        problem["code"] if problem else None,
        detail.get("artifact_count"),
    )


def highest(announcements: Iterable[dict[str, Any]]) -> dict[str, Ending]:
    kept: dict[str, Ending] = {}
    for announcement in announcements:
        job_id, now = announcement["detail"]["job_id"], ending(announcement)
        if job_id not in kept or now[1] >= kept[job_id][1]:
            kept[job_id] = now
    return kept


def deduped(announcements: Iterable[dict[str, Any]]) -> dict[str, Ending]:
    worked: dict[tuple[str, int], Ending] = {}
    for announcement in announcements:
        detail = announcement["detail"]
        worked.setdefault((detail["job_id"], detail["sequence"]), ending(announcement))
    kept: dict[str, Ending] = {}
    for (job_id, _), each in sorted(worked.items()):
        kept[job_id] = each
    return kept


MODELS = {"highest": highest, "deduped": deduped}


def item_ending(job: Job) -> Ending | None:
    """The ending the item says was announced last; None while one is still owed."""
    if job.due_at is not None or job.state not in (
        State.PROCESSED,
        State.PROCESSING_ERROR,
        State.LOST,
    ):
        return None
    if job.state == State.LOST:
        return (DETAIL_TYPES["lost"], job.sequence or 1, None, None)
    problem = job.processing_error
    kind = "processing_error" if job.state == State.PROCESSING_ERROR else str(job.outcome)
    code = problem.get("code") if problem else None
    return (DETAIL_TYPES[kind], job.sequence or 1, code, job.artifact_count)


def assert_consumers_agree(
    announcements: list[dict[str, Any]], item: Callable[[str], Job | None]
) -> int:
    """Both subscribers, in either order, end every ended job where its item did.

    Returns how many jobs were checked (those whose item has ended).
    """
    endings = [a for a in announcements if "sequence" in a.get("detail", {})]
    checked = 0
    for job_id in sorted({a["detail"]["job_id"] for a in endings}):
        job = item(job_id)
        expected = item_ending(job) if job is not None else None
        if expected is None:
            continue
        checked += 1
        for name, model in MODELS.items():
            for order, seen in (("arrival", endings), ("reversed", endings[::-1])):
                got = model(seen).get(job_id)
                if job is not None and job.details_dropped and got is not None:
                    # The item kept the state and codes only: no count to compare.
                    got = (*got[:3], expected[3])
                assert got == expected, f"{name} subscriber, {order} order, {job_id}: {got}"
    return checked
