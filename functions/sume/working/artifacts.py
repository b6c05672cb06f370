"""Copying a job's artifacts into the artifacts bucket, streaming.

A body goes from HTTP to S3 in parts, download and upload overlapping, with
memory bounded by a number of parts whatever the file's size (see
``sume.working.transfer``). When the origin serves byte ranges the parts are fetched
on several connections at once; should it answer a range otherwise than asked
(the object changed, ranges are off after all, a short part), the copy starts
over as one stream. A body of one part is a single ``PutObject``; a larger one
a multipart upload, aborted if anything fails so no orphan parts are billed.
The SHA-256 and size are computed on the way through, in order.

A copy is only started when it can end in time: its declared size must fit,
at the planned rate, in the time the fetch has (see ``ArtifactStore.copy``).
"""

from __future__ import annotations

import hashlib
import posixpath
import re
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

from sume.core.bounded import clean_text
from sume.core.errors import PermanentError
from sume.core.ids import key_segment
from sume.core.observability import logger
from sume.net.errors import PermanentFetchError, TransientFetchError
from sume.net.fetch import SafeHttp
from sume.net.urls import redact_url
from sume.working.transfer import (
    RangedParts,
    RangesUnusable,
    S3Parts,
    copy_parts,
    range_plan,
    stream_parts,
)

DEFAULT_CONTENT_TYPE = "application/octet-stream"
# A media type is printable ASCII; the remote server's header is kept only if it is one.
_CONTENT_TYPE = re.compile(r"[\x21-\x7e][\x20-\x7e]{0,254}")
MAX_PARTS = 10_000  # S3's limit per multipart upload
MAX_NAME_CHARS = 120
_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")


class InvalidArtifacts(PermanentError):
    """``payload.artifacts`` is not a list of URLs or ``{"url": ...}`` objects."""


def artifact_urls(payload: Any) -> list[str]:
    """The artifact URLs of a completed job, in order.

    Entries are plain URL strings or objects with a ``url`` field; anything
    else is refused as a whole rather than silently skipped.
    """
    if not isinstance(payload, dict):
        return []
    entries = payload.get("artifacts")
    if entries is None:
        return []
    if not isinstance(entries, list):
        raise InvalidArtifacts("payload.artifacts is not a list")
    urls = []
    for position, entry in enumerate(entries):
        url = entry.get("url") if isinstance(entry, dict) else entry
        if not isinstance(url, str) or not url.strip():
            raise InvalidArtifacts(f"payload.artifacts[{position}] has no URL")
        urls.append(url.strip())
    return urls


def object_key(job_id: str, position: int, url: str) -> str:
    """``jobs/<job_id>/<position>-<file name>``: stable, so a retry overwrites, never adds.

    An accepted id takes at most 768 bytes percent-encoded, so the key is at
    most 895 bytes plus the position's digits: within S3's 1,024 for any
    position a list can hold.
    """
    try:
        path = urlsplit(url).path
    except ValueError:
        # A URL urllib cannot split ("http://[x/y"): the copy refuses it, but
        # naming its key must not fail, or the job would be retried instead.
        path = ""
    name = posixpath.basename(unquote(path)) or "artifact"
    name = _UNSAFE_NAME.sub("_", name).strip("._")[:MAX_NAME_CHARS] or "artifact"
    return f"jobs/{key_segment(job_id)}/{position:03d}-{name}"


def source_digest(url: str) -> str:
    """What a record remembers of the URL it was copied from, to be reused on a retry.

    Not the URL itself: a presigned URL's query string is a credential, and a
    record keeps only ``redact_url(url)`` besides this digest.
    """
    return hashlib.sha256(url.encode("utf-8", "surrogatepass")).hexdigest()


def content_type(header: str | None) -> str:
    """The remote server's ``Content-Type``, if it is a plausible one (at most 255 characters)."""
    value = (header or "").strip()
    return value if _CONTENT_TYPE.fullmatch(value) else DEFAULT_CONTENT_TYPE


@dataclass(frozen=True)
class StoredArtifact:
    source_url: str
    """``redact_url`` of the URL: scheme, host, port and path."""
    source_digest: str
    bucket: str
    key: str
    size: int
    sha256: str
    content_type: str

    @property
    def uri(self) -> str:
        return f"s3://{self.bucket}/{self.key}"

    def as_record(self) -> dict[str, Any]:
        return {
            "source_url": self.source_url,
            "source_digest": self.source_digest,
            "bucket": self.bucket,
            "key": self.key,
            "uri": self.uri,
            "size": self.size,
            "sha256": self.sha256,
            "content_type": self.content_type,
        }


class NotEnoughTime(TransientFetchError):
    """The declared size cannot be copied in the time left: retry in a fresh invocation."""


class ArtifactStore:
    def __init__(
        self,
        s3: Any,
        bucket: str,
        http: SafeHttp,
        max_bytes: int,
        part_size: int,
        *,
        connections: int,
        uploads: int,
        planned_bytes_per_second: float,
    ) -> None:
        self._s3 = s3
        self._bucket = bucket
        self._http = http
        self._max_bytes = max_bytes
        # Parts grow when the cap would otherwise need more than S3's 10,000.
        self._part_size = max(part_size, -(-max_bytes // MAX_PARTS))
        self._connections = connections
        self._uploads = uploads
        self._rate = planned_bytes_per_second

    @property
    def bucket(self) -> str:
        return self._bucket

    def copy(self, url: str, key: str, *, deadline: float | None = None) -> StoredArtifact:
        """Copy ``url`` into ``key``. Raises ``FetchError`` and botocore errors.

        The fetch ends by ``deadline`` (``time.monotonic()``, never later than
        the HTTP client's total timeout); only the uploads of the parts read by
        then follow it. A declared size that cannot be copied by then at the
        planned rate is not started: ``NotEnoughTime`` when a fetch of its own
        (a fresh invocation) could do it, ``too_large_for_invocation``
        (permanent) when none can.
        """
        deadline = self._http.deadline(deadline)
        try:
            return self._copy(url, key, deadline, ranged=self._connections > 1)
        except RangesUnusable as exc:
            logger.warning(
                "ranged artifact copy restarted as one stream",
                reason=str(exc),
                url=clean_text(redact_url(url)),
                key=key,
            )
            return self._copy(url, key, deadline, ranged=False)

    def _copy(self, url: str, key: str, deadline: float, ranged: bool) -> StoredArtifact:
        with self._http.open(url, max_bytes=self._max_bytes, deadline=deadline) as response:
            media_type = content_type(response.content_type)
            declared = response.content_length
            self._check_time(declared, deadline, url)
            plan = range_plan(response, self._part_size) if ranged else None
            readers = self._connections if plan else 1
            sink = S3Parts(
                self._s3,
                self._bucket,
                key,
                media_type,
                uploads=self._uploads,
                in_memory=readers + self._uploads,
            )
            if plan is None:
                parts = stream_parts(response.iter_bytes(), self._part_size, declared, sink.room)
            else:
                ranges = RangedParts(
                    self._http,
                    response,
                    plan,
                    part_size=self._part_size,
                    connections=readers,
                    room=sink.room,
                    deadline=deadline,
                )
                parts = iter(ranges)
            copied = copy_parts(parts, sink)
        return StoredArtifact(
            source_url=clean_text(redact_url(url)),
            source_digest=source_digest(url),
            bucket=self._bucket,
            key=key,
            size=copied.size,
            sha256=copied.sha256,
            content_type=media_type,
        )

    def _check_time(self, declared: int | None, deadline: float, url: str) -> None:
        if declared is None:
            return
        longest = self._http.total_timeout
        if declared > self._rate * longest:
            raise PermanentFetchError(
                "too_large_for_invocation",
                f"declared size {declared} cannot be copied within one fetch's "
                f"{longest:.0f} s at the planned {self._rate:.0f} bytes/s",
                url,
            )
        left = deadline - time.monotonic()
        if declared > self._rate * left:
            raise NotEnoughTime(
                "not_enough_time",
                f"declared size {declared} needs more than the {max(left, 0):.0f} s left "
                f"at the planned {self._rate:.0f} bytes/s",
                url,
            )
