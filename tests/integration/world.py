"""What integration tests do to the stack's resources, written once: deliver a
webhook through the receiver, and read what a subscriber to the announcements got."""

from __future__ import annotations

import json
from typing import Any

import receiver
from devstack.resources import subscribe_queue
from tests.builders import LambdaContext, delivery_event


def deliver(body: dict[str, Any]) -> str:
    """Sume's delivery of ``body``, signed, answered 200; the job id."""
    response = receiver.handler(delivery_event(body), LambdaContext())
    assert response["statusCode"] == 200, response
    return str(body["job_id"])


class Subscriber:
    """A consumer's rule on the bus and its queue: every announcement, in arrival order."""

    def __init__(self, sqs: Any, events: Any, bus: str, name: str = "announcements") -> None:
        self._sqs = sqs
        self.url = subscribe_queue(sqs, events, name, bus)
        self.seen: list[dict[str, Any]] = []

    def announcements(self) -> list[dict[str, Any]]:
        """Every announcement so far (the queue is read to the end, then emptied)."""
        while batch := self._sqs.receive_message(QueueUrl=self.url, MaxNumberOfMessages=10).get(
            "Messages", []
        ):
            for message in batch:
                self.seen.append(json.loads(message["Body"]))
                self._sqs.delete_message(QueueUrl=self.url, ReceiptHandle=message["ReceiptHandle"])
        return self.seen
