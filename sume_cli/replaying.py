"""Replay a window by filter: find the ended jobs that match, then replay each once, paced.

The jobs come from the report index (``sume_cli.report.ended``: the window's
``<day>#<shard>`` partitions, keys only) and their items from BatchGetItem, so
the cost follows the window's ended jobs, never the table's size: no Scan. A
job is in the window when it entered it (``Job.window_at``: its registration,
else the first record of its terminal event), as in ``report``.

A run is named by its reason (``run_id``): each replay is the single replay's
conditional write (``JobsTable.request_replay``) with the run's id added to the
item's ``replay_runs`` in the same write, which is refused when the id is
already there. So a run replays a job at most once however often it is
started, and a run stopped halfway continues where it stopped when started
again: what it already replayed is skipped, by the database, not by a list
kept here. A job the run replayed that failed again needs a new reason.
"""

from __future__ import annotations

import hashlib
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from infra.capacity import (
    DEFAULT_PEAK_JOBS_PER_SECOND,
    LAMBDA_MIN_UNRESERVED,
    WORKER_PLANNED_SECONDS_PER_JOB,
)
from sume.store.job import Job, JobAttr, State
from sume.store.jobs import JobsTable
from sume.store.operator import ReplayOnly
from sume.store.queue import JobQueue
from sume_cli.codes import cause, error_codes
from sume_cli.report import Window, ended

# Replays a second by default: the peak of live jobs the worker's default cap is
# sized for, so a replay asks no more of the worker than a busy hour does. At
# most the rate that, at the seconds a job is planned at, takes the concurrency
# AWS leaves unreserved in every account (100 instances: 20 a second). The
# worker's event source cap bounds its instances whatever the rate; the rate
# bounds how fast replays join the queue ahead of live jobs.
DEFAULT_RATE = float(DEFAULT_PEAK_JOBS_PER_SECOND)
MAX_RATE = LAMBDA_MIN_UNRESERVED / WORKER_PLANNED_SECONDS_PER_JOB
# Only a finished job's work can be made owed again (``request_replay``).
REPLAYABLE = (State.PROCESSED, State.PROCESSING_ERROR)
# What the filters read of each job: never the stored body.
READ = (
    JobAttr.JOB_ID,
    JobAttr.STATE,
    JobAttr.EVENT,
    JobAttr.OUTCOME,
    JobAttr.PROCESSING_ERROR,
    JobAttr.LAST_ERROR,
    JobAttr.REGISTERED_AT,
    JobAttr.FIRST_SEEN,
    JobAttr.REPLAY_RUNS,
)


def run_id(reason: str) -> str:
    """The run's name on the items it replays: the same reason is the same run."""
    return "run-" + hashlib.sha256(reason.encode("utf-8", "surrogatepass")).hexdigest()[:16]


@dataclass(frozen=True)
class Filters(ReplayOnly):
    """Which ended jobs to replay: every filter given must match (any of its values).

    ``why`` reads them on the plan's jobs; the replay's write checks them again
    (``ReplayOnly.condition``), so a job that stopped matching meanwhile is refused.
    """

    def why(self, job: Job) -> list[str] | None:
        """Why ``job`` matches, one ``name=value`` per filter; None when it does not."""
        if job.state not in REPLAYABLE or (self.states and job.state not in self.states):
            return None
        reasons = [f"state={job.state}"]
        if self.outcomes:
            if job.outcome not in self.outcomes:
                return None
            reasons.append(f"outcome={job.outcome}")
        if self.error_codes:
            found = [
                f"error_code={code} ({where})"
                for where, code in error_codes(job)
                if code in self.error_codes
            ]
            if not found:
                return None
            reasons.append(found[0])
        if self.events:
            if job.event not in self.events:
                return None
            reasons.append(f"event={job.event}")
        return reasons

    def as_dict(self) -> dict[str, list[str]]:
        return {
            "state": list(self.states or REPLAYABLE),
            "outcome": list(self.outcomes),
            "error_code": list(self.error_codes),
            "event": list(self.events),
        }


@dataclass(frozen=True)
class Match:
    job_id: str
    state: str
    why: list[str]
    window_at: int


@dataclass(frozen=True)
class Plan:
    """The jobs a run would replay, and what it found besides, as read."""

    run: str
    window: Window
    filters: Filters
    matched: list[Match]
    """Still to replay, oldest in the window first."""
    done: list[Match]
    """Matching jobs this run already replayed: skipped."""
    in_window: int
    """Ended jobs in the window, matching or not."""
    entries_read: int
    items_read: int
    held: dict[tuple[str, str | None], int] = field(default_factory=dict)
    """The window's ended jobs by state and error code (``codes.cause``), matching or not:
    what a filter that matches nothing could have asked for."""


def plan(jobs: JobsTable, window: Window, filters: Filters, run: str, shards: int) -> Plan:
    """Every ended job of ``window`` that ``filters`` match, read once; nothing is written.

    ``shards``: of the due-work index, as the poller reads them (``report.ended``).
    """
    ids, entries = ended(jobs, window, shards)
    found = jobs.get_many(sorted(set(ids)), READ)
    matched: list[Match] = []
    done: list[Match] = []
    held: Counter[tuple[str, str | None]] = Counter()
    in_window = 0
    for job in found:
        at = job.window_at()
        if at is None or not window.holds(at):
            continue
        in_window += 1
        held[(str(job.state), cause(job))] += 1
        # This run's replay, whether or not its job still matches (it ended right since).
        if run in (job.replay_runs or ()):
            done.append(Match(job.job_id, str(job.state), ["replayed by this run"], at))
        elif (why := filters.why(job)) is not None:
            matched.append(Match(job.job_id, str(job.state), why, at))
    return Plan(
        run,
        window,
        filters,
        _ordered(matched),
        _ordered(done),
        in_window,
        entries,
        len(found),
        dict(sorted(held.items(), key=lambda kv: (-kv[1], kv[0][0], kv[0][1] or ""))),
    )


def _ordered(matches: list[Match]) -> list[Match]:
    return sorted(matches, key=lambda match: (match.window_at, match.job_id))


class Pace:
    """A token bucket of one: at most ``rate`` calls of ``wait`` return a second."""

    def __init__(
        self,
        rate: float,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._interval = 1 / rate
        self._clock = clock
        self._sleep = sleep
        self._next: float | None = None

    def wait(self) -> None:
        now = self._clock()
        if self._next is not None and now < self._next:
            self._sleep(self._next - now)
            now = self._next
        self._next = now + self._interval


@dataclass
class Progress:
    """What a run did so far; ``refused`` maps a job to the state its refused write found."""

    total: int
    replayed: list[str] = field(default_factory=list)
    already: list[str] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)
    unsent: dict[str, int] = field(default_factory=dict)
    """Replayed, their message not (yet) sent: owed, the sweeper queues each from its
    due time. Empty once a run ends; a stop between a write and its send leaves one."""

    @property
    def handled(self) -> int:
        return len(self.replayed) + len(self.already) + len(self.refused)


def replay_all(
    jobs: JobsTable,
    queue: JobQueue,
    found: Plan,
    reason: str,
    pace: Pace,
    progress: Progress,
    sweep_after: int,
    on_each: Callable[[Progress], None] = lambda _: None,
    clock: Callable[[], float] = time.time,
) -> Progress:
    """Replay each job of ``found`` once, at ``pace``, counting each into ``progress``.

    As the single replay: the conditional write first (owed ``sweep_after``
    seconds later, the stack's sweep delay), then the queue; should the send
    fail, the job is owed and the sweeper queues it. The write checks the
    filters again: a job that stopped matching since the plan is refused. A
    write refused is read back (strongly consistent) only to say why: this run
    replayed the job already (another copy of the run got there first), or it
    no longer matches (replayed by someone else and ended otherwise, or gone).
    """
    for match in found.matched:
        pace.wait()
        now = int(clock())
        replayed = jobs.request_replay(
            match.job_id, now, now + sweep_after, reason, found.run, found.filters
        )
        if replayed:
            progress.replayed.append(match.job_id)
            progress.unsent[match.job_id] = replayed.due_at or now + sweep_after
            queue.send(match.job_id)
            del progress.unsent[match.job_id]
        else:
            stored = jobs.get(match.job_id)
            if stored is not None and found.run in (stored.replay_runs or ()):
                progress.already.append(match.job_id)
            else:
                progress.refused[match.job_id] = str(stored.state) if stored else "absent"
        on_each(progress)
    return progress
