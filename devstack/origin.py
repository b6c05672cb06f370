"""A loopback origin for artifact copies: one large generated object, served as a CDN serves it.

The object is generated, never stored. Block ``i`` (1 MiB) is ``i`` as 8
big-endian bytes followed by a pseudo-random tail fixed by the version's
seed, so any byte range costs one block build per MiB, every block differs (a
copy that reorders, repeats or drops a part changes the SHA-256) and a
256 MiB object costs no memory.

It offers what a ranged, pipelined copier needs to be tested against:
``Accept-Ranges: bytes`` and single-range ``Range`` requests (206 with
``Content-Range``; 416 past the end), an ``ETag`` and ``Last-Modified`` per
version, ``If-Range`` (a stale validator gets the whole current object, 200),
``HEAD``, ranges switched off (``Range`` ignored, no ``Accept-Ranges``), an
object replaced after a given number of bytes served (later requests see the
new version; a response in progress keeps its own), and a bandwidth cap per
connection, paced by the server, as CDNs cap each connection.

For the copier's tests it can also misbehave on one ranged request
(``Fault``): answer it whole (200), with other bytes than asked, compressed,
with a length that is not a number, or cut it short.
"""

from __future__ import annotations

import enum
import gzip
import hashlib
import random
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler
from typing import Any

from devstack.loopback import LoopbackHTTPServer, Served

BLOCK = 1024 * 1024
CHUNK = 64 * 1024
PATH = "/renders/artifact.bin"
# Versions' Last-Modified dates: one second apart, so If-Range by date works too.
EPOCH = 1_700_000_000


class Content:
    """The bytes of one version of the object."""

    def __init__(self, size: int, seed: int) -> None:
        self.size = size
        self.seed = seed
        self._tail = random.Random(seed).randbytes(BLOCK - 8)

    def _block(self, index: int) -> bytes:
        return index.to_bytes(8, "big") + self._tail

    def chunks(
        self, start: int = 0, end: int | None = None, chunk: int = CHUNK
    ) -> Iterator[memoryview]:
        """Bytes ``[start, end)`` in pieces of at most ``chunk`` bytes."""
        end = self.size if end is None else min(end, self.size)
        position = start
        while position < end:
            index, offset = divmod(position, BLOCK)
            block = memoryview(self._block(index))
            stop = min(BLOCK, end - index * BLOCK)
            while offset < stop:
                piece = block[offset : min(offset + chunk, stop)]
                yield piece
                offset += len(piece)
            position = index * BLOCK + stop

    def read(self, start: int = 0, end: int | None = None) -> bytes:
        return b"".join(self.chunks(start, end, BLOCK))

    def sha256(self) -> str:
        digest = hashlib.sha256()
        for piece in self.chunks(chunk=BLOCK):
            digest.update(piece)
        return digest.hexdigest()


@dataclass(frozen=True)
class Version:
    content: Content
    etag: str
    last_modified: str

    @classmethod
    def of(cls, size: int, seed: int) -> Version:
        return cls(
            Content(size, seed),
            f'"sume-bench-{seed}-{size}"',
            formatdate(EPOCH + seed, usegmt=True),
        )

    def matches(self, validator: str) -> bool:
        """``If-Range``: an entity tag or a date, compared exactly (a strong comparison)."""
        return validator.strip() in (self.etag, self.last_modified)


class Fault(enum.Enum):
    """How the origin answers the ``fault_at``-th request that asks for a range."""

    WHOLE = "whole"
    """200 and the whole object, as if ranges were off after all."""
    SHIFTED = "shifted"
    """206 for the range one byte further on (its Content-Range says so)."""
    SHORT = "short"
    """206 as asked, but the connection closes half-way through the body."""
    GZIP = "gzip"
    """206 as asked, but the range gzip-compressed (``Content-Encoding: gzip``)."""
    LENGTH = "length"
    """206 as asked, but declaring its ``Content-Length`` as ``²`` (a digit to ``str.isdigit``)."""


class Unsatisfiable(Exception):
    """A range starting at or past the end of the object (416)."""


def parse_range(header: str | None, size: int) -> tuple[int, int] | None:
    """``[start, end)`` of a single ``bytes=`` range; None to send the whole object.

    Anything this origin does not serve as a range (several ranges, another
    unit, a malformed value) is ignored, which RFC 9110 allows: the answer is
    then the whole object with 200.
    """
    if not header:
        return None
    unit, _, spec = header.strip().partition("=")
    if unit.strip().lower() != "bytes" or "," in spec:
        return None
    first, dash, last = (part.strip() for part in spec.partition("-"))
    if not dash or not (first or last) or not all(p.isdigit() for p in (first, last) if p):
        return None
    if not first:
        suffix = int(last)
        if suffix == 0 or size == 0:
            raise Unsatisfiable(header)
        return max(0, size - suffix), size
    start = int(first)
    if last and int(last) < start:
        return None
    if start >= size:
        raise Unsatisfiable(header)
    return start, min(int(last) + 1, size) if last else size


class Pacer:
    """Holds one response to ``rate`` bytes per second.

    Before each piece is sent, it waits until the bytes sent before it would
    have taken their time at that rate, so the first piece leaves at once and
    the rate is never exceeded by more than one piece.
    """

    def __init__(
        self,
        rate: float | None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Any] = time.sleep,
    ) -> None:
        self._rate = rate
        self._clock = clock
        self._sleep = sleep
        self._start: float | None = None
        self._sent = 0

    def wait(self, size: int) -> None:
        if self._rate is None:
            return
        now = self._clock()
        if self._start is None:
            self._start = now
        due = self._start + self._sent / self._rate
        if due > now:
            self._sleep(due - now)
        self._sent += size


@dataclass(frozen=True)
class Seen:
    method: str
    path: str
    range: str | None
    if_range: str | None
    status: int
    etag: str
    host: str | None = None


class Origin(Served):
    """Serves one generated object at ``url``; see the module docstring.

    ``rate``: bytes per second per connection (None: as fast as it goes).
    ``change_after``: replace the object once this many body bytes were served.
    ``fault``: misbehave so on the ``fault_at``-th ranged request (from 1).
    ``clock`` and ``sleep`` pace the answers (tests pass fakes).
    """

    def __init__(
        self,
        size: int,
        *,
        rate: float | None = None,
        ranges: bool = True,
        change_after: int | None = None,
        fault: Fault | None = None,
        fault_at: int = 1,
        seed: int = 1,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Any] | None = None,
    ) -> None:
        self.rate = rate
        self.fault = fault
        self._fault_at = fault_at
        self._ranged = 0
        self._clock = clock
        self.ranges = ranges
        self.requests: list[Seen] = []
        self.served = 0
        self._version = Version.of(size, seed)
        self._change_after = change_after
        self._lock = threading.Lock()
        self.http = LoopbackHTTPServer(_OriginHandler, self)
        # Waiting on the stop event lets a paced answer end with the server.
        self._sleep = sleep or self.http.stopping.wait

    @property
    def url(self) -> str:
        return self.http.url(PATH)

    @property
    def version(self) -> Version:
        with self._lock:
            return self._version

    def change(self) -> Version:
        """Replace the object: new bytes, ETag and Last-Modified."""
        with self._lock:
            return self._replace()

    def _replace(self) -> Version:
        old = self._version
        self._version = Version.of(old.content.size, old.content.seed + 1)
        return self._version

    def record(self, seen: Seen) -> None:
        with self._lock:
            self.requests.append(seen)

    def fault_now(self) -> Fault | None:
        """The fault for this ranged request, if it is the one to misbehave."""
        with self._lock:
            self._ranged += 1
            return self.fault if self._ranged == self._fault_at else None

    def send(
        self, write: Callable[[memoryview], Any], version: Version, start: int, end: int
    ) -> None:
        pacer = Pacer(self.rate, self._clock, self._sleep)
        for piece in version.content.chunks(start, end):
            pacer.wait(len(piece))
            if self.http.stopping.is_set():
                return
            write(piece)
            self._count(len(piece))

    def _count(self, size: int) -> None:
        with self._lock:
            self.served += size
            if self._change_after is not None and self.served >= self._change_after:
                self._change_after = None
                self._replace()


class _OriginHandler(BaseHTTPRequestHandler):
    # HTTP/1.1: a ranged copier may keep its connections for several parts.
    protocol_version = "HTTP/1.1"
    # A copier that stops reading (a size cap, a fallback, a part it already
    # has) resets its connection: the server drops it without a word.
    server: LoopbackHTTPServer

    def do_HEAD(self) -> None:
        self._answer(body=False)

    def do_GET(self) -> None:
        self._answer(body=True)

    def _answer(self, body: bool) -> None:
        origin: Origin = self.server.owner
        version = origin.version
        requested = self.headers.get("range")
        if_range = self.headers.get("if-range")
        if self.path != PATH:
            self._empty(origin, version, 404, requested, if_range)
            return
        size = version.content.size
        wanted = requested if origin.ranges else None
        if wanted and if_range is not None and not version.matches(if_range):
            wanted = None
        try:
            span = parse_range(wanted, size)
        except Unsatisfiable:
            self._empty(origin, version, 416, requested, if_range, f"bytes */{size}")
            return
        fault = origin.fault_now() if span is not None else None
        if fault is Fault.WHOLE:
            span = None
        elif fault is Fault.SHIFTED and span is not None:
            span = (span[0] + 1, min(span[1] + 1, size))
        start, end = span or (0, size)
        status = 200 if span is None else 206
        origin.record(self._seen(requested, if_range, status, version))
        self.send_response(status)
        self._validators(origin, version)
        if span is not None:
            self.send_header("content-range", f"bytes {start}-{end - 1}/{size}")
        self.send_header("content-type", "application/octet-stream")
        if fault is Fault.GZIP:
            packed = gzip.compress(version.content.read(start, end), compresslevel=1)
            self.send_header("content-encoding", "gzip")
            self.send_header("content-length", str(len(packed)))
            self.end_headers()
            if body:
                self.wfile.write(packed)
            return
        self.send_header("content-length", "\u00b2" if fault is Fault.LENGTH else str(end - start))
        self.end_headers()
        if fault is Fault.SHORT:
            end = start + (end - start) // 2
            self.close_connection = True
        if body:
            # The client may stop reading first (a size cap, a fallback).
            try:
                origin.send(self.wfile.write, version, start, end)
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True

    def _seen(
        self, requested: str | None, if_range: str | None, status: int, version: Version
    ) -> Seen:
        host = self.headers.get("host")
        return Seen(self.command, self.path, requested, if_range, status, version.etag, host)

    def _validators(self, origin: Origin, version: Version) -> None:
        self.send_header("etag", version.etag)
        self.send_header("last-modified", version.last_modified)
        if origin.ranges:
            self.send_header("accept-ranges", "bytes")

    def _empty(
        self,
        origin: Origin,
        version: Version,
        status: int,
        requested: str | None,
        if_range: str | None,
        content_range: str | None = None,
    ) -> None:
        origin.record(self._seen(requested, if_range, status, version))
        self.send_response(status)
        if content_range:
            self._validators(origin, version)
            self.send_header("content-range", content_range)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass
