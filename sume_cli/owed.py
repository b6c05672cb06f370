"""Endings owed from before: lost jobs given up before lost jobs were announced.

Such a job is ``lost`` with no ``sequence`` and no ``due_at``: the poller of
then took it out of the due-work index without an announcement, and nothing
since owes one. They are found as the report finds ended jobs (the report
index's buckets for the window, then the items, never a Scan), and each is
made owed by one conditional write (``JobsTable.owe_lost_announcement``) and
queued: the worker announces it as it does every lost job, with the sequence
that write gave it. The write owes nothing twice, so a second run, or two
at once, announce each job once.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sume.store.job import Job, JobAttr, State
from sume.store.jobs import JobsTable
from sume.store.queue import JobQueue
from sume_cli.report import Window, ended
from sume_cli.times import iso

# The table keeps jobs 35 days by default (``retention_days``).
DEFAULT_SINCE = "35d"
HEADER = ["JOB_ID", "LOST", "QUEUED"]
READ = (JobAttr.JOB_ID, JobAttr.STATE, JobAttr.SEQUENCE, JobAttr.DUE_AT, JobAttr.LOST_AT)


def never_announced(job: Job) -> bool:
    """A lost job with no announcement sent or owed."""
    return job.state == State.LOST and job.sequence is None and job.due_at is None


@dataclass(frozen=True)
class Owed:
    jobs: list[Job]
    """The lost jobs never announced, oldest lost first."""
    queued: list[str]
    """Those this run made owed and queued (none on a dry run)."""
    entries_read: int
    dry_run: bool

    def as_dict(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "owed": [{"job_id": j.job_id, "lost_at": iso(j.lost_at)} for j in self.jobs],
            "queued": self.queued,
        }

    def rows(self) -> list[list[str]]:
        queued = set(self.queued)
        return [
            [j.job_id, iso(j.lost_at) or "-", "yes" if j.job_id in queued else "no"]
            for j in self.jobs
        ]


def add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--since", default=DEFAULT_SINCE, help=f"lost jobs that entered since ({DEFAULT_SINCE})"
    )
    parser.add_argument("--dry-run", action="store_true", help="list them, announce nothing")
    # The report's window, whose overdue bound and --limit mean nothing here.
    parser.set_defaults(limit=0, overdue_after="0s")


def summary(found: Owed, line: Callable[..., str], args: argparse.Namespace) -> str:
    """What was done, and what to run next (``line``: ``Ops.line``, a command to paste)."""
    read = f"read {found.entries_read} index entries and {len(found.jobs)} owed; no Scan"
    if not found.jobs:
        return f"no lost job since {args.since} is owed its announcement ({read})"
    if found.dry_run:
        return (
            f"{len(found.jobs)} lost job(s) never announced; announce them: "
            f"`{line('announce-owed', '--since', args.since)}` ({read})"
        )
    shown = (
        f"; `{line('status', found.queued[0])}` shows the sequence each was given"
        if found.queued
        else ""
    )
    return f"queued {len(found.queued)} lost announcement(s) for the worker{shown} ({read})"


def announce_owed(
    jobs: JobsTable, queue: JobQueue, window: Window, now: int, shards: int, dry_run: bool
) -> Owed:
    """Find the window's lost jobs never announced and, unless ``dry_run``, queue each once."""
    ids, read = ended(jobs, window, shards)
    found = [job for job in jobs.get_many(sorted(set(ids)), READ) if never_announced(job)]
    found.sort(key=lambda job: (job.lost_at or 0, job.job_id))
    queued = []
    if not dry_run:
        for job in found:
            # The write first: should the send fail, the sweeper queues the job.
            if jobs.owe_lost_announcement(job.job_id, now):
                queue.send(job.job_id)
                queued.append(job.job_id)
    return Owed(found, queued, read, dry_run)
