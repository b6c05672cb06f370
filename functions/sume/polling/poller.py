"""One run of the poller: everything due in some shards of the ``due-work`` index, until
time runs out (``sume.polling.fanout`` hands each run its shards and its round).

Two kinds of items are due (see docs/design.md):

- ``awaiting``: a registered job whose terminal event has not arrived. Its
  ``status_url`` is asked; a terminal answer goes through ``JobIntake.accept``
  (source ``poll``), the same conditional write and enqueue as a webhook, so a
  late webhook and a poll racing for the job are decided by DynamoDB. Otherwise
  (an answer about another job included: never recorded, noted and counted)
  the next poll is scheduled with backoff; past the maximum age the job is
  marked ``lost`` and this run announces it (``Sume Job Lost``), see ``_give_up``.
- ``received`` / ``processing`` / ``lost``: follow-up work (or a lost job's
  announcement) owed past its deadline (a crash between the write and the
  send, or a worker whose lease expired). The job id
  is sent to the queue again (the worker's claim makes a duplicate harmless)
  and the sweep deadline is pushed back with backoff; a job whose worker's
  lease still runs is only made due at the lease's end.

Every transition is conditional (see ``sume.store.jobs``), so a stale index entry or
a concurrent webhook or worker can only make a step a no-op, never undo one.
"""

from __future__ import annotations

import enum
import functools
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass
from typing import Any

from sume.core.errors import ConfigurationError
from sume.core.names import Happened
from sume.core.observability import logger
from sume.core.runtime import TimeLeft
from sume.net.policy import REFUSED_HOST
from sume.polling.held import never_paused
from sume.polling.settings import POLL_FINISH_SECONDS, PollPolicy
from sume.polling.status import NOT_TERMINAL, StatusResult, Verdict
from sume.store.announcing import Announcer, LostAnnouncement
from sume.store.intake import JobIntake, Outcome
from sume.store.job import Job, Source, State
from sume.store.jobs import JobsTable
from sume.store.queue import JobQueue


class Tally(enum.StrEnum):
    POLLED = "polled"
    RECOVERED = "recovered"
    ALREADY_RECORDED = "already_recorded"
    RESCHEDULED = "rescheduled"
    LOST = "lost"
    LOST_ANNOUNCED = "lost_announced"
    SWEPT = "swept"
    REMAINING = "remaining"
    ERRORS = "errors"
    REFUSED = "refused"
    OTHER_JOB = "other_job_answers"
    CONFIGURATION_ERRORS = "configuration_errors"
    SKIPPED_STATE = "skipped_state"
    LEASED = "leased"
    HELD = "held"


@dataclass(frozen=True)
class RunSummary:
    polled: int
    recovered: int
    rescheduled: int
    lost: int
    lost_announced: int
    """Jobs given up in this run and announced by it (the rest the sweeper queues)."""
    swept: int
    remaining: int
    """Due items read but left for the next run because time ran out."""
    errors: int
    refused: int
    """Polls of a status_url whose host is not on STATUS_ALLOWED_HOSTS."""
    other_job_answers: int
    """Polls answered about another job than the polled one (never recorded); alarmed."""
    configuration_errors: int
    """Steps that met a configuration fault (e.g. an empty token secret); alarmed."""
    complete: bool
    """Every shard was read to the end within this run's time."""
    shards: tuple[int, ...] = ()
    """The shards this run worked."""
    taken: tuple[int, ...] = ()
    """Shards of its assignment another run held (``sume.polling.fanout``): not worked."""
    held: int = 0
    """Owed work not swept: the worker is paused (``sume.polling.held``)."""

    def as_dict(self) -> dict[str, Any]:
        """As JSON has it (the handler's answer, the log line): the shards as lists."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}


StatusCheck = Callable[[str, str, float], StatusResult]
"""(job_id, status_url, deadline) -> what the status endpoint says by the
deadline (a ``time.monotonic()`` value)."""


class Poller:
    def __init__(
        self,
        jobs: JobsTable,
        intake: JobIntake,
        queue: JobQueue,
        announcer: Announcer,
        check_status: StatusCheck,
        policy: PollPolicy,
        max_parallel_polls: int,
        worker_paused: Callable[[], bool] = never_paused,
    ) -> None:
        """``worker_paused``: asked once a run, before its first sweep."""
        self._worker_paused = worker_paused
        self._held: bool | None = None
        """This run's answer of ``worker_paused``, once asked."""
        self._jobs = jobs
        self._intake = intake
        self._queue = queue
        self._announcer = announcer
        self._check = check_status
        self._policy = policy
        self._parallel = max_parallel_polls

    def run(self, remaining: TimeLeft, now: int, shards: Sequence[int]) -> RunSummary:
        """Handle the items of ``shards`` due at ``now`` until they run out or
        ``remaining`` (the invocation's time) is down to the policy's margin."""
        margin = self._policy.time_margin_seconds

        def time_left() -> float:
            return remaining() - margin

        tally: Counter[str] = Counter()
        self._held = None  # asked again, at this run's first sweep
        complete = True
        # Starting shard rotates between rounds, so when the backlog outlasts
        # a run's time no shard is always served last.
        first = now % max(1, len(shards))
        # No ``with`` block: leaving it would join every poll thread, and a
        # run never waits on a poll past its own deadline (see _settle).
        pool = ThreadPoolExecutor(self._parallel, thread_name_prefix="poll")
        polls: set[Future[Iterable[Tally]]] = set()
        try:
            for offset in range(len(shards)):
                shard = shards[(first + offset) % len(shards)]
                if not self._drain(shard, now, time_left, pool, polls, tally):
                    complete = False
                    break
            self._settle(polls, 0, time_left, tally)
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
        # Polls left for want of time may only be counted at the end.
        complete = complete and not tally[Tally.REMAINING]
        return RunSummary(
            polled=tally[Tally.POLLED],
            recovered=tally[Tally.RECOVERED],
            rescheduled=tally[Tally.RESCHEDULED],
            lost=tally[Tally.LOST],
            lost_announced=tally[Tally.LOST_ANNOUNCED],
            swept=tally[Tally.SWEPT],
            remaining=tally[Tally.REMAINING],
            errors=tally[Tally.ERRORS],
            refused=tally[Tally.REFUSED],
            other_job_answers=tally[Tally.OTHER_JOB],
            configuration_errors=tally[Tally.CONFIGURATION_ERRORS],
            complete=complete,
            shards=tuple(shards),
            held=tally[Tally.HELD],
        )

    def _drain(
        self,
        shard: int,
        now: int,
        time_left: TimeLeft,
        pool: ThreadPoolExecutor,
        polls: set[Future[Iterable[Tally]]],
        tally: Counter[str],
    ) -> bool:
        """Handle one shard's due items page by page; False when time ran out."""
        start: dict[str, Any] | None = None
        while True:
            if time_left() <= 0:
                return False
            # Paging on from the last key (not re-querying from the top) means
            # an item whose step failed is not retried within this run.
            jobs, start = self._jobs.due(shard, now, self._policy.page_size, start)
            before = tally[Tally.REMAINING]
            self._handle_page(jobs, now, time_left, pool, polls, tally)
            # The next page is read while the pool still has a poll per
            # thread to run: no thread idles at a page's end.
            self._settle(polls, self._parallel, time_left, tally)
            if tally[Tally.REMAINING] > before:
                return False
            if start is None:
                return True

    def _handle_page(
        self,
        jobs: list[Job],
        now: int,
        time_left: TimeLeft,
        pool: ThreadPoolExecutor,
        polls: set[Future[Iterable[Tally]]],
        tally: Counter[str],
    ) -> None:
        reserve = self._policy.poll_reserve_seconds
        polls.update(
            pool.submit(
                self._guarded,
                functools.partial(self._poll, job, now, time_left),
                job,
                time_left,
                reserve,
            )
            for job in jobs
            if job.state == State.AWAITING
        )
        # Sweeps are quick DynamoDB and SQS calls; they run here while the
        # polls wait on HTTP in the pool.
        for job in jobs:
            if job.state in (State.RECEIVED, State.PROCESSING, State.LOST):
                sweep = functools.partial(self._sweep, job, now)
                tally.update(self._guarded(sweep, job, time_left, 0.0))
            elif job.state != State.AWAITING:
                # A stale index entry for a job that has moved on.
                tally[Tally.SKIPPED_STATE] += 1

    def _settle(
        self,
        polls: set[Future[Iterable[Tally]]],
        keep: int,
        time_left: TimeLeft,
        tally: Counter[str],
    ) -> None:
        """Count polls as they end until at most ``keep`` are left, or the run's time is up.

        A poll starts only with its whole reserve left and its fetch ends by
        its deadline, so all are normally done in time; with ``keep`` 0, one
        that is not (a stuck write) is left behind rather than waited on.
        """
        while len(polls) > keep:
            done, _ = wait(polls, timeout=max(0.0, time_left()), return_when=FIRST_COMPLETED)
            if not done:
                break
            for future in done:
                polls.discard(future)
                tally.update(future.result())
        if keep:
            return
        for future in polls:
            future.cancel()
            tally[Tally.REMAINING] += 1
        if polls:
            logger.warning("status polls still running at the run's deadline", polls=len(polls))
        polls.clear()

    def _guarded(
        self,
        step: Callable[[], Iterable[Tally]],
        job: Job,
        time_left: TimeLeft,
        reserve: float,
    ) -> Iterable[Tally]:
        if time_left() <= reserve:
            return (Tally.REMAINING,)
        try:
            return step()
        except ConfigurationError:
            # Deployed wrong (an empty token secret, say): ops must fix it, and
            # meanwhile the rest of the run, sweeps of owed work included, goes
            # on. The item keeps its due time.
            logger.exception("poller step hit a configuration error", job_id=job.job_id)
            return (Tally.CONFIGURATION_ERRORS,)
        except Exception:
            # One job's failure must not stop the run; the item keeps its due
            # time, so the next run tries again.
            logger.exception("poller step failed", job_id=job.job_id)
            return (Tally.ERRORS,)

    def _poll(self, job: Job, now: int, time_left: TimeLeft) -> Iterable[Tally]:
        job_id = job.job_id
        policy = self._policy
        registered_at = now if job.registered_at is None else job.registered_at
        cut_off = registered_at + policy.max_age_seconds
        # A host that never answers gets its fetch cut here and counts as
        # unreachable, so it reaches the cut-off (and "lost") like any other.
        budget = min(policy.poll_timeout_seconds, time_left() - POLL_FINISH_SECONDS)
        result = self._check(job_id, job.status_url or "", time.monotonic() + budget)
        if result.verdict is Verdict.TERMINAL and result.event is not None:
            intake = self._intake.accept(result.event, Source.POLL, now)
            new = intake.outcome is Outcome.NEW
            logger.info(
                "status poll found the job finished",
                # Only a new record is a job event; the rest was there already.
                job_event=Happened.RECOVERED if new else None,
                job_id=job_id,
                sume_event=result.event.event,
                recovered=new,
                stored_state=intake.state,
                mapping=result.reason,
            )
            return (Tally.POLLED, Tally.RECOVERED if new else Tally.ALREADY_RECORDED)

        error = None
        tallies: tuple[Tally, ...] = (Tally.POLLED,)
        if result.verdict is Verdict.PENDING:
            logger.info("status poll: not finished yet", job_id=job_id, reason=result.reason)
            # A 404 or an unreadable body is "not yet" too, but no answer from Sume:
            # the item (and a lost job's announcement) says so.
            error = None if result.reason == NOT_TERMINAL else result.reason
        elif result.verdict is Verdict.OTHER_JOB:
            # The job's status_url is another job's (registered so, by mistake
            # or not): whoever registered it should look.
            logger.error(
                "status poll answered about another job: not recorded",
                job_id=job_id,
                reason=result.reason,
            )
            error = result.reason
            tallies = (Tally.POLLED, Tally.OTHER_JOB)
        else:
            # A refused URL or a 4xx will not fix itself: ops should look.
            log = logger.error if result.permanent else logger.warning
            log("status poll failed", job_id=job_id, reason=result.reason)
            error = result.reason
            if error == REFUSED_HOST:
                tallies = (Tally.POLLED, Tally.REFUSED)
        if now >= cut_off:
            return (*tallies, *self._give_up(job, now, error, time_left))
        # The last poll lands on the cut-off itself, so "lost" is only ever
        # declared right after Sume was asked one final time.
        attempt = (job.poll_attempts or 0) + 1
        next_poll = min(now + policy.poll_delay(attempt), cut_off)
        if self._jobs.reschedule_poll(job_id, now, next_poll, error):
            return (*tallies, Tally.RESCHEDULED)
        return tallies

    def _give_up(
        self, job: Job, now: int, error: str | None, time_left: TimeLeft
    ) -> tuple[Tally, ...]:
        """Mark the job lost and announce it, as the worker would a queued one.

        The write that gives it up makes the announcement owed and takes its
        claim, under a lease until the first sweep (``mark_lost``): should the
        put or the finish fail, or the run's time be up, nothing is lost, the
        sweeper queues the job at the lease's end and the worker announces it
        (``claim_lost``), with the same sequence. What follows the fetch,
        these three calls included, fits in ``POLL_FINISH_SECONDS``.
        """
        job_id = job.job_id
        sweep_at = now + self._policy.sweep_after_seconds
        lost = self._jobs.mark_lost(
            job_id, now, sweep_at, error, window_at=job.unreported_at(), claim=True
        )
        if lost is None:
            return ()
        logger.error(
            "job lost: no terminal event before the cut-off",
            job_event=Happened.LOST,
            job_id=job_id,
            registered_at=lost.registered_at,
            polls=lost.poll_attempts,
            last_poll_error=error,
        )
        claim_id = lost.claim_id
        assert claim_id is not None  # the write has just taken it
        if time_left() <= 0:
            logger.warning("no time left to announce the lost job: swept later", job_id=job_id)
            return (Tally.LOST,)
        try:
            self._announcer.announce(LostAnnouncement.of(lost))
            finished = self._jobs.finish_lost(job_id, claim_id)
        except Exception:
            logger.exception("announcing the lost job failed: swept later", job_id=job_id)
            return (Tally.LOST, Tally.ERRORS)
        if not finished:
            # A late event made it received meanwhile: its own announcement follows.
            logger.info("lost job announced, then its event came", job_id=job_id)
        return (Tally.LOST, Tally.LOST_ANNOUNCED)

    def _sweep(self, job: Job, now: int) -> Iterable[Tally]:
        job_id = job.job_id
        assert job.due_at is not None  # read from the due-work index, keyed on it
        if job.state in (State.PROCESSING, State.LOST) and (job.lease_until or 0) > now:
            # A worker holds it (a claim leaves the due time as it was): it is
            # due again when that lease ends, which is after this round.
            self._jobs.await_lease(job_id, job.due_at, job.lease_until or 0)
            return (Tally.LEASED,)
        if self._held is None:
            self._held = self._worker_paused()
        if self._held:
            # Its message waits in the queue: another each round would be one
            # more a job by the time the worker resumes. Still due: swept after.
            return (Tally.HELD,)
        # Send first: a crash before the deferral only means another send
        # next run, while the reverse order could hide the job for a while.
        self._queue.send(job_id)
        next_due = now + self._policy.sweep_delay((job.sweeps or 0) + 1)
        self._jobs.defer_sweep(job_id, job.due_at, next_due)
        logger.warning(
            "owed work re-enqueued",
            job_id=job_id,
            stored_state=job.state,
            overdue_seconds=now - job.due_at,
        )
        return (Tally.SWEPT,)
