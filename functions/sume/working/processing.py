"""The follow-up work of one job, done once: claim, archive, announce, finish.

Order matters for "exactly one announcement". Only the holder of the job's
claim works on it (the claim is a conditional write, fenced by ``claim_id``),
so duplicate and concurrent deliveries of one job never reach the
announcement. The holder announces, then finishes with a write conditional on
still holding the claim. A crash between the two leaves the job owed and it is
announced again by the retry: at least once across crashes, exactly once
otherwise (subscribers dedupe on ``(job_id, sequence)``: every copy carries
the item's ``sequence``). Finishing first and announcing second would instead
lose the announcement on such a crash.

A lost job's announcement is owed the same way: the poller's ``mark_lost``
leaves it due and queues it, and the worker claims it (``claim_lost``, the
state stays ``lost`` so a late webhook still completes the job), announces
``Sume Job Lost`` and takes it out of the due-work index (``finish_lost``).
It has no work that can fail for good, so it has no attempt budget: a failed
announcement is retried by SQS, then by the sweeper.

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

import enum
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sume.contract.envelope import TERMINAL_EVENTS, JobEvent, MalformedEvent, stored_event
from sume.core.bounded import bounded_text, stored_error
from sume.core.errors import AWS_FAILURES, PermanentError, RetryableError
from sume.core.ids import check_job_id
from sume.core.runtime import TimeLeft
from sume.net.fetch import FetchError, PermanentFetchError, TransientFetchError
from sume.net.urls import redact_url, scrub_urls
from sume.store.jobs import InvalidWrite, Job, JobAttr, JobsTable, NotClaimable, State
from sume.store.payloads import PayloadStore
from sume.store.sizing import MAX_ITEM_BYTES, plain_item_size, plain_size
from sume.working.announce import AnnounceFailed, Announcement, Announcer, LostAnnouncement
from sume.working.artifacts import (
    ArtifactStore,
    InvalidArtifacts,
    artifact_urls,
    object_key,
    source_digest,
)

DAY = 24 * 3600
# The announcement is only sent with this much of the lease left, so no other
# worker can have claimed the job before our finish lands.
LEASE_MARGIN_SECONDS = 10
# A processing error or a retry's last error: {code, message, url?}, each field bounded.
MAX_CODE_BYTES = 64
MAX_MESSAGE_BYTES = 1024
MAX_URL_BYTES = 2048
# Kept free on the item for what the finish and a release add besides artifact
# records: Sume's error text (16 KiB), a processing error and a last error.
FINISH_RESERVE_BYTES = 32 * 1024
_CODE = re.compile(r"[A-Za-z0-9_.-]{1,64}")


class Action(enum.StrEnum):
    PROCESSED = "processed"
    LOST_ANNOUNCED = "lost_announced"
    """A job the poller gave up was announced lost."""
    PROCESSING_ERROR = "processing_error"
    SKIPPED = "skipped"
    LEFT_TO_SWEEPER = "left_to_sweeper"
    """The message's last receive, and the job is still owed and in budget: the
    message is acknowledged, and the sweeper queues the job at its due time."""


@dataclass(frozen=True)
class JobResult:
    job_id: str
    action: Action
    reason: str
    """Skipped: absent | finished | not_received | claim_lost. Left to the
    sweeper: why this attempt did not end the job (the failure's code). Otherwise
    the outcome (processed) or the processing error's code."""
    outcome: str | None = None
    artifacts: list[dict[str, Any]] = field(default_factory=list)
    artifacts_copied: int = 0
    bytes_copied: int = 0
    attempts: int = 0
    details_dropped: bool = False
    """DynamoDB refused the full finish: the item holds the state and codes only."""


@dataclass
class _Progress:
    room: int
    """Bytes the item can give to artifact records (see ``room_for_records``)."""
    earlier: list[dict[str, Any]] = field(default_factory=list)
    """The records on the item before this attempt: each stays until this attempt
    stores its key again, so no ending forgets a copy already made."""
    artifacts: list[dict[str, Any]] = field(default_factory=list)
    """This attempt's records, reused or copied, in the event's order."""
    copied: int = 0
    bytes: int = 0

    @classmethod
    def of(cls, job: Job) -> _Progress:
        records = [r for r in job.artifacts or [] if isinstance(r, dict)]
        return cls(room_for_records(job), earlier=records)

    def records(self) -> list[dict[str, Any]]:
        """Every artifact stored: this attempt's, then those of earlier ones not replaced."""
        keys = {r.get("key") for r in self.artifacts}
        return [*self.artifacts, *(r for r in self.earlier if r.get("key") not in keys)]

    def on_item(self) -> list[dict[str, Any]]:
        """The records that fit in the item's room, in order; the rest are only counted."""
        kept: list[dict[str, Any]] = []
        used = plain_size(kept)
        for record in self.records():
            used += 1 + plain_size(record)
            if used > self.room:
                break
            kept.append(record)
        return kept


def room_for_records(job: Job) -> int:
    """What the claimed job's item leaves for artifact records under DynamoDB's 400 KB.

    The inline event and registration metadata can take most of an item, and a
    job may list thousands of artifacts.
    """
    others = {name: value for name, value in job.as_item().items() if name != JobAttr.ARTIFACTS}
    return MAX_ITEM_BYTES - FINISH_RESERVE_BYTES - plain_item_size(others)


@dataclass(frozen=True)
class _Ending:
    """What the announcement and the finish say about the job."""

    outcome: str | None
    event: str | None
    status: str | None
    error: Any = None
    """Sume's ``error`` as received: failed and canceled jobs only."""

    @classmethod
    def of(cls, event: JobEvent | None, job: Job) -> _Ending:
        if event is None:  # the stored event was unreadable
            return cls(None, job.event, job.status)
        error = event.data.get("error") if event.outcome != "completed" else None
        return cls(event.outcome, event.event, event.status, error)


class JobBusy(RetryableError):
    """Another worker holds a live lease on the job: retry later."""


class OutOfTime(RetryableError):
    """Too little of the invocation is left for the next step: retry later.

    Raised before claiming (the job is untouched) or before an artifact copy
    (the claim is released first, with the copies made so far saved, so the
    retry carries on from there).
    """


class LeaseRunningOut(RetryableError):
    """Too little of our lease is left to announce safely: retry later."""


class FinishFailed(RetryableError):
    """The announcement is out, but AWS failed the finish: the retry must announce
    the same outcome again, so this is no failure of the work a give-up could
    follow. After a give-up the attempt is kept, so the retry gives up again."""

    def __init__(self, message: str, gave_up: bool) -> None:
        super().__init__(message)
        self.gave_up = gave_up


class _ClaimLost(PermanentError):
    """Our claim was taken over (our lease ran out): the new holder finishes."""


class Parked(RetryableError):
    """The job could not be brought to any end on its message's last receive.

    It was parked (``JobsTable.park``): the message goes to the DLQ, where an
    operator redrives it once the cause (``__cause__``) is fixed.
    """


# After a claim, the work did not fail: it ran out of time, or only its finish
# was not written. Its attempt is given back.
NOT_FAILURES = (OutOfTime, LeaseRunningOut, FinishFailed)
# The work failed in a way a later attempt may fix: each spends the budget.
# (Every other retryable error, JobBusy, comes before any claim.)
WORK_FAILURES: tuple[type[Exception], ...] = (TransientFetchError, AnnounceFailed, *AWS_FAILURES)


def _details(code: str, message: str, url: str | None = None) -> dict[str, str]:
    """A failure written down: bounded, and no URL with its query string or user info."""
    details = {
        "code": bounded_text(code, MAX_CODE_BYTES),
        "message": bounded_text(scrub_urls(message, [url] if url else []), MAX_MESSAGE_BYTES),
    }
    if url is not None:
        details["url"] = bounded_text(redact_url(url), MAX_URL_BYTES)
    return details


class _Problem(PermanentError):
    """Retrying cannot fix this job's work: it becomes a processing error."""

    def __init__(self, code: str, message: str, url: str | None = None) -> None:
        self.details = _details(code, message, url)
        super().__init__(self.details["message"])


def failure_details(exc: BaseException) -> dict[str, str]:
    """What a transient failure looked like, for the item's ``last_error``."""
    if isinstance(exc, FetchError):
        return _details(exc.code, exc.message, exc.url)
    return _details(type(exc).__name__, str(exc))


def _last_error_code(job: Job) -> str:
    """The code of the job's last error, if it is one of ours (a word, not text)."""
    code = job.last_error.get("code") if job.last_error is not None else None
    return code if isinstance(code, str) and _CODE.fullmatch(code) else "unknown"


@dataclass(frozen=True)
class RetryPolicy:
    """How the attempt budget, the jobs queue and its DLQ fit together (docs/worker.md)."""

    max_attempts: int
    """Failed attempts of one round of work before the worker gives up."""
    max_receives: int
    """Receives of one message before SQS moves it to the DLQ (its ``maxReceiveCount``)."""
    retry_seconds: int
    """When SQS hands a failed message back: the jobs queue's visibility timeout."""
    dlq_retention_seconds: int
    """How long the DLQ keeps a message; a parked job is due again after it."""


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
        except _ClaimLost:
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
        repeats_give_up = isinstance(exc, FinishFailed) and exc.gave_up
        refund = isinstance(exc, NOT_FAILURES) and not repeats_give_up
        self._release(job_id, claim_id, exc, due, refund)
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
            self._give_back(release, failure_details(exc))
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
            parked = self._give_back(park, failure_details(exc))
        except Exception as park_error:
            exc.add_note(f"parking the job failed too: {park_error!r}")
            return
        if not parked:
            exc.add_note("not parked: the job was no longer ours to park")
            return
        raise Parked(f"job {job_id} parked: its message goes to the DLQ") from exc

    @staticmethod
    def _give_back(write: Callable[[dict[str, str]], bool], details: dict[str, str]) -> bool:
        """Release or park; should DynamoDB refuse the details, with their code alone.

        Sending the refused write again would fail again, and an unreleased
        claim makes the retry wait out the whole lease.
        """
        try:
            return write(details)
        except InvalidWrite:
            return write({"code": details["code"]})

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
        """Announce a lost job once its claim is ours (see the module docstring)."""
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
        claim_id = claimed.claim_id
        assert claim_id is not None  # the claim has just written it
        try:
            self._announcer.announce(LostAnnouncement.of(claimed))
        except WORK_FAILURES as exc:
            now = self._now()
            due = now if last else now + self._retries.retry_seconds + self._lease

            def release(details: dict[str, str]) -> bool:
                return self._jobs.release(job_id, claim_id, now, details, due, lost=True)

            try:
                self._give_back(release, failure_details(exc))
            except Exception as release_error:
                exc.add_note(f"releasing the claim failed too: {release_error!r}")
            if last:
                code = failure_details(exc)["code"]
                return JobResult(
                    job_id, Action.LEFT_TO_SWEEPER, code, attempts=claimed.attempts or 1
                )
            raise
        if not self._jobs.finish_lost(job_id, claim_id):
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
        progress = _Progress.of(job)
        if (job.attempts or 1) > self._retries.max_attempts:
            # Earlier claims spent the budget and never ended (a crash, a
            # give-up that failed): end the job without doing the work again.
            return self._give_up(job, claim_id, progress, _last_error_code(job))
        try:
            return self._attempt(job, claim_id, progress, time_left)
        except WORK_FAILURES as exc:
            if not self._spent(job):
                raise
            code = failure_details(exc)["code"]
        return self._give_up(job, claim_id, progress, code)

    def _attempt(
        self, job: Job, claim_id: str, progress: _Progress, time_left: TimeLeft | None
    ) -> JobResult:
        event: JobEvent | None = None
        problem: dict[str, str] | None = None
        try:
            event = self._event(job)
            if event.outcome == "completed":
                self._copy_artifacts(job, claim_id, event, progress, time_left)
        except _Problem as exc:
            problem = exc.details
        except InvalidWrite as exc:
            problem = _details("write_refused", f"DynamoDB refused the job's progress: {exc}")
        return self._close(job, claim_id, _Ending.of(event, job), progress, problem)

    def _give_up(self, job: Job, claim_id: str, progress: _Progress, last_error: str) -> JobResult:
        """End the job from what we wrote ourselves: its event name, codes, counts, records.

        Neither the stored event nor the last error's text is read again: either
        may be what kept failing, and both come from outside. The artifacts
        already stored stay recorded and are announced.
        """
        name = job.event
        outcome = TERMINAL_EVENTS.get(name) if name is not None else None
        problem = _details(
            "too_many_attempts",
            f"gave up after {self._retries.max_attempts} attempts; last error: {last_error}",
        )
        ending = _Ending(outcome, name if outcome else None, job.status)
        return self._close(job, claim_id, ending, progress, problem, gave_up=True)

    def _event(self, job: Job) -> JobEvent:
        raw = job.body
        if raw is None and job.body_ref:
            raw = self._payloads.get(job.body_ref)
        if raw is None:
            raise _Problem("unreadable_event", "the job item holds no event")
        try:
            return stored_event(raw, job.job_id)
        except (ValueError, RecursionError) as exc:
            raise _Problem("unreadable_event", f"stored event is unusable: {exc}") from None
        except MalformedEvent:
            raise _Problem("unreadable_event", "stored event is not a terminal job event") from None

    def _reusable(self, job: Job) -> dict[str, dict[str, Any]]:
        """Artifacts already stored for this job, by key.

        After an operator's replay only those stored since the replay count,
        so a replay copies everything again while a retry of the replay
        still skips what it already stored.
        """
        records = [r for r in job.artifacts or [] if isinstance(r, dict)]
        if job.replay:
            since = job.received_at or 0
            records = [r for r in records if int(r.get("stored_at", 0)) > since]
        return {str(r.get("key")): r for r in records}

    def _copy_artifacts(
        self,
        job: Job,
        claim_id: str,
        event: JobEvent,
        progress: _Progress,
        time_left: TimeLeft | None,
    ) -> None:
        job_id = event.job_id
        try:
            urls = artifact_urls(event.data.get("payload"))
        except InvalidArtifacts as exc:
            raise _Problem("invalid_artifacts", str(exc)) from None
        reusable = self._reusable(job)
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
                raise _Problem(exc.code, exc.message, url) from None
            progress.artifacts.append({**stored.as_record(), "stored_at": self._now()})
            progress.copied += 1
            progress.bytes += stored.size
            # After each artifact, so a retry after a crash skips what is stored.
            if not self._jobs.save_progress(job_id, claim_id, progress.on_item()):
                raise _ClaimLost

    def _close(
        self,
        job: Job,
        claim_id: str,
        ending: _Ending,
        progress: _Progress,
        problem: dict[str, str] | None,
        gave_up: bool = False,
    ) -> JobResult:
        job_id = job.job_id
        now = self._now()
        if now >= (job.lease_until or 0) - LEASE_MARGIN_SECONDS:
            raise LeaseRunningOut(f"lease of job {job_id} ends at {job.lease_until}")
        result = "processing_error" if problem else str(ending.outcome)
        self._announcer.announce(
            Announcement(
                job_id=job_id,
                result=result,
                outcome=ending.outcome,
                event=ending.event,
                status=ending.status,
                processed_at=now,
                error=ending.error,
                processing_error=problem,
                artifacts=progress.records(),
                replay=bool(job.replay),
                sequence=job.sequence or 1,
                metadata=job.metadata,
                lost_at=job.lost_at,
            )
        )
        state = State.PROCESSING_ERROR if problem else State.PROCESSED
        try:
            dropped = self._finish(job, claim_id, state, now, _written(ending, progress, problem))
        except AWS_FAILURES as exc:
            message = f"announced {result}, then the finish failed: {exc}"
            raise FinishFailed(message, gave_up) from exc
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
            codes = _codes(details)
            done = self._jobs.finish(
                job_id, claim_id, state, now, expires_at, codes, window_at=window_at
            )
            dropped = True
        if not done:
            raise _ClaimLost
        return dropped


def _written(
    ending: _Ending, progress: _Progress, problem: dict[str, str] | None
) -> dict[str, Any]:
    """The finish's details on the item, every one bounded."""
    kept, stored = progress.on_item(), progress.records()
    details: dict[str, Any] = {
        JobAttr.ARTIFACTS: kept,
        JobAttr.ARTIFACT_COUNT: len(stored),
    }
    if len(kept) < len(stored):
        details[JobAttr.ARTIFACTS_TRUNCATED] = True
    if ending.outcome is not None:
        details[JobAttr.OUTCOME] = ending.outcome
    if ending.error is not None:
        details[JobAttr.ERROR], cut = stored_error(ending.error)
        if cut:
            details[JobAttr.ERROR_TRUNCATED] = True
    if problem is not None:
        details[JobAttr.PROCESSING_ERROR] = problem
    return details


def _codes(details: dict[str, Any]) -> dict[str, Any]:
    """The least a finish must write so the item agrees with the announcement."""
    codes: dict[str, Any] = {JobAttr.DETAILS_DROPPED: True}
    if JobAttr.OUTCOME in details:
        codes[JobAttr.OUTCOME] = details[JobAttr.OUTCOME]
    if JobAttr.PROCESSING_ERROR in details:
        codes[JobAttr.PROCESSING_ERROR] = {"code": details[JobAttr.PROCESSING_ERROR]["code"]}
    return codes
