"""S3 behind botocore's ``before-send`` hook that hashes what it receives and keeps nothing.

For measuring the worker's own memory: moto keeps every object in this
process's memory (and, on completing a multipart upload, two more copies of it).
"""

import hashlib
import io
import uuid
import xml.sax.saxutils
from urllib.parse import parse_qs, urlsplit

from botocore.awsrequest import AWSResponse

READ_BYTES = 256 * 1024
"""How much of a request body the sink reads at once, as a socket's reader would."""


class _Raw:
    def __init__(self, body: bytes):
        self._body = body

    def stream(self, **_):
        yield self._body


def part_digests(chunks, part_size: int) -> dict[int, tuple[int, str]]:
    """What ``S3Sink.parts`` should hold for a body sent in parts of ``part_size`` bytes."""
    parts: dict[int, tuple[int, str]] = {}
    digest, size = hashlib.sha256(), 0
    for chunk in chunks:
        view = memoryview(chunk)
        while view:
            taken = view[: part_size - size]
            digest.update(taken)
            size += len(taken)
            view = view[len(taken) :]
            if size == part_size:
                parts[len(parts) + 1] = (size, digest.hexdigest())
                digest, size = hashlib.sha256(), 0
    if size:
        parts[len(parts) + 1] = (size, digest.hexdigest())
    return parts


class S3Sink:
    """S3 behind botocore's ``before-send`` hook: hashes what it receives, keeps nothing.

    moto keeps every object (and, on completing a multipart upload, two more
    copies of it) in this process's memory, which would swamp a measurement of
    the worker's own memory. The sink answers the same API calls after reading
    each request body the way the network would, in chunks, so everything up
    to the wire (worker, urllib3, botocore) is what gets measured. Parts may
    arrive at once, from several threads: each is hashed on its own.
    """

    def __init__(self):
        self.parts: dict[int, tuple[int, str]] = {}
        """Part number: its size and SHA-256."""
        self.completed = False

    def _consume(self, request, digest) -> int:
        body = request.body
        if isinstance(body, bytes | bytearray):
            body = io.BytesIO(body)
        encoding = request.headers.get("content-encoding") or b""
        if b"aws-chunked" in (encoding.encode() if isinstance(encoding, str) else encoding):
            return self._consume_chunked(body, digest)
        return self._feed(body, None, digest)

    def _feed(self, body, length, digest) -> int:
        seen = 0
        while length is None or seen < length:
            want = READ_BYTES if length is None else min(READ_BYTES, length - seen)
            chunk = body.read(want)
            if not chunk:
                break
            digest.update(chunk)
            seen += len(chunk)
        return seen

    def _consume_chunked(self, body, digest) -> int:
        """aws-chunked framing: ``<hex size>\\r\\n<data>\\r\\n`` ... ``0\\r\\n<trailers>``."""
        seen = 0
        while True:
            line = b""
            while not line.endswith(b"\r\n"):
                line += body.read(1)
            size = int(line.split(b";")[0].strip(), 16)
            if size == 0:
                return seen
            seen += self._feed(body, size, digest)
            assert body.read(2) == b"\r\n"

    def __call__(self, request, **_):
        query = parse_qs(urlsplit(request.url).query, keep_blank_values=True)
        method = request.method
        headers = {"etag": f'"{uuid.uuid4().hex}"'}
        body = b""
        if method == "POST" and "uploads" in query:
            body = (
                b"<InitiateMultipartUploadResult><Bucket>b</Bucket><Key>k</Key>"
                b"<UploadId>upload-1</UploadId></InitiateMultipartUploadResult>"
            )
        elif method == "PUT" and "partNumber" in query:
            digest = hashlib.sha256()
            size = self._consume(request, digest)
            self.parts[int(query["partNumber"][0])] = (size, digest.hexdigest())
            # What S3 answers: the part's checksum, as computed by the client.
            headers["x-amz-checksum-crc32"] = request.headers.get("x-amz-checksum-crc32", "")
        elif method == "POST" and "uploadId" in query:
            self.completed = True
            etag = xml.sax.saxutils.escape(headers["etag"])
            body = f"<CompleteMultipartUploadResult><ETag>{etag}</ETag>".encode()
            body += b"</CompleteMultipartUploadResult>"
        elif method == "PUT":
            self._consume(request, hashlib.sha256())
        else:
            raise AssertionError(f"unexpected S3 call {method} {request.url}")
        return AWSResponse(request.url, 200, headers, _Raw(body))
