"""Events too large for a DynamoDB item are kept whole in S3: in this region's
payloads bucket and, with two regions, in the other region's too."""

from __future__ import annotations

import concurrent.futures
import functools
import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from botocore.exceptions import ClientError

from sume.core.errors import AWS_FAILURES
from sume.core.ids import key_segment
from sume.core.names import Metric
from sume.core.observability import count, logger

# DynamoDB caps an item at 400 KB including attribute names and the other
# attributes; the raw body stays inline below this, with ample headroom for
# the artifact records, the error and the registration's metadata. The 1 MB
# that SQS, EventBridge and asynchronous Lambda now take does not move it:
# the job's message is its job_id, and no announcement carries the body.
INLINE_BODY_LIMIT = 256 * 1024
# How long the answer to Sume waits for the other region's copy once this
# region's is written: well inside the receiver's 8 s, and far above a
# cross-region PUT of a few MB (docs/regions.md, "A large event").
PEER_COPY_SECONDS: Final = 3.0
# Copies to the other region in flight at once, per container.
PEER_COPIES: Final = 16
_PEER_FAILURES: Final[tuple[type[Exception], ...]] = (
    *AWS_FAILURES,
    concurrent.futures.TimeoutError,
)


@dataclass(frozen=True)
class PeerBucket:
    """The other region's payloads bucket, reached by a client of that region."""

    client: Callable[[], Any]
    bucket: str


class PayloadStore:
    def __init__(
        self, client: Callable[[], Any], bucket: str, peer: PeerBucket | None = None
    ) -> None:
        # A factory, called on first use: almost no event needs S3, and an S3
        # client is the costliest to build in a receiver's cold start (bench).
        self._client = functools.cache(client)
        self._bucket = bucket
        self._peer = peer
        self._peer_client = functools.cache(peer.client) if peer else None
        self._copier: concurrent.futures.ThreadPoolExecutor | None = None

    def put(self, job_id: str, raw: str) -> str:
        """Store the body and return its ``s3://`` reference (this region's bucket).

        The key is content-addressed, so a retry of the same delivery writes
        the same object and a conflicting twin never overwrites the first; it
        is the same in both regions' buckets, so either region reads the
        reference from its own. With a peer, both copies are written at once:
        this region's must land (its failure raises, so the caller answers
        5xx); the peer's is waited for up to ``PEER_COPY_SECONDS`` and, should
        it fail, the body is kept here only, counted and logged: refusing the
        delivery would not help, since Sume's retry comes back to this region
        (the one serving), and the other region's worker reads it from here.
        """
        data = raw.encode("utf-8")
        key = f"events/{key_segment(job_id)}/{hashlib.sha256(data).hexdigest()}.json"
        copy = self._copy_to_peer(key, data)
        self._write(self._client(), self._bucket, key, data)
        if copy is not None:
            self._settle(copy, job_id)
        return f"s3://{self._bucket}/{key}"

    def get(self, ref: str) -> str:
        """The body of ``ref``: from this region's bucket when it holds the key (the
        receiver wrote both), else from the bucket the reference names."""
        bucket, _, key = ref.removeprefix("s3://").partition("/")
        client = self._client()
        if self._bucket and bucket != self._bucket:
            try:
                return _read(client, self._bucket, key)
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") not in ("NoSuchKey", "404"):
                    raise
        return _read(client, bucket, key)

    def _copy_to_peer(self, key: str, data: bytes) -> concurrent.futures.Future[None] | None:
        if self._peer is None or self._peer_client is None:
            return None
        if self._copier is None:
            # The poller records from parallel polls: one copy must not wait for another.
            self._copier = concurrent.futures.ThreadPoolExecutor(PEER_COPIES, "peer-payloads")
        return self._copier.submit(self._write, self._peer_client(), self._peer.bucket, key, data)

    def _settle(self, copy: concurrent.futures.Future[None], job_id: str) -> None:
        try:
            copy.result(timeout=PEER_COPY_SECONDS)
        except _PEER_FAILURES as exc:
            count(Metric.PAYLOADS_IN_ONE_REGION)
            logger.warning(
                "large event kept in this region only: the other region's payloads bucket "
                "did not take its copy",
                job_id=job_id,
                error=type(exc).__name__,
            )

    @staticmethod
    def _write(client: Any, bucket: str, key: str, data: bytes) -> None:
        client.put_object(Bucket=bucket, Key=key, Body=data, ContentType="application/json")


def _read(client: Any, bucket: str, key: str) -> str:
    body = client.get_object(Bucket=bucket, Key=key)["Body"]
    return str(body.read().decode("utf-8"))


def needs_offload(raw: str) -> bool:
    return len(raw.encode("utf-8")) > INLINE_BODY_LIMIT
