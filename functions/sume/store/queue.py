"""The jobs queue (a message is only a pointer to the job item), and dead letters."""

from __future__ import annotations

from typing import Any


class JobQueue:
    def __init__(self, client: Any, queue_url: str) -> None:
        self._client = client
        self._url = queue_url

    def send(self, job_id: str) -> None:
        # The body is just the job id: the item is the source of truth, and a
        # small message keeps the hot path cheap.
        self._client.send_message(QueueUrl=self._url, MessageBody=job_id)


# SQS message attribute values are XML character data like bodies; ASCII with
# backslash escapes always is, and an attribute this long is still readable.
MAX_ATTRIBUTE_CHARS = 1024
# The message attributes a parked message carries: a reason code, and why in words.
REASON_ATTRIBUTE = "reason"
MESSAGE_ATTRIBUTE = "message"


def _attribute(text: str) -> dict[str, str]:
    value = text.encode("ascii", "backslashreplace").decode("ascii")[:MAX_ATTRIBUTE_CHARS]
    return {"DataType": "String", "StringValue": value or "-"}


class DeadLetterQueue:
    """Where a message that can never be handled is parked for an operator, with why."""

    def __init__(self, client: Any, queue_url: str) -> None:
        self._client = client
        self._url = queue_url

    def park(self, body: str, reason: str, message: str) -> None:
        self._client.send_message(
            QueueUrl=self._url,
            MessageBody=body,
            MessageAttributes={
                REASON_ATTRIBUTE: _attribute(reason),
                MESSAGE_ATTRIBUTE: _attribute(message),
            },
        )
