"""The dead-letter queue: what failed (with each job's own account), and moving it back.

A DLQ message is a job id whose follow-up work failed ``MAX_RECEIVES`` times;
the job item says why (``processing_error``, ``attempts``). Both operations
are bounded by ``limit`` so a flooded DLQ cannot make one command run forever.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from sume.core.ids import is_job_id
from sume.store.jobs import Job, JobsTable
from sume_cli.times import iso

# A peek hides messages only briefly and releases them when done; a redrive
# holds each message until it is sent on and deleted.
PEEK_HOLD_SECONDS = 30
REDRIVE_HOLD_SECONDS = 60


@dataclass(frozen=True)
class DeadLetter:
    message_id: str
    job_id: str
    receive_count: int
    sent_at: str | None
    job: Job | None

    def as_dict(self) -> dict[str, Any]:
        job = self.job
        return {
            "message_id": self.message_id,
            "job_id": self.job_id,
            "receive_count": self.receive_count,
            "sent_at": self.sent_at,
            "state": job.state if job else None,
            "attempts": job.attempts if job else None,
            "processing_error": job.processing_error if job else None,
            "found": job is not None,
        }


def _receive(sqs: Any, queue_url: str, limit: int, hold: int) -> Iterator[dict[str, Any]]:
    taken = 0
    while taken < limit:
        messages = sqs.receive_message(
            QueueUrl=queue_url,
            MaxNumberOfMessages=min(10, limit - taken),
            VisibilityTimeout=hold,
            WaitTimeSeconds=0,
            MessageSystemAttributeNames=["ApproximateReceiveCount", "SentTimestamp"],
        ).get("Messages", [])
        if not messages:
            return
        taken += len(messages)
        yield from messages


def _letter(jobs: JobsTable, message: dict[str, Any]) -> DeadLetter:
    attributes = message.get("Attributes", {})
    sent = attributes.get("SentTimestamp")
    job_id = message["Body"]
    return DeadLetter(
        message_id=message["MessageId"],
        job_id=job_id,
        receive_count=int(attributes.get("ApproximateReceiveCount", 0)),
        sent_at=iso(int(sent) / 1000) if sent else None,
        # A body no job can have (sent before the id rule) is shown, not looked up.
        job=jobs.get(job_id, consistent=False) if is_job_id(job_id) else None,
    )


def depth(sqs: Any, queue_url: str) -> int:
    attributes = sqs.get_queue_attributes(
        QueueUrl=queue_url, AttributeNames=["ApproximateNumberOfMessages"]
    )["Attributes"]
    return int(attributes.get("ApproximateNumberOfMessages", 0))


def peek(sqs: Any, jobs: JobsTable, dlq_url: str, limit: int) -> list[DeadLetter]:
    """Up to ``limit`` messages with their jobs' state, then make them visible again."""
    messages = list(_receive(sqs, dlq_url, limit, PEEK_HOLD_SECONDS))
    try:
        return [_letter(jobs, m) for m in messages]
    finally:
        for start in range(0, len(messages), 10):
            sqs.change_message_visibility_batch(
                QueueUrl=dlq_url,
                Entries=[
                    {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"], "VisibilityTimeout": 0}
                    for i, m in enumerate(messages[start : start + 10])
                ],
            )


def redrive(
    sqs: Any, jobs: JobsTable, dlq_url: str, queue_url: str, limit: int
) -> list[DeadLetter]:
    """Move up to ``limit`` messages back to the jobs queue.

    Each is sent before it is deleted: a failure in between leaves a
    duplicate, which the worker's claim makes harmless, never a lost job.
    """
    moved = []
    for message in _receive(sqs, dlq_url, limit, REDRIVE_HOLD_SECONDS):
        sqs.send_message(QueueUrl=queue_url, MessageBody=message["Body"])
        sqs.delete_message(QueueUrl=dlq_url, ReceiptHandle=message["ReceiptHandle"])
        moved.append(_letter(jobs, message))
    return moved
