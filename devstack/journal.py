"""The journal: what flowed through the local stack, one line per job event,
and the observers that write it from what the handlers answered, untouched."""

from __future__ import annotations

import json
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TextIO

from botocore.exceptions import ClientError

from infra import spec
from sume.core.names import DETAIL_TYPES, REGISTRATION_REFUSED_DETAIL_TYPE
from sume.store.job import Job, JobAttr, Source, State
from sume.store.jobs import JobsTable
from sume_cli.tailing import line

OUTCOME_OF_DETAIL_TYPE = {v: k for k, v in DETAIL_TYPES.items()}
MAX_SHOWN_MESSAGE = 120
# The items a poller run may have changed: registered for polling, or swept.
POLLED_OR_SWEPT = f"attribute_exists({JobAttr.POLL_ATTEMPTS}) OR attribute_exists({JobAttr.SWEEPS})"


@dataclass(frozen=True)
class Entry:
    at: float
    kind: str
    """received, duplicate, conflict, test, ignored, rejected, error, retry, dlq, sweeper,
    poll, swept, processed, recovered, processing_error, replayed, lost, registered,
    refused, announced"""
    job_id: str | None
    detail: str


class Journal:
    """What flowed through the stack, one entry per job event, in order."""

    def __init__(self, echo: Callable[[Entry], None] | None = None) -> None:
        self._entries: list[Entry] = []
        self._lock = threading.Lock()
        self._echo = echo

    def add(self, kind: str, job_id: str | None, detail: str = "") -> None:
        entry = Entry(time.time(), kind, job_id, detail)
        with self._lock:
            self._entries.append(entry)
        if self._echo:
            self._echo(entry)

    def entries(self, kind: str | None = None) -> list[Entry]:
        with self._lock:
            return [e for e in self._entries if kind is None or e.kind == kind]

    def count(self, kind: str) -> int:
        return len(self.entries(kind))


def _announced_again(detail: Mapping[str, Any]) -> str:
    """How the journal says an announcement is not the job's first (nothing if it is)."""
    sequence = detail.get("sequence")
    if not isinstance(sequence, int) or sequence <= 1:
        return ""
    lost = f", after lost at {detail['lost_at']}" if detail.get("lost_at") else ""
    return f" (announcement #{sequence}{lost})"


def _clock(at: float | None) -> str:
    return "-" if at is None else time.strftime("%H:%M:%S", time.localtime(at))


def printer(stream: TextIO = sys.stdout) -> Callable[[Entry], None]:
    """One line per entry; whole lines, even when threads print at once."""
    lock = threading.Lock()

    def echo(entry: Entry) -> None:
        # Laid out as `sume-webhooks tail` lays out a job event.
        text = line(entry.at, entry.kind, entry.job_id, entry.detail) + "\n"
        with lock:
            stream.write(text)
            stream.flush()

    return echo


def _registered_job_id(body: str) -> str | None:
    """The job id a registration event names, for the journal (None if it names none)."""
    try:
        detail = json.loads(body).get("detail")
        job_id = detail.get("job_id")
    except (ValueError, AttributeError):
        return None
    return job_id if isinstance(job_id, str) and job_id else None


class Observers:
    """Turn each invocation's event and answer into journal lines; count announcements."""

    def __init__(
        self, journal: Journal, jobs: Callable[[], JobsTable], retry_delay_seconds: int
    ) -> None:
        self.journal = journal
        self._jobs = jobs
        self._retry_delay_seconds = retry_delay_seconds
        self.announcements: list[dict[str, Any]] = []
        self._announced = threading.Lock()
        # Per job, as the journal last saw it after a poller run: its polls, its
        # sweeps, whether its recovery by a poll was told.
        self._seen: dict[str, tuple[int, int, bool]] = {}
        self._polls_lock = threading.Lock()

    def seen(self) -> list[dict[str, Any]]:
        """Every announcement seen on the bus, in the order it came."""
        with self._announced:
            return list(self.announcements)

    def announced(self) -> Counter[str]:
        """Announcements seen on the bus, per job id."""
        return Counter(str(a.get("detail", {}).get("job_id")) for a in self.seen())

    def on_delivery(self, event: dict[str, Any], response: dict[str, Any]) -> None:
        status = int(response.get("statusCode", 0))
        try:
            answer = json.loads(response.get("body") or "{}")
        except ValueError:
            answer = {}
        result = answer.get("result")
        job_id = answer.get("job_id")
        if status >= 500:
            self.journal.add("error", job_id, f"{status} {answer.get('error') or answer}")
        elif status >= 400:
            self.journal.add("rejected", job_id, f"{status} {answer.get('error', '')}")
        elif result == "new":
            self.journal.add("received", job_id, "stored, work queued")
        elif result in ("duplicate", "conflict"):
            self.journal.add(result, job_id, "delivery counted, nothing else changed")
        elif result == "test":
            self.journal.add("test", None, "webhook.test acknowledged")
        else:
            self.journal.add(str(result), job_id, "acknowledged")

    def on_batch(
        self, messages: list[dict[str, Any]], failed: set[str], error: BaseException | None
    ) -> None:
        for message in messages:
            receives = int(message.get("Attributes", {}).get("ApproximateReceiveCount", 1))
            last = receives >= spec.MAX_RECEIVES
            if message["MessageId"] not in failed:
                if last and self._still_owed(message["Body"]):
                    why = self._failure_code(message["Body"])
                    detail = f"{why}; receive {receives}: acknowledged, left to the sweeper"
                    self.journal.add("sweeper", message["Body"], detail)
                continue
            why = type(error).__name__ if error else self._failure_code(message["Body"])
            if last:
                self.journal.add("dlq", message["Body"], f"{why}; receive {receives}: to the DLQ")
            else:
                self.journal.add(
                    "retry",
                    message["Body"],
                    f"{why}; retried in {self._retry_delay_seconds}s",
                )

    def _still_owed(self, job_id: str) -> bool:
        job = self._jobs().get(job_id, consistent=False)
        return job is not None and job.state in (State.RECEIVED, State.PROCESSING)

    def _failure_code(self, job_id: str) -> str:
        """Why the worker reported a job failed, as its item tells."""
        job = self._jobs().get(job_id, consistent=False)
        if job is None:
            return "no such job"
        if job.state == State.PROCESSING and (job.lease_until or 0) >= time.time():
            # Not claimed, so nothing was noted: another worker holds the lease.
            return "JobBusy"
        last_error = job.last_error
        return str(last_error.get("code")) if last_error is not None else "reported failed"

    def on_registrations(
        self, messages: list[dict[str, Any]], failed: set[str], error: BaseException | None
    ) -> None:
        for message in messages:
            job_id = _registered_job_id(message["Body"])
            if message["MessageId"] in failed:
                self.journal.add("retry", job_id, "registration failed; SQS retries it")
                continue
            try:
                job = self._jobs().get(job_id, consistent=False) if job_id else None
            except ClientError:  # an id DynamoDB refuses as a key, which expect refused too
                job = None
            state = job.state if job else None
            if state is None:
                self.journal.add("refused", job_id, "registration event: in the registrations DLQ")
            else:
                self.journal.add("registered", job_id, f"by event; the job is {state}")

    def on_poll(self, result: Any) -> None:
        """A poller run's answer: a line per job it polled or swept, as the job's item
        now tells (the answer counts them only), and one for steps that failed."""
        if not isinstance(result, dict):
            return
        if any(result.get(k) for k in ("polled", "swept", "lost")):
            for job in self._polled_or_swept():
                self._journal_run(job)
        failed = {k: result.get(k) for k in ("errors", "configuration_errors") if result.get(k)}
        if failed:
            counts = " ".join(f"{k}={v}" for k, v in failed.items())
            self.journal.add("poll", None, f"{counts}: the functions' error log names the jobs")

    def _polled_or_swept(self) -> list[Job]:
        jobs, start = [], None
        table = self._jobs()
        while True:
            page = table.read_page("scan", {"FilterExpression": POLLED_OR_SWEPT}, start)
            jobs += page.jobs
            if not (start := page.start):
                return jobs

    def _journal_run(self, job: Job) -> None:
        """A line for what a poller run did to the job since the journal last looked:
        a poll (with Sume's answer), a sweep."""
        if job.poll_attempts is None and job.sweeps is None:
            return  # never registered for polling, never swept
        with self._polls_lock:
            polls, sweeps, recovered = self._seen.get(job.job_id, (0, 0, False))
            if (job.sweeps or 0) > sweeps:
                self.journal.add("swept", job.job_id, f"owed work re-enqueued (it was {job.state})")
            if job.source == Source.POLL and not recovered:
                recovered = True
                self.journal.add("poll", job.job_id, f"Sume: {job.event}; stored, work queued")
            elif (job.poll_attempts or 0) > polls:
                answer = job.last_poll_error or "not finished"
                if job.state == State.LOST:
                    then = "no more polls: lost"
                else:
                    then = f"next poll at {_clock(job.due_at)}"
                self.journal.add(
                    "poll", job.job_id, f"Sume: {answer}; {then} (poll {job.poll_attempts})"
                )
            self._seen[job.job_id] = (job.poll_attempts or 0, job.sweeps or 0, recovered)

    def on_announcement(self, event: dict[str, Any]) -> None:
        detail = event.get("detail") or {}
        job_id = detail.get("job_id")
        if event.get("detail-type") == REGISTRATION_REFUSED_DETAIL_TYPE:
            # Not a job's announcement: journaled, not counted among them.
            message = str(detail.get("message", ""))[:MAX_SHOWN_MESSAGE]
            self.journal.add(
                "announced", job_id, f"registration refused, {detail.get('reason')}: {message}"
            )
            return
        job = self._jobs().get(job_id, consistent=False) if isinstance(job_id, str) else None
        if job is not None:
            # The poller run that led here (a recovery, a give-up) may be answered
            # after its announcement came: its poll line goes first.
            self._journal_run(job)
        outcome = OUTCOME_OF_DETAIL_TYPE.get(event.get("detail-type", ""), "?")
        artifacts = detail.get("artifacts") or []
        words = outcome + (f", {len(artifacts)} artifact(s) stored" if artifacts else "")
        # A job announced again is a new announcement, and says which one.
        again = _announced_again(detail)
        problem = detail.get("processing_error")
        if outcome == "lost":
            error = detail.get("last_poll_error")
            last = f", last poll error {error}" if error else ""
            self.journal.add(
                "lost", job_id, f"announced: no answer after {detail.get('polls')} poll(s){last}"
            )
        elif detail.get("replay") is True:
            self.journal.add("replayed", job_id, words + again)
        elif outcome == "processing_error" and isinstance(problem, dict):
            message = str(problem.get("message", ""))[:MAX_SHOWN_MESSAGE]
            self.journal.add("processing_error", job_id, f"{problem.get('code')}: {message}{again}")
        elif job is not None and job.source == Source.POLL:
            self.journal.add("recovered", job_id, f"by status_url poll: {words}{again}")
        else:
            self.journal.add("processed", job_id, words + again)
        # Counted after the journal line, so whoever sees the count sees the line.
        with self._announced:
            self.announcements.append(event)
