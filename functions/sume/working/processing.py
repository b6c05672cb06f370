"""The follow-up work of one job, done once: claim, archive, announce, finish.

Order matters for "exactly one announcement". Only the holder of the job's
claim works on it (the claim is a conditional write, fenced by ``claim_id``),
so duplicate and concurrent deliveries of one job never reach the
announcement. The holder writes the ending down (``settle``: ``Announced``,
conditional on the claim), announces, then finishes with a write conditional
on still holding the claim. A crash or a failed finish after the settle leaves
the job owed, and the retry announces the ending written down again, never one
worked out anew: at least once across crashes, exactly once otherwise, and one
ending per ``sequence`` (subscribers dedupe on ``(job_id, sequence)``: every
copy carries the item's ``sequence``). Finishing first and announcing second
would instead lose the announcement on such a crash.

A lost job's announcement is owed the same way: ``mark_lost`` leaves it due,
and the poller's run announces it under the claim that write took; one the
sweeper (or ``announce-owed``) queues, the worker claims (``claim_lost``; the
state stays ``lost`` so a late webhook still completes the job), announces
(``Sume Job Lost``) and takes out of the due-work index (``finish_lost``). No
attempt budget: a failed announcement is retried by SQS, then by the sweeper.

So the finish must never fail once the announcement is out: everything it
writes is bounded (``sume.core.bounded``, the item's room for artifact records),
and should DynamoDB still refuse it as invalid, the same state and codes are
written without the rest. A retry then finds the job finished rather than
announcing it again.

Retries (docs/worker.md, "Retries, giving up and the DLQ"): a failure of the
work itself spends the attempt budget, and the failing attempt that spends it
gives up (``too_many_attempts``), so a job whose work keeps failing ends before
its message's receives do. On the message's last receive, a job still in
budget, or whose work did not fail (time ran out, another worker holds it), is
left to the sweeper; only a job the worker could not bring to any end is
parked, and its message goes to the DLQ.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from sume.contract.envelope import JobEvent, MalformedEvent, stored_event
from sume.core.errors import AWS_FAILURES
from sume.core.ids import check_job_id
from sume.core.runtime import TimeLeft
from sume.net.errors import PermanentFetchError
from sume.store.errors import InvalidWrite, NotClaimable
from sume.store.job import Job, State
from sume.store.jobs import JobsTable
from sume.store.payloads import PayloadStore
from sume.working.announce import Announcement, Announcer, LostAnnouncement
from sume.working.artifacts import (
    ArtifactStore,
    InvalidArtifacts,
    artifact_urls,
    object_key,
    source_digest,
)
from sume.working.ending import Announced, Ending, codes_only, finish_details
from sume.working.errors import (
    NOT_FAILURES,
    WORK_FAILURES,
    ClaimLost,
    FinishFailed,
    JobBusy,
    LeaseRunningOut,
    OutOfTime,
    Parked,
    Problem,
)
from sume.working.failures import GAVE_UP, failure_details, give_back, last_error_code, noted
from sume.working.policy import RetryPolicy
from sume.working.progress import Progress, reusable_records
from sume.working.results import Action, JobResult

DAY = 24 * 3600
# The announcement is only sent with this much of the lease left, so no other
# worker can have claimed the job before our finish lands.
LEASE_MARGIN_SECONDS = 10


class JobProcessor:
    def __init__(
        self,
        jobs: JobsTable,
        payloads: PayloadStore,
        artifacts: ArtifactStore,
        announcer: Announcer,
        clock: Callable[[], float],
        lease_seconds: int,
        retention_days: int,
        retries: RetryPolicy,
        time_reserve_seconds: float = 0.0,
    ) -> None:
        self._jobs = jobs
        self._payloads = payloads
        self._artifacts = artifacts
        self._announcer = announcer
        self._clock = clock
        self._lease = lease_seconds
        self._retention = retention_days * DAY
        self._retries = retries
        self._reserve = time_reserve_seconds

    def _now(self) -> int:
        return int(self._clock())

    def process(
        self, job_id: str, time_left: TimeLeft | None = None, receives: int = 1
    ) -> JobResult:
        """Do the job's follow-up work if it is owed and ours to do.

        ``time_left`` gives the seconds left in the invocation: no step starts
        that could not end ``time_reserve_seconds`` before it, and every
        artifact fetch ends by then. ``receives`` is the message's receive
        count: on its last, nothing raises that the sweeper can carry on.
        Returns what happened; raises ``sume.core.errors.RETRYABLE`` errors when a retry later
        should be made (the claim is released first), ``Parked`` when the job
        was parked on the last receive, anything else on a bug.
        """
        check_job_id(job_id)
        last = receives >= self._retries.max_receives
        try:
            # Claiming costs an attempt; with no time to finish it would be wasted.
            self._work_deadline(time_left)
            claimed = self._jobs.claim(job_id, self._now(), self._lease)
        except NotClaimable as refused:
            return self._not_claimed(job_id, refused.stored, last)
        except OutOfTime as exc:
            if last:  # the job is untouched, still in the due-work index
                return JobResult(job_id, Action.LEFT_TO_SWEEPER, type(exc).__name__)
            raise
        except Exception as exc:
            if last:
                self._park(job_id, None, exc)
            raise
        claim_id = claimed.claim_id
        assert claim_id is not None  # the claim has just written it
        try:
            return self._work(claimed, claim_id, time_left)
        except ClaimLost:
            return JobResult(job_id, Action.SKIPPED, "claim_lost")
        except Exception as exc:
            return self._failed(claimed, claim_id, exc, last)

    def _spent(self, job: Job) -> bool:
        """This claim spends the job's attempt budget."""
        return (job.attempts or 1) >= self._retries.max_attempts

    def _failed(self, job: Job, claim_id: str, exc: Exception, last: bool) -> JobResult:
        """Release the claim after ``exc``, then raise it, or leave the job to the sweeper.

        A failure past the budget is one the give-up itself met, or a bug: the
        job cannot be brought to an end, and on the last receive it is parked.
        """
        job_id = job.job_id
        retryable = isinstance(exc, NOT_FAILURES) or (
            isinstance(exc, WORK_FAILURES) and not self._spent(job)
        )
        if last and not retryable:
            self._park(job_id, claim_id, exc)
            raise exc
        now = self._now()
        # SQS's retry comes within retry_seconds; the sweeper waits a lease more,
        # so it never queues a copy beside the message still in the queue. On
        # the last receive no retry comes: the sweeper's next run queues it.
        due = now if last else now + self._retries.retry_seconds + self._lease
        self._release(job_id, claim_id, exc, due, isinstance(exc, NOT_FAILURES))
        if not last:
            raise exc
        code = failure_details(exc)["code"]
        return JobResult(job_id, Action.LEFT_TO_SWEEPER, code, attempts=job.attempts or 1)

    def _release(
        self, job_id: str, claim_id: str, exc: Exception, due_at: int, refund: bool
    ) -> None:
        def release(details: dict[str, str]) -> bool:
            return self._jobs.release(job_id, claim_id, self._now(), details, due_at, refund)

        try:
            give_back(release, failure_details(exc))
        except Exception as release_error:  # the original failure is what must surface
            exc.add_note(f"releasing the claim failed too: {release_error!r}")

    def _park(self, job_id: str, claim_id: str | None, exc: Exception) -> None:
        """Park the job (see ``JobsTable.park``) and raise ``Parked``; if that fails, return.

        A park that fails leaves the job due when it was: the sweeper queues it
        then, while this message goes to the DLQ all the same.
        """
        now = self._now()
        until = now + self._retries.dlq_retention_seconds

        def park(details: dict[str, str]) -> bool:
            return self._jobs.park(job_id, claim_id, now, details, until)

        try:
            parked = give_back(park, failure_details(exc))
        except Exception as park_error:
            exc.add_note(f"parking the job failed too: {park_error!r}")
            return
        if not parked:
            exc.add_note("not parked: the job was no longer ours to park")
            return
        raise Parked(f"job {job_id} parked: its message goes to the DLQ") from exc

    def _not_claimed(self, job_id: str, stored: Job | None, last: bool) -> JobResult:
        if stored is not None and stored.state == State.LOST and stored.due_at is not None:
            return self._announce_lost(job_id, last)
        if stored is None:
            return JobResult(job_id, Action.SKIPPED, "absent")
        if stored.state in (State.PROCESSED, State.PROCESSING_ERROR):
            return JobResult(job_id, Action.SKIPPED, "finished", outcome=stored.outcome)
        if stored.state in (State.PROCESSING, State.RECEIVED):
            if last:
                # The job stays due: a sweep waits out its holder's lease, so
                # whatever the holder does, the job is finished, retried or swept.
                return JobResult(job_id, Action.LEFT_TO_SWEEPER, JobBusy.__name__)
            raise JobBusy(f"job {job_id} is leased until {stored.lease_until}")
        return JobResult(job_id, Action.SKIPPED, "not_received")

    def _announce_lost(self, job_id: str, last: bool) -> JobResult:
        """Announce a lost job once its claim is ours (see the module docstring).

        Nothing here can fail for good and the item stays due until
        ``finish_lost``: on the message's last receive any failure leaves the
        job to the sweeper, and only parked jobs' messages reach the DLQ.
        """
        try:
            claimed = self._jobs.claim_lost(job_id, self._now(), self._lease)
        except NotClaimable as refused:
            stored = refused.stored
            if stored is None or stored.state != State.LOST or stored.due_at is None:
                # Announced meanwhile, or a late event took the job over.
                return self._not_claimed(job_id, stored, last)
            if last:
                return JobResult(job_id, Action.LEFT_TO_SWEEPER, JobBusy.__name__)
            raise JobBusy(f"lost job {job_id} is leased until {stored.lease_until}") from None
        except Exception as exc:
            if last:  # nothing was written: the job is due when it was
                return JobResult(job_id, Action.LEFT_TO_SWEEPER, failure_details(exc)["code"])
            raise
        claim_id = claimed.claim_id
        assert claim_id is not None  # the claim has just written it
        try:
            self._announcer.announce(LostAnnouncement.of(claimed))
            finished = self._jobs.finish_lost(job_id, claim_id)
        except Exception as exc:
            now = self._now()
            due = now if last else now + self._retries.retry_seconds + self._lease

            def release(details: dict[str, str]) -> bool:
                return self._jobs.release(job_id, claim_id, now, details, due, lost=True)

            try:
                give_back(release, failure_details(exc))
            except Exception as release_error:  # a sweep waits out the lease, then queues it
                exc.add_note(f"releasing the claim failed too: {release_error!r}")
            if last:
                code = failure_details(exc)["code"]
                return JobResult(
                    job_id, Action.LEFT_TO_SWEEPER, code, attempts=claimed.attempts or 1
                )
            raise
        if not finished:
            return JobResult(job_id, Action.SKIPPED, "claim_lost")
        return JobResult(job_id, Action.LOST_ANNOUNCED, "lost", attempts=claimed.attempts or 1)

    def _work_deadline(self, time_left: TimeLeft | None) -> float | None:
        """When work started now must end (``time.monotonic()``); None: no limit.

        Raises ``OutOfTime`` when less than the reserve is left.
        """
        if time_left is None:
            return None
        usable = time_left() - self._reserve
        if usable <= 0:
            raise OutOfTime(
                f"{usable + self._reserve:.1f} s left in the invocation, "
                f"{self._reserve:.1f} s are kept to finish or release the job"
            )
        return time.monotonic() + usable

    def _work(self, job: Job, claim_id: str, time_left: TimeLeft | None) -> JobResult:
        progress = Progress.of(job)
        announced = Announced.of(job)
        if announced is not None:
            # An earlier claim settled this round's ending and may have sent
            # it: send that again, whatever the budget or the origins say now.
            return self._repeat(job, claim_id, announced, progress)
        if (job.attempts or 1) > self._retries.max_attempts:
            # Earlier claims spent the budget and never ended (a crash, a
            # give-up that failed): end the job without doing the work again.
            return self._give_up(job, claim_id, progress, last_error_code(job))
        try:
            return self._attempt(job, claim_id, progress, time_left)
        except WORK_FAILURES as exc:
            if not self._spent(job):
                raise
            code = failure_details(exc)["code"]
        return self._give_up(job, claim_id, progress, code)

    def _attempt(
        self, job: Job, claim_id: str, progress: Progress, time_left: TimeLeft | None
    ) -> JobResult:
        event: JobEvent | None = None
        problem: dict[str, str] | None = None
        try:
            event = self._event(job)
            if event.outcome == "completed":
                self._copy_artifacts(job, claim_id, event, progress, time_left)
        except Problem as exc:
            problem = exc.details
        except InvalidWrite as exc:
            problem = Progress.refused(exc)
        return self._close(job, claim_id, Ending.of(event, job), progress, problem)

    def _give_up(self, job: Job, claim_id: str, progress: Progress, last_error: str) -> JobResult:
        """End the job from what we wrote ourselves: its event name, codes, counts, records.

        Neither the stored event nor the last error's text is read again: either
        may be what kept failing, and both come from outside. The artifacts
        already stored stay recorded and are announced.
        """
        problem = noted(
            GAVE_UP,
            f"gave up after {self._retries.max_attempts} attempts; last error: {last_error}",
        )
        return self._close(job, claim_id, Ending.given_up(job), progress, problem, gave_up=True)

    def _repeat(
        self, job: Job, claim_id: str, announced: Announced, progress: Progress
    ) -> JobResult:
        """Announce and finish the ending an earlier claim settled on (``Announced``).

        Outcome, event, status and error are read as that claim read them: from
        the item after a give-up, else from the stored event, which never changes.
        The artifacts are the records the settling wrote; nothing is fetched.
        """
        if announced.gave_up:
            ending = Ending.given_up(job)
        else:
            try:
                ending = Ending.of(self._event(job), job)
            except Problem:
                ending = Ending.of(None, job)
        return self._send(job, claim_id, ending, progress, announced)

    def _event(self, job: Job) -> JobEvent:
        raw = job.body
        if raw is None and job.body_ref:
            raw = self._payloads.get(job.body_ref)
        if raw is None:
            raise Problem("unreadable_event", "the job item holds no event")
        try:
            return stored_event(raw, job.job_id)
        except (ValueError, RecursionError) as exc:
            raise Problem("unreadable_event", f"stored event is unusable: {exc}") from None
        except MalformedEvent:
            raise Problem("unreadable_event", "stored event is not a terminal job event") from None

    def _copy_artifacts(
        self,
        job: Job,
        claim_id: str,
        event: JobEvent,
        progress: Progress,
        time_left: TimeLeft | None,
    ) -> None:
        job_id = event.job_id
        try:
            urls = artifact_urls(event.data.get("payload"))
        except InvalidArtifacts as exc:
            raise Problem("invalid_artifacts", str(exc)) from None
        reusable = reusable_records(job)
        for position, url in enumerate(urls):
            key = object_key(job_id, position, url)
            previous = reusable.get(key)
            if previous is not None and previous.get("source_digest") == source_digest(url):
                progress.artifacts.append(previous)
                continue
            # Checked before each copy: the copies so far are saved, so when
            # time runs out, process() releases the claim and the retry
            # carries on from here.
            deadline = self._work_deadline(time_left)
            try:
                stored = self._artifacts.copy(url, key, deadline=deadline)
            except PermanentFetchError as exc:
                raise Problem(exc.code, exc.message, url) from None
            progress.artifacts.append({**stored.as_record(), "stored_at": self._now()})
            progress.copied += 1
            progress.bytes += stored.size
            last = position == len(urls) - 1  # its record rides on the settle that follows
            if not last and not self._jobs.save_progress(job_id, claim_id, progress.on_item()):
                raise ClaimLost

    def _close(
        self,
        job: Job,
        claim_id: str,
        ending: Ending,
        progress: Progress,
        problem: dict[str, str] | None,
        gave_up: bool = False,
    ) -> JobResult:
        """Settle the ending (``Announced``, written down first), announce it, finish."""
        job_id = job.job_id
        now = self._now()
        self._check_lease(job, now)
        announced = Announced(
            sequence=job.sequence or 1,
            result="processing_error" if problem else str(ending.outcome),
            processed_at=now,
            processing_error=problem,
            artifact_count=len(progress.records()),
            gave_up=gave_up,
        )
        try:
            settled = self._jobs.settle(job_id, claim_id, announced.as_item(), progress.on_item())
        except InvalidWrite as exc:
            if problem is None and progress.copied:  # its last records rode on it (_attempt)
                announced = announced.failed(Progress.refused(exc))
            settled = self._jobs.settle(job_id, claim_id, announced.as_item(), None)
        if not settled:
            raise ClaimLost
        return self._send(job, claim_id, ending, progress, announced)

    @staticmethod
    def _check_lease(job: Job, now: int) -> None:
        if now >= (job.lease_until or 0) - LEASE_MARGIN_SECONDS:
            raise LeaseRunningOut(f"lease of job {job.job_id} ends at {job.lease_until}")

    def _send(
        self,
        job: Job,
        claim_id: str,
        ending: Ending,
        progress: Progress,
        announced: Announced,
    ) -> JobResult:
        """Announce the settled ending, then finish the job with it."""
        job_id, problem, result = job.job_id, announced.processing_error, announced.result
        self._check_lease(job, self._now())
        self._announcer.announce(
            Announcement(
                job_id=job_id,
                result=result,
                outcome=ending.outcome,
                event=ending.event,
                status=ending.status,
                processed_at=announced.processed_at,
                error=ending.error,
                processing_error=problem,
                artifacts=progress.records(),
                replay=bool(job.replay),
                sequence=announced.sequence,
                metadata=job.metadata,
                lost_at=job.lost_at,
                artifact_count=announced.artifact_count,
            )
        )
        state = State.PROCESSING_ERROR if problem else State.PROCESSED
        details = finish_details(ending, progress, problem, announced.artifact_count)
        try:
            dropped = self._finish(job, claim_id, state, announced.processed_at, details)
        except AWS_FAILURES as exc:
            raise FinishFailed(f"announced {result}, then the finish failed: {exc}") from exc
        return JobResult(
            job_id,
            Action.PROCESSING_ERROR if problem else Action.PROCESSED,
            problem["code"] if problem else result,
            outcome=ending.outcome,
            artifacts=progress.records(),
            artifacts_copied=progress.copied,
            bytes_copied=progress.bytes,
            attempts=job.attempts or 1,
            details_dropped=dropped,
            replay=bool(job.replay),
            sequence=announced.sequence,
        )

    def _finish(
        self, job: Job, claim_id: str, state: State, now: int, details: dict[str, Any]
    ) -> bool:
        """Finish the job; True when DynamoDB refused ``details`` and only codes were written."""
        expires_at = now + self._retention
        job_id, window_at = job.job_id, job.unreported_at()
        try:
            done = self._jobs.finish(
                job_id, claim_id, state, now, expires_at, details, window_at=window_at
            )
            dropped = False
        except InvalidWrite:
            codes = codes_only(details)
            done = self._jobs.finish(
                job_id, claim_id, state, now, expires_at, codes, window_at=window_at
            )
            dropped = True
        if not done:
            raise ClaimLost
        return dropped
