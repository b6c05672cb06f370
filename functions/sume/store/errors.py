"""What the jobs table fails with, by kind: a batch read left incomplete
(retryable), a write refused as invalid or a claim refused (permanent).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from botocore.exceptions import ClientError

from sume.core.errors import PermanentError, RetryableError
from sume.store.job import Job


class IncompleteRead(RetryableError):
    """DynamoDB left keys of a batch read unprocessed after every attempt (throttling)."""


class InvalidWrite(PermanentError):
    """DynamoDB refused a write as invalid (``ValidationException``): sent again, it fails again."""


@contextlib.contextmanager
def refused_as_invalid() -> Iterator[None]:
    try:
        yield
    except ClientError as exc:
        error = exc.response.get("Error", {})
        if error.get("Code") != "ValidationException":
            raise
        raise InvalidWrite(str(error.get("Message", ""))) from exc


class NotClaimable(PermanentError):
    """The job's work is not ours to take now: finished, leased, awaiting, or absent.

    ``stored`` is the job as the refused claim found it; None when there is no such job.
    """

    def __init__(self, job_id: str, stored: Job | None) -> None:
        super().__init__(f"job {job_id} is not claimable: {stored.state if stored else 'absent'}")
        self.job_id = job_id
        self.stored = stored
