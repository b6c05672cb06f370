"""``sume_cli.dlq``'s redrive over a fake SQS: what was in the DLQ when it started moves,
every message of it, and what the redrive itself brought back does not."""

from __future__ import annotations

from typing import Any

from sume_cli import dlq


class FakeSqs:
    """Two queues as SQS keeps them, enough for a redrive: ``back`` plays the worker
    failing a redriven job again, SQS moving its message to the DLQ under its id."""

    def __init__(self, dlq_messages: list[tuple[str, str, int]], back: bool) -> None:
        self.queues: dict[str, list[dict[str, Any]]] = {"dlq": [], "jobs": []}
        for message_id, body, sent_ms in dlq_messages:
            self._put("dlq", message_id, body, sent_ms)
        self.back = back
        self.sent = 0
        self.hidden: set[str] = set()

    def _put(self, queue: str, message_id: str, body: str, sent_ms: int) -> None:
        self.queues[queue].append(
            {
                "MessageId": message_id,
                "Body": body,
                "ReceiptHandle": f"rh-{message_id}-{len(self.queues[queue])}",
                "Attributes": {"SentTimestamp": str(sent_ms), "ApproximateReceiveCount": "1"},
            }
        )

    def receive_message(self, QueueUrl: str, MaxNumberOfMessages: int, **_: Any) -> Any:
        visible = [m for m in self.queues[QueueUrl] if m["ReceiptHandle"] not in self.hidden]
        taken = visible[:MaxNumberOfMessages]
        self.hidden.update(m["ReceiptHandle"] for m in taken)
        return {"Messages": [dict(m) for m in taken]}

    def send_message(self, QueueUrl: str, MessageBody: str) -> Any:
        self.sent += 1
        message_id = f"sent-{self.sent}"
        self._put(QueueUrl, message_id, MessageBody, 2)
        if self.back and QueueUrl == "jobs":
            # Failed again: SQS moves it to the DLQ, here with its id kept; its SentTimestamp by
            # SQS's clock, which here is behind the redrive's.
            self.queues["jobs"].pop()
            self._put("dlq", message_id, MessageBody, 1)
        return {"MessageId": message_id}

    def delete_message(self, QueueUrl: str, ReceiptHandle: str) -> None:
        self.hidden.discard(ReceiptHandle)
        self.queues[QueueUrl] = [
            m for m in self.queues[QueueUrl] if m["ReceiptHandle"] != ReceiptHandle
        ]

    def change_message_visibility_batch(self, QueueUrl: str, Entries: list[Any]) -> None:
        self.hidden -= {entry["ReceiptHandle"] for entry in Entries}


def test_every_message_there_at_the_start_moves_two_of_one_body_included() -> None:
    sqs = FakeSqs([("a", "job_x", 1), ("b", "job_x", 1), ("c", "job_y", 1)], back=False)
    moved = list(dlq._moved(sqs, "dlq", "jobs", 100))
    assert [m["MessageId"] for m in moved] == ["a", "b", "c"]
    assert sqs.queues["dlq"] == []
    assert sorted(m["Body"] for m in sqs.queues["jobs"]) == ["job_x", "job_x", "job_y"]


def test_what_the_redrive_brought_back_is_given_back_once_not_moved_again() -> None:
    sqs = FakeSqs([("a", "job_x", 1), ("b", "job_x", 1)], back=True)
    moved = list(dlq._moved(sqs, "dlq", "jobs", 100))
    assert [m["MessageId"] for m in moved] == ["a", "b"]
    # Back under the ids the redrive's sends had: held, then visible again, once each.
    assert sorted(m["MessageId"] for m in sqs.queues["dlq"]) == ["sent-1", "sent-2"]
    assert sqs.hidden == set()
    assert sqs.sent == 2
