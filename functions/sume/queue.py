"""The jobs queue: a message is only a pointer to the job item."""

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
