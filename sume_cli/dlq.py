"""The two dead-letter queues: what waits there and why, and moving it back.

- The jobs DLQ: a message is a job id the worker could not bring to any end
  within ``MAX_RECEIVES`` receives (AWS failing throughout, or a bug); the
  worker parked the job (``parked_at``) so the sweeper leaves it to the
  redrive. The job item says why: ``last_error`` (the latest failure),
  ``attempts`` (the worker's claims this round; ``parked_attempts``, those
  that parked it, once parked).
- The registrations DLQ: a message is a registration event, unchanged. Why is
  in its message attributes: the poller's ``reason`` and ``message`` when it
  refused the event (``sume.store.queue.DeadLetterQueue.park``), EventBridge's
  ``ERROR_CODE`` and ``ERROR_MESSAGE`` when it could not deliver it to the
  queue, none when SQS moved it after ``MAX_RECEIVES`` failed attempts.

SQS cannot show a message without receiving it, so every peek raises each
message's ``ApproximateReceiveCount`` by one. That is harmless here (neither
DLQ has a redrive policy, so no count moves anything) but misleading as a
measure of failure, which is why a job's row shows the worker's ``attempts``
from its item.

A redrive is done here message by message (receive, send the body alone to
the source queue, delete) rather than by SQS's move task, so it works on the
local stack too, and a re-driven event carries none of its old refusal's
attributes. Every operation stops after ``limit`` messages, so a flooded DLQ
cannot make one command run forever. Whatever is shown is bounded, and URLs
in it are redacted, whatever wrote the item or the attributes.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from infra.spec import MAX_RECEIVES
from sume.core.bounded import bounded_text
from sume.core.ids import is_job_id
from sume.net.urls import redact_url, scrub_urls
from sume.polling.registration import MAX_LOGGED_BYTES, Refused, registration_event
from sume.store.job import Job, State
from sume.store.jobs import JobsTable
from sume.store.queue import MAX_ATTRIBUTE_CHARS, MESSAGE_ATTRIBUTE, REASON_ATTRIBUTE
from sume.working.failures import MAX_CODE_BYTES, MAX_MESSAGE_BYTES, MAX_URL_BYTES
from sume_cli.times import iso

# A peek hides messages only briefly and releases them when done; a redrive
# holds each message until it is sent on and deleted.
PEEK_HOLD_SECONDS = 30
REDRIVE_HOLD_SECONDS = 60

# The worker's bounds on a failure it writes down, applied again when shown.
ERROR_FIELDS = {"code": MAX_CODE_BYTES, "message": MAX_MESSAGE_BYTES, "url": MAX_URL_BYTES}
FINISHED = (State.PROCESSED, State.PROCESSING_ERROR)

# EventBridge's attributes on an event it could not deliver to its target.
EVENTBRIDGE_ERROR_CODE = "ERROR_CODE"
EVENTBRIDGE_ERROR_MESSAGE = "ERROR_MESSAGE"
# Reasons of the registrations DLQ's messages that no code refused.
RETRIES_EXHAUSTED = "retries_exhausted"
UNDELIVERABLE = "undeliverable"

JOB_HEADER = ["JOB_ID", "STATE", "ATTEMPTS", "SENT", "CAUSE"]
REGISTRATION_HEADER = ["SENT", "JOB_ID", "SOURCE", "REASON", "MESSAGE"]


def one_line(text: str) -> str:
    """``text`` on one line: a table row per message, whatever the text holds."""
    return " ".join(text.split())


def shown_error(stored: Mapping[str, Any] | None) -> dict[str, str] | None:
    """A stored ``{code, message, url?}`` as the CLI shows it: bounded, URLs redacted.

    The worker stores it so already; an item written any other way still
    shows nothing raw.
    """
    if stored is None:
        return None
    shown = {}
    for name, limit in ERROR_FIELDS.items():
        value = stored.get(name)
        if value is None:
            continue
        text = value if isinstance(value, str) else json.dumps(value, default=str)
        shown[name] = bounded_text(redact_url(text) if name == "url" else scrub_urls(text), limit)
    return shown


def described(label: str, error: Mapping[str, str]) -> str:
    """``label code: message (url)``, the URL only when the message does not name it."""
    text = f"{label} {error.get('code', '?')}: {error.get('message', '')}".rstrip()
    url = error.get("url")
    if url and url not in text:
        text += f" ({url})"
    return text


def spent_attempts(job: Job) -> int:
    """The worker's claims that brought the job here: a park keeps them aside."""
    if job.parked_at is not None and job.parked_attempts is not None:
        return job.parked_attempts
    return job.attempts or 0


@dataclass(frozen=True)
class DeadLetter:
    """A jobs DLQ message and the item of the job it names."""

    message_id: str
    job_id: str
    receive_count: int
    """SQS's count, this peek's receive included."""
    sent_at: str | None
    job: Job | None

    @property
    def last_error(self) -> dict[str, str] | None:
        return shown_error(self.job.last_error if self.job else None)

    @property
    def processing_error(self) -> dict[str, str] | None:
        return shown_error(self.job.processing_error if self.job else None)

    @property
    def finished(self) -> bool:
        return self.job is not None and self.job.state in FINISHED

    def as_dict(self) -> dict[str, Any]:
        job = self.job
        return {
            "message_id": self.message_id,
            "job_id": self.job_id,
            "receive_count": self.receive_count,
            "sent_at": self.sent_at,
            "found": job is not None,
            "state": job.state if job else None,
            "attempts": spent_attempts(job) if job else None,
            "last_error": self.last_error,
            "last_error_at": iso(job.last_error_at) if job else None,
            "processing_error": self.processing_error,
        }

    def cause(self) -> str:
        causes = []
        if (problem := self.processing_error) is not None:
            causes.append(described("processing error", problem))
        if (error := self.last_error) is not None:
            causes.append(described("last error", error))
        return one_line("; ".join(causes))

    def row(self) -> list[str]:
        job = self.job
        state = (job.state or "?") if job else "(no such job)"
        attempts = str(spent_attempts(job)) if job else "-"
        return [self.job_id, state, attempts, self.sent_at or "-", self.cause()]


@dataclass(frozen=True)
class ParkedRegistration:
    """A registrations DLQ message: why it is there, and what event it holds.

    The job id and source are read from the event when it is one, and cut;
    the metadata is never read out.
    """

    message_id: str
    receive_count: int
    sent_at: str | None
    reason: str
    message: str
    job_id: str | None
    source: str | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "message_id": self.message_id,
            "receive_count": self.receive_count,
            "sent_at": self.sent_at,
            "reason": self.reason,
            "message": self.message,
            "job_id": self.job_id,
            "source": self.source,
        }

    def row(self) -> list[str]:
        return [
            self.sent_at or "-",
            one_line(self.job_id or "-"),
            one_line(self.source or "-"),
            self.reason,
            one_line(self.message),
        ]


def _receive(
    sqs: Any, queue_url: str, limit: int, hold: int, with_attributes: bool = False
) -> Iterator[dict[str, Any]]:
    taken = 0
    extra = {"MessageAttributeNames": ["All"]} if with_attributes else {}
    while taken < limit:
        messages = sqs.receive_message(
            QueueUrl=queue_url,
            MaxNumberOfMessages=min(10, limit - taken),
            VisibilityTimeout=hold,
            WaitTimeSeconds=0,
            MessageSystemAttributeNames=["ApproximateReceiveCount", "SentTimestamp"],
            **extra,
        ).get("Messages", [])
        if not messages:
            return
        taken += len(messages)
        yield from messages


def _counts(message: dict[str, Any]) -> tuple[int, str | None]:
    attributes = message.get("Attributes", {})
    sent = attributes.get("SentTimestamp")
    return int(attributes.get("ApproximateReceiveCount", 0)), iso(
        int(sent) / 1000
    ) if sent else None


def _letter(jobs: JobsTable, message: dict[str, Any]) -> DeadLetter:
    job_id = message["Body"]
    receive_count, sent_at = _counts(message)
    return DeadLetter(
        message_id=message["MessageId"],
        job_id=job_id,
        receive_count=receive_count,
        sent_at=sent_at,
        # A body no job can have (sent before the id rule) is shown, not looked up.
        job=jobs.get(job_id, consistent=False) if is_job_id(job_id) else None,
    )


def _attribute(message: dict[str, Any], name: str) -> str | None:
    value = (message.get("MessageAttributes") or {}).get(name, {}).get("StringValue")
    return value[:MAX_ATTRIBUTE_CHARS] if isinstance(value, str) else None


def _why(message: dict[str, Any]) -> tuple[str, str]:
    """The reason code and message of a registrations DLQ message."""
    if (reason := _attribute(message, REASON_ATTRIBUTE)) is not None:
        return reason, _attribute(message, MESSAGE_ATTRIBUTE) or ""
    if (code := _attribute(message, EVENTBRIDGE_ERROR_CODE)) is not None:
        error = _attribute(message, EVENTBRIDGE_ERROR_MESSAGE)
        said = f"{code}: {error}" if error else code
        return UNDELIVERABLE, f"EventBridge could not deliver it to the queue: {said}"
    return RETRIES_EXHAUSTED, (
        f"retries exhausted: registering failed {MAX_RECEIVES} times (DynamoDB or SQS "
        "unavailable?); the poller's log says why"
    )


def _named(value: Any) -> str | None:
    return bounded_text(value, MAX_LOGGED_BYTES) if isinstance(value, str) else None


def _parked(message: dict[str, Any]) -> ParkedRegistration:
    reason, why = _why(message)
    try:
        detail, source = registration_event(message["Body"])
    except (Refused, RecursionError):
        detail, source = {}, None
    receive_count, sent_at = _counts(message)
    return ParkedRegistration(
        message_id=message["MessageId"],
        receive_count=receive_count,
        sent_at=sent_at,
        reason=bounded_text(reason, MAX_CODE_BYTES),
        message=scrub_urls(why),
        job_id=_named(detail.get("job_id")),
        source=_named(source),
    )


def depth(sqs: Any, queue_url: str) -> int:
    attributes = sqs.get_queue_attributes(
        QueueUrl=queue_url, AttributeNames=["ApproximateNumberOfMessages"]
    )["Attributes"]
    return int(attributes.get("ApproximateNumberOfMessages", 0))


def _released(sqs: Any, dlq_url: str, messages: list[dict[str, Any]]) -> None:
    """Make ``messages`` visible again to everyone at once."""
    for start in range(0, len(messages), 10):
        sqs.change_message_visibility_batch(
            QueueUrl=dlq_url,
            Entries=[
                {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"], "VisibilityTimeout": 0}
                for i, m in enumerate(messages[start : start + 10])
            ],
        )


def _peeked(sqs: Any, dlq_url: str, limit: int, with_attributes: bool) -> list[dict[str, Any]]:
    """Up to ``limit`` messages, visible again to everyone as soon as this returns."""
    messages = list(_receive(sqs, dlq_url, limit, PEEK_HOLD_SECONDS, with_attributes))
    _released(sqs, dlq_url, messages)
    return messages


def _moved(
    sqs: Any, dlq_url: str, queue_url: str, limit: int, with_attributes: bool = False
) -> Iterator[dict[str, Any]]:
    """Move up to ``limit`` messages to ``queue_url``: the body alone, attributes left behind.

    Everything that was in the DLQ when the redrive started moves, every
    message of it: two messages for one job are normal after a resend, and a
    DLQ left with one keeps DlqNotEmpty paging. What the redrive itself brought
    back (the poller refused the event again, the worker failed the job
    again) does not: SQS keeps a standard queue message's enqueue timestamp
    when it moves it to the DLQ (SQS Developer Guide, "dead-letter queue
    retention"), so a message sent after the redrive started is held until the
    end, so no receive returns it twice, then given back to the DLQ untouched.
    A message whose id is one the redrive's sends got is held too: that guard
    holds should the CLI's clock run ahead of SQS's, if SQS keeps the id (not
    documented; moto gives a new one).

    Each is sent before it is deleted: a failure in between leaves a
    duplicate (the worker's claim and the registry's conditional write make
    it harmless), never a lost message.
    """
    started_ms = int(time.time() * 1000)
    sent_ids: set[str] = set()
    held: list[dict[str, Any]] = []
    try:
        for message in _receive(sqs, dlq_url, limit, REDRIVE_HOLD_SECONDS, with_attributes):
            sent = int(message.get("Attributes", {}).get("SentTimestamp", 0))
            if sent > started_ms or message["MessageId"] in sent_ids:
                held.append(message)
                continue
            answer = sqs.send_message(QueueUrl=queue_url, MessageBody=message["Body"])
            sent_ids.add(answer["MessageId"])
            sqs.delete_message(QueueUrl=dlq_url, ReceiptHandle=message["ReceiptHandle"])
            yield message
    finally:
        _released(sqs, dlq_url, held)


def peek(sqs: Any, jobs: JobsTable, dlq_url: str, limit: int) -> list[DeadLetter]:
    """Up to ``limit`` jobs DLQ messages with their jobs' state and errors."""
    return [_letter(jobs, m) for m in _peeked(sqs, dlq_url, limit, with_attributes=False)]


def redrive(
    sqs: Any, jobs: JobsTable, dlq_url: str, queue_url: str, limit: int
) -> list[DeadLetter]:
    """Move up to ``limit`` messages back to the jobs queue."""
    return [_letter(jobs, m) for m in _moved(sqs, dlq_url, queue_url, limit)]


def peek_registrations(sqs: Any, dlq_url: str, limit: int) -> list[ParkedRegistration]:
    """Up to ``limit`` registrations DLQ messages with why each is there."""
    return [_parked(m) for m in _peeked(sqs, dlq_url, limit, with_attributes=True)]


def redrive_registrations(
    sqs: Any, dlq_url: str, queue_url: str, limit: int
) -> list[ParkedRegistration]:
    """Move up to ``limit`` events back to the registrations queue, for the poller."""
    return [_parked(m) for m in _moved(sqs, dlq_url, queue_url, limit, with_attributes=True)]
