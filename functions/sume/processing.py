"""The follow-up work of one job, done once: claim, archive, announce, finish.

Order matters for "exactly one announcement". Only the holder of the job's
claim works on it (the claim is a conditional write, fenced by ``claim_id``),
so duplicate and concurrent deliveries of one job never reach the
announcement. The holder announces, then finishes with a write conditional on
still holding the claim. A crash between the two leaves the job owed and it is
announced again by the retry: at least once across crashes, exactly once
otherwise (subscribers dedupe on ``job_id``). Finishing first and announcing
second would instead lose the announcement on such a crash.
"""

from __future__ import annotations

import enum
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sume.announce import Announcement, Announcer
from sume.artifacts import ArtifactStore, InvalidArtifacts, artifact_urls, object_key
from sume.envelope import JobEvent, MalformedEvent, from_mapping
from sume.fetch import FetchError, PermanentFetchError
from sume.jobs import JobsTable, State
from sume.payloads import PayloadStore

DAY = 24 * 3600
# The announcement is only sent with this much of the lease left, so no other
# worker can have claimed the job before our finish lands.
LEASE_MARGIN_SECONDS = 10
MAX_ERROR_MESSAGE = 500


class Action(enum.StrEnum):
    PROCESSED = "processed"
    PROCESSING_ERROR = "processing_error"
    SKIPPED = "skipped"


@dataclass(frozen=True)
class JobResult:
    job_id: str
    action: Action
    reason: str
    """Skipped: absent | finished | not_received | claim_lost. Otherwise the
    outcome (processed) or the processing error's code."""
    outcome: str | None = None
    artifacts: list[dict[str, Any]] = field(default_factory=list)
    artifacts_copied: int = 0
    bytes_copied: int = 0
    attempts: int = 0


@dataclass
class _Progress:
    artifacts: list[dict[str, Any]] = field(default_factory=list)
    copied: int = 0
    bytes: int = 0


TimeLeft = Callable[[], float]
"""Seconds left in the Lambda invocation."""


class JobBusy(Exception):
    """Another worker holds a live lease on the job: retry later."""


class OutOfTime(Exception):
    """Too little of the invocation is left for the next step: retry later.

    Raised before claiming (the job is untouched) or before an artifact copy
    (the claim is released first, with the copies made so far saved, so the
    retry carries on from there).
    """


class LeaseRunningOut(Exception):
    """Too little of our lease is left to announce safely: retry later."""


class _ClaimLost(Exception):
    """Our claim was taken over (our lease ran out): the new holder finishes."""


class _Problem(Exception):
    """Retrying cannot fix this job's work: it becomes a processing error."""

    def __init__(self, code: str, message: str, url: str | None = None) -> None:
        super().__init__(message)
        self.details = {"code": code, "message": message[:MAX_ERROR_MESSAGE]}
        if url is not None:
            self.details["url"] = url


def failure_details(exc: BaseException) -> dict[str, str]:
    """What a transient failure looked like, for the item's ``last_error``."""
    if isinstance(exc, FetchError):
        return {**exc.as_dict(), "message": exc.message[:MAX_ERROR_MESSAGE]}
    return {"code": type(exc).__name__, "message": str(exc)[:MAX_ERROR_MESSAGE]}


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
        max_attempts: int,
        time_reserve_seconds: float = 0.0,
    ) -> None:
        self._jobs = jobs
        self._payloads = payloads
        self._artifacts = artifacts
        self._announcer = announcer
        self._clock = clock
        self._lease = lease_seconds
        self._retention = retention_days * DAY
        self._max_attempts = max_attempts
        self._reserve = time_reserve_seconds

    def _now(self) -> int:
        return int(self._clock())

    def process(self, job_id: str, time_left: TimeLeft | None = None) -> JobResult:
        """Do the job's follow-up work if it is owed and ours to do.

        ``time_left`` gives the seconds left in the invocation: no step starts
        that could not end ``time_reserve_seconds`` before it, and every
        artifact fetch ends by then. Returns what happened; raises
        ``JobBusy``, ``LeaseRunningOut``, ``OutOfTime``,
        ``TransientFetchError``, ``AnnounceFailed`` or botocore errors when a
        retry later should be made (the claim is released first).
        """
        if not job_id.strip():
            raise ValueError("message body is not a job id")
        # Claiming costs an attempt; with no time to finish it would be wasted.
        self._work_deadline(time_left)
        claimed, stored = self._jobs.claim(job_id, self._now(), self._lease)
        if claimed is None:
            return self._not_claimed(job_id, stored)
        claim_id = str(claimed["claim_id"])
        try:
            return self._work(claimed, claim_id, time_left)
        except _ClaimLost:
            return JobResult(job_id, Action.SKIPPED, "claim_lost")
        except Exception as exc:
            self._release(job_id, claim_id, exc)
            raise

    def _release(self, job_id: str, claim_id: str, exc: Exception) -> None:
        try:
            self._jobs.release(job_id, claim_id, self._now(), failure_details(exc))
        except Exception as release_error:  # the original failure is what must surface
            exc.add_note(f"releasing the claim failed too: {release_error!r}")

    def _not_claimed(self, job_id: str, stored: dict[str, Any] | None) -> JobResult:
        if stored is None:
            return JobResult(job_id, Action.SKIPPED, "absent")
        state = stored.get("state")
        if state in (State.PROCESSED, State.PROCESSING_ERROR):
            return JobResult(job_id, Action.SKIPPED, "finished", outcome=stored.get("outcome"))
        if state in (State.PROCESSING, State.RECEIVED):
            raise JobBusy(f"job {job_id} is leased until {stored.get('lease_until')}")
        return JobResult(job_id, Action.SKIPPED, "not_received")

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

    def _work(self, item: dict[str, Any], claim_id: str, time_left: TimeLeft | None) -> JobResult:
        event: JobEvent | None = None
        progress = _Progress()
        try:
            if int(item.get("attempts", 1)) > self._max_attempts:
                event = self._event_if_readable(item)
                raise _Problem(
                    "too_many_attempts",
                    f"gave up after {self._max_attempts} attempts; last error: "
                    f"{item.get('last_error')}",
                )
            event = self._event(item)
            if event.outcome == "completed":
                self._copy_artifacts(item, claim_id, event, progress, time_left)
        except _Problem as problem:
            return self._close(item, claim_id, event, progress, problem.details)
        return self._close(item, claim_id, event, progress, None)

    def _event_if_readable(self, item: dict[str, Any]) -> JobEvent | None:
        try:
            return self._event(item)
        except Exception:  # giving up anyway: the outcome is only informative here
            return None

    def _event(self, item: dict[str, Any]) -> JobEvent:
        raw = item.get("body")
        if raw is None and item.get("body_ref"):
            raw = self._payloads.get(str(item["body_ref"]))
        if not isinstance(raw, str):
            raise _Problem("unreadable_event", "the job item holds no event")
        try:
            data = json.loads(raw)
            delivery = from_mapping(data, raw) if isinstance(data, dict) else None
        except (ValueError, MalformedEvent) as exc:
            raise _Problem("unreadable_event", f"stored event is unusable: {exc}") from None
        if not isinstance(delivery, JobEvent):
            raise _Problem("unreadable_event", "stored event is not a terminal job event")
        return delivery

    def _reusable(self, item: dict[str, Any]) -> dict[str, dict[str, Any]]:
        """Artifacts already stored for this job, by key.

        After an operator's replay only those stored since the replay count,
        so a replay copies everything again while a retry of the replay
        still skips what it already stored.
        """
        records = [r for r in item.get("artifacts") or [] if isinstance(r, dict)]
        if item.get("replay"):
            since = int(item.get("received_at", 0))
            records = [r for r in records if int(r.get("stored_at", 0)) > since]
        return {str(r.get("key")): r for r in records}

    def _copy_artifacts(
        self,
        item: dict[str, Any],
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
        reusable = self._reusable(item)
        for position, url in enumerate(urls):
            key = object_key(job_id, position, url)
            previous = reusable.get(key)
            if previous is not None and previous.get("source_url") == url:
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
            if not self._jobs.save_progress(job_id, claim_id, progress.artifacts):
                raise _ClaimLost

    def _close(
        self,
        item: dict[str, Any],
        claim_id: str,
        event: JobEvent | None,
        progress: _Progress,
        problem: dict[str, str] | None,
    ) -> JobResult:
        artifacts = progress.artifacts
        job_id = str(item["job_id"])
        now = self._now()
        if now >= int(item["lease_until"]) - LEASE_MARGIN_SECONDS:
            raise LeaseRunningOut(f"lease of job {job_id} ends at {item['lease_until']}")
        outcome = event.outcome if event else None
        error = event.data.get("error") if event and event.outcome != "completed" else None
        result = "processing_error" if problem else str(outcome)
        self._announcer.announce(
            Announcement(
                job_id=job_id,
                result=result,
                outcome=outcome,
                event=event.event if event else item.get("event"),
                status=event.status if event else item.get("status"),
                processed_at=now,
                error=error,
                processing_error=problem,
                artifacts=artifacts,
                replay=bool(item.get("replay")),
            )
        )
        details: dict[str, Any] = {"artifacts": artifacts}
        if outcome is not None:
            details["outcome"] = outcome
        if error is not None:
            details["error"] = error
        if problem is not None:
            details["processing_error"] = problem
        state = State.PROCESSING_ERROR if problem else State.PROCESSED
        if not self._jobs.finish(job_id, claim_id, state, now, now + self._retention, details):
            raise _ClaimLost
        return JobResult(
            job_id,
            Action.PROCESSING_ERROR if problem else Action.PROCESSED,
            problem["code"] if problem else result,
            outcome=outcome,
            artifacts=artifacts,
            artifacts_copied=progress.copied,
            bytes_copied=progress.bytes,
            attempts=int(item.get("attempts", 1)),
        )
