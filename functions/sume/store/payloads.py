"""Events too large for a DynamoDB item are kept whole in S3."""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable
from typing import Any

from sume.core.ids import key_segment

# DynamoDB caps an item at 400 KB including attribute names and the other
# attributes; the raw body stays inline below this, with ample headroom.
INLINE_BODY_LIMIT = 256 * 1024


class PayloadStore:
    def __init__(self, client: Callable[[], Any], bucket: str) -> None:
        # A factory, called on first use: almost no event needs S3, and an S3
        # client is the costliest to build in a receiver's cold start (bench).
        self._client = functools.cache(client)
        self._bucket = bucket

    def put(self, job_id: str, raw: str) -> str:
        """Store the body and return its ``s3://`` reference.

        The key is content-addressed, so a retry of the same delivery writes
        the same object and a conflicting twin never overwrites the first.
        """
        data = raw.encode("utf-8")
        digest = hashlib.sha256(data).hexdigest()
        key = f"events/{key_segment(job_id)}/{digest}.json"
        self._client().put_object(
            Bucket=self._bucket, Key=key, Body=data, ContentType="application/json"
        )
        return f"s3://{self._bucket}/{key}"

    def get(self, ref: str) -> str:
        bucket, _, key = ref.removeprefix("s3://").partition("/")
        body = self._client().get_object(Bucket=bucket, Key=key)["Body"]
        return body.read().decode("utf-8")


def needs_offload(raw: str) -> bool:
    return len(raw.encode("utf-8")) > INLINE_BODY_LIMIT
