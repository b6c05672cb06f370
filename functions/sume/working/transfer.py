"""One body into S3 in parts: read, hashed in order, uploaded in parallel, in bounded memory.

Download and upload overlap. While up to ``uploads`` parts are being sent
(``UploadPart`` calls at once), the next ones are read: from the one stream
(``stream_parts``) or, when the origin serves byte ranges, on up to
``connections`` connections at once (``RangedParts``). Every part is a buffer
of its own, and a copy never holds more than ``readers + uploads`` of them
(``readers`` is 1 for a single stream): a reader takes a slot before it reads a
part, and the part's upload gives the slot back when it ends. Memory is so
bounded by that many parts, whatever the body's size and whichever side is
the slower one.

The SHA-256 and size are taken on the caller's thread, part by part in the
body's order. A body of one part is a single ``PutObject``; a larger one a
multipart upload, aborted on any failure once the parts in flight have ended,
so that none lands after the abort and no orphan part is billed.

Why not s3transfer's managed upload of the response (``upload_fileobj`` of a
file-like over it)? Measured side by side (``make bench``, section 6) with its
memory bounded like ours (``max_in_memory_upload_chunks``, which boto3's
``TransferConfig`` does not expose), one stream copies about as fast either way
(within 15 %, on a moto that bounds both). But s3transfer reads one file, so it
cannot take its parts from several ranged connections, which is what beats a
per-connection cap (over twice one stream's speed there), and the bound rests
on a setting boto3 does not offer.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import re
import threading
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from sume.core.errors import PermanentError
from sume.net.errors import FetchError
from sume.net.fetch import SafeHttp
from sume.net.response import Endpoint, Response

Room = Callable[[bool], bool]
"""Take a slot for one more part buffer: wait for one, or (False) only say whether one was free."""

_CONTENT_RANGE = re.compile(r"bytes ([0-9]+)-([0-9]+)/([0-9]+)")
CHECKSUM = "CRC32"


@dataclass(frozen=True)
class Copied:
    size: int
    sha256: str


class RangesUnusable(PermanentError):
    """The origin's byte ranges cannot be trusted for this copy: copy it again as one stream."""


def _part(size: int) -> io.BytesIO:
    """A part's buffer: ``size`` bytes, allocated once and written in place.

    An in-memory file and not a ``bytearray``: botocore reads it in pieces
    (to checksum, sign and send it, and again on a retry), where it would copy
    a ``bytearray`` whole to frame a checksum trailer.
    """
    buffer = io.BytesIO()
    buffer.seek(size - 1)
    buffer.write(b"\0")
    buffer.seek(0)
    return buffer


class S3Parts:
    """Where a body's parts go, in at most ``in_memory`` buffers at a time.

    Part 1 is held until part 2 arrives: a body of one part is then a single
    ``PutObject`` at ``finish``. From part 2 on, a multipart upload sends
    ``uploads`` parts at once; the first failure is raised to the reader at
    its next ``room`` or ``add``.
    """

    def __init__(
        self,
        s3: Any,
        bucket: str,
        key: str,
        content_type: str,
        *,
        uploads: int,
        in_memory: int,
    ) -> None:
        if in_memory < 2:
            # Part 1 is held while part 2 is read.
            raise ValueError("a copy needs room for at least two parts")
        self._s3 = s3
        self._where = {"Bucket": bucket, "Key": key}
        self._content_type = content_type
        self._pool = ThreadPoolExecutor(uploads, thread_name_prefix="upload")
        self._free = in_memory
        self._changed = threading.Condition()
        self._failure: BaseException | None = None
        self._first: io.BytesIO | None = None
        self._upload_id: str | None = None
        self._done: dict[int, dict[str, Any]] = {}

    def room(self, wait: bool = True) -> bool:
        with self._changed:
            while True:
                if self._failure is not None:
                    raise self._failure
                if self._free:
                    self._free -= 1
                    return True
                if not wait:
                    return False
                self._changed.wait()

    def add(self, number: int, part: io.BytesIO) -> None:
        """Part ``number`` (from 1, in order), read into a slot taken with ``room``."""
        with self._changed:
            if self._failure is not None:
                raise self._failure
        if number == 1:
            self._first = part
            return
        if self._first is not None:
            # A CRC32 per part, as s3transfer does: botocore computes it for
            # each part anyway, and S3 checks every part against it when the
            # upload completes. (Without one S3 builds a whole-object checksum
            # itself; moto, in the bench, copies the whole object twice to do so.)
            self._upload_id = self._s3.create_multipart_upload(
                **self._where, ContentType=self._content_type, ChecksumAlgorithm=CHECKSUM
            )["UploadId"]
            self._pool.submit(self._send, 1, self._first)
            self._first = None
        self._pool.submit(self._send, number, part)

    def _send(self, number: int, part: io.BytesIO) -> None:
        failure = None
        try:
            answer = self._s3.upload_part(
                **self._where,
                UploadId=self._upload_id,
                PartNumber=number,
                Body=part,
                ChecksumAlgorithm=CHECKSUM,
            )
            self._done[number] = {
                "ETag": answer["ETag"],
                "PartNumber": number,
                f"Checksum{CHECKSUM}": answer[f"Checksum{CHECKSUM}"],
            }
        except BaseException as exc:  # handed to the reader, which aborts
            failure = exc
        # The buffer goes before its slot does: this frame and the pool's work item
        # still hold the part, and the reader, woken by the slot, fills a new one
        # at once. Nothing reads it again (a retry was botocore's, within the call).
        part.close()
        with self._changed:
            self._free += 1
            if failure is not None and self._failure is None:
                self._failure = failure
            self._changed.notify_all()

    def finish(self) -> None:
        self._pool.shutdown(wait=True)
        if self._upload_id is None:
            body = self._first if self._first is not None else io.BytesIO()
            self._s3.put_object(**self._where, Body=body, ContentType=self._content_type)
            return
        if self._failure is not None:
            raise self._failure
        parts = [self._done[n] for n in sorted(self._done)]
        self._s3.complete_multipart_upload(
            **self._where, UploadId=self._upload_id, MultipartUpload={"Parts": parts}
        )

    def abort(self) -> None:
        """Cancel the parts not yet sent, wait for those in flight, then abort the upload."""
        self._pool.shutdown(wait=True, cancel_futures=True)
        if self._upload_id is not None:
            # The error that got us here matters more than a failed abort; the
            # bucket's lifecycle rule removes parts an abort could not.
            with contextlib.suppress(BotoCoreError, ClientError):
                self._s3.abort_multipart_upload(**self._where, UploadId=self._upload_id)


Parts = Generator[io.BytesIO, None, None]


def copy_parts(parts: Parts, sink: S3Parts) -> Copied:
    """Hash and size ``parts`` in order while ``sink`` stores them; abort on any failure.

    On a failure the reading stops first (``parts`` is closed: its fetches
    end), then the upload is aborted.
    """
    digest = hashlib.sha256()
    size = 0
    try:
        with contextlib.closing(parts):
            for number, part in enumerate(parts, 1):
                with part.getbuffer() as view:
                    digest.update(view)
                    size += len(view)
                sink.add(number, part)
        sink.finish()
    except BaseException:
        sink.abort()
        raise
    return Copied(size, digest.hexdigest())


def stream_parts(
    chunks: Iterable[bytes], part_size: int, declared: int | None, room: Room
) -> Parts:
    """The stream cut into parts of ``part_size`` bytes (the last one shorter), each in a slot.

    A buffer is taken only once a byte for it has arrived, so a body ending on
    a part boundary leaves no empty part. With a ``declared`` size a short
    body gets a buffer of its own size, not a whole part's.
    """
    buffer: io.BytesIO | None = None
    offset = size = 0
    for chunk in chunks:
        data = memoryview(chunk)
        while data:
            if buffer is None:
                room(True)
                left = declared - offset if declared is not None else 0
                size = min(part_size, left) if left > 0 else part_size
                buffer = _part(size)
            taken = min(len(data), size - buffer.tell())
            buffer.write(data[:taken])
            offset += taken
            data = data[taken:]
            if buffer.tell() == size:
                buffer.seek(0)
                yield buffer
                buffer = None
    if buffer is not None:
        buffer.truncate()
        buffer.seek(0)
        yield buffer


@dataclass(frozen=True)
class RangePlan:
    """What the first answer said that makes a ranged copy safe."""

    size: int
    if_range: str
    """The validator sent with each range: a changed object is answered whole (200)."""
    validators: Mapping[str, str]
    """``etag`` and ``last-modified`` as first answered; every part must carry the same."""


def range_plan(response: Response, part_size: int) -> RangePlan | None:
    """A plan for a ranged copy, when the origin offers one and it is worth it.

    It must accept byte ranges, declare the length (over one part) and name
    the version it sent: a strong ETag or a Last-Modified date, so that a
    change mid-copy is noticed. (It is the whole object, unencoded: ``SafeHttp.open``
    refuses any other answer.)
    """
    headers = response.headers
    accepts = {unit.strip().lower() for unit in headers.get("accept-ranges", "").split(",")}
    size = response.content_length
    if "bytes" not in accepts or size is None or size <= part_size:
        return None
    validators = {
        name: headers[name].strip()
        for name in ("etag", "last-modified")
        if headers.get(name, "").strip()
    }
    etag = validators.get("etag", "")
    # A weak ETag may not be sent in If-Range (RFC 9110, 13.1.5).
    if_range = etag if etag and not etag.startswith("W/") else validators.get("last-modified")
    if not if_range:
        return None
    return RangePlan(size, if_range, validators)


class RangedParts:
    """A body's parts fetched on several connections and handed on in order.

    Part ``i`` is bytes ``[i x part_size, (i + 1) x part_size)``. Part 0 is
    read from the first answer (which is then closed); every other one is a
    ranged GET of its own to the address checked for the first answer, with
    ``If-Range``. At most ``connections`` parts are fetched or wait their turn
    at once, each in a slot. A part answered otherwise than exactly as asked
    (200, another range, length or version, a content coding, too few bytes)
    or failing for any reason but the deadline raises ``RangesUnusable``; the
    deadline's error is raised as it is.
    """

    def __init__(
        self,
        http: SafeHttp,
        first: Response,
        plan: RangePlan,
        *,
        part_size: int,
        connections: int,
        room: Room,
        deadline: float,
    ) -> None:
        self._http = http
        self._first = first
        self._plan = plan
        self._part_size = part_size
        self._connections = connections
        self._room = room
        self._deadline = deadline
        self._lock = threading.Lock()
        self._open: set[Response] = set()
        self._stopped = False

    def __iter__(self) -> Parts:
        count = -(-self._plan.size // self._part_size)
        pool = ThreadPoolExecutor(self._connections, thread_name_prefix="range")
        fetching: dict[int, Future[io.BytesIO]] = {}
        started = 0
        try:
            for index in range(count):
                # Wait for a slot only with nothing else to wait on: else the
                # next part in order may come first.
                while started < count and started - index < self._connections:
                    if not self._room(started == index):
                        break
                    fetching[started] = pool.submit(self._fetch, started)
                    started += 1
                yield self._result(index, fetching.pop(index))
        finally:
            self._stop()
            pool.shutdown(wait=True, cancel_futures=True)

    def _result(self, index: int, future: Future[io.BytesIO]) -> io.BytesIO:
        try:
            return future.result()
        except FetchError as exc:
            if exc.code == "deadline":
                raise
            raise RangesUnusable(f"part {index + 1} failed: {exc.code}") from exc

    def _stop(self) -> None:
        with self._lock:
            self._stopped = True
            running = list(self._open)
        for response in running:
            response.cancel()

    @contextlib.contextmanager
    def _tracked(self, response: Response) -> Iterator[Response]:
        """``response``, cancelled at once should the copy stop while it is read."""
        with self._lock:
            self._open.add(response)
            stopped = self._stopped
        if stopped:
            response.cancel()
        try:
            yield response
        finally:
            with self._lock:
                self._open.discard(response)

    def _fetch(self, index: int) -> io.BytesIO:
        start = index * self._part_size
        end = min(start + self._part_size, self._plan.size)
        buffer = _part(end - start)
        if index == 0:
            with self._tracked(self._first) as first:
                self._fill(buffer, end - start, first, "the first answer")
                # The rest of the first answer comes on other connections.
                first.cancel()
            return buffer
        what = f"range {start}-{end - 1}"
        endpoint: Endpoint = self._first.endpoint
        with (
            self._http.open_range(
                endpoint, start, end, self._plan.if_range, deadline=self._deadline
            ) as answer,
            self._tracked(answer) as part,
        ):
            self._check(part, start, end, what)
            self._fill(buffer, end - start, part, what)
        return buffer

    def _check(self, part: Response, start: int, end: int, what: str) -> None:
        if part.status != 206:
            # 200: the object changed (If-Range) or ranges are off after all.
            raise RangesUnusable(f"{what} was answered {part.status}, not 206")
        found = _CONTENT_RANGE.fullmatch(part.headers.get("content-range", "").strip())
        if found is None or tuple(map(int, found.groups())) != (start, end - 1, self._plan.size):
            raise RangesUnusable(f"{what} was answered with another range")
        if part.content_length not in (None, end - start):
            raise RangesUnusable(f"{what} declared {part.content_length} bytes")
        for name, value in self._plan.validators.items():
            if part.headers.get(name, "").strip() != value:
                raise RangesUnusable(f"{what} came from another version ({name} differs)")

    def _fill(self, buffer: io.BytesIO, size: int, response: Response, what: str) -> None:
        for chunk in response.iter_bytes():
            buffer.write(memoryview(chunk)[: size - buffer.tell()])
            if buffer.tell() == size:
                buffer.seek(0)
                return
        raise RangesUnusable(f"{what} ended after {buffer.tell()} of {size} bytes")
