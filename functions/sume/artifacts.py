"""Copying a job's artifacts into the artifacts bucket, streaming.

A body goes from the HTTP socket to S3 in parts: at most one part is held in
memory (``part_size`` plus one read chunk), whatever the file's size. A body
that fits in one part is a single ``PutObject``; a larger one a multipart
upload, aborted if anything fails so no orphan parts are billed. The SHA-256
and size are computed on the way through.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import posixpath
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

from botocore.exceptions import BotoCoreError, ClientError

from sume.bounded import clean_text
from sume.fetch import SafeHttp
from sume.ids import key_segment
from sume.urls import redact_url

DEFAULT_CONTENT_TYPE = "application/octet-stream"
# A media type is printable ASCII; the remote server's header is kept only if it is one.
_CONTENT_TYPE = re.compile(r"[\x21-\x7e][\x20-\x7e]{0,254}")
MAX_PARTS = 10_000  # S3's limit per multipart upload
MAX_NAME_CHARS = 120
_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")


class InvalidArtifacts(Exception):
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


class _Hashed:
    """Passes chunks through while counting and hashing them."""

    def __init__(self, chunks: Iterable[bytes]) -> None:
        self._chunks = chunks
        self.size = 0
        self.digest = hashlib.sha256()

    def __iter__(self) -> Any:
        for chunk in self._chunks:
            self.size += len(chunk)
            self.digest.update(chunk)
            yield chunk


class ArtifactStore:
    def __init__(
        self, s3: Any, bucket: str, http: SafeHttp, max_bytes: int, part_size: int
    ) -> None:
        self._s3 = s3
        self._bucket = bucket
        self._http = http
        self._max_bytes = max_bytes
        # Parts grow when the cap would otherwise need more than S3's 10,000.
        self._part_size = max(part_size, -(-max_bytes // MAX_PARTS))

    @property
    def bucket(self) -> str:
        return self._bucket

    def copy(self, url: str, key: str, *, deadline: float | None = None) -> StoredArtifact:
        """Stream ``url`` into ``key``. Raises ``FetchError`` and botocore errors.

        The fetch ends by ``deadline`` (``time.monotonic()``), the upload of the
        parts read by then included; only the last part's upload follows it.
        """
        with self._http.open(url, max_bytes=self._max_bytes, deadline=deadline) as response:
            media_type = content_type(response.content_type)
            body = _Hashed(response.iter_bytes())
            self._upload(key, body, media_type)
        return StoredArtifact(
            source_url=clean_text(redact_url(url)),
            source_digest=source_digest(url),
            bucket=self._bucket,
            key=key,
            size=body.size,
            sha256=body.digest.hexdigest(),
            content_type=media_type,
        )

    def _upload(self, key: str, chunks: Iterable[bytes], content_type: str) -> None:
        part = io.BytesIO()
        upload_id: str | None = None
        etags: list[dict[str, Any]] = []
        try:
            for chunk in chunks:
                part.write(chunk)
                if part.tell() >= self._part_size:
                    if upload_id is None:
                        upload_id = self._s3.create_multipart_upload(
                            Bucket=self._bucket, Key=key, ContentType=content_type
                        )["UploadId"]
                    etags.append(self._send_part(key, upload_id, len(etags) + 1, part))
                    part = io.BytesIO()
            if upload_id is None:
                part.seek(0)
                self._s3.put_object(
                    Bucket=self._bucket, Key=key, Body=part, ContentType=content_type
                )
                return
            if part.tell():
                etags.append(self._send_part(key, upload_id, len(etags) + 1, part))
            self._s3.complete_multipart_upload(
                Bucket=self._bucket,
                Key=key,
                UploadId=upload_id,
                MultipartUpload={"Parts": etags},
            )
        except BaseException:
            if upload_id is not None:
                self._abort(key, upload_id)
            raise

    def _send_part(self, key: str, upload_id: str, number: int, part: io.BytesIO) -> dict[str, Any]:
        part.seek(0)
        response = self._s3.upload_part(
            Bucket=self._bucket, Key=key, UploadId=upload_id, PartNumber=number, Body=part
        )
        return {"ETag": response["ETag"], "PartNumber": number}

    def _abort(self, key: str, upload_id: str) -> None:
        # The error that got us here matters more than a failed abort; the
        # bucket's lifecycle rule removes parts an abort could not.
        with contextlib.suppress(BotoCoreError, ClientError):
            self._s3.abort_multipart_upload(Bucket=self._bucket, Key=key, UploadId=upload_id)
