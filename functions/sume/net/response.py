"""An answer being streamed, with its byte cap and deadline; gzip or deflate undone here,
never by urllib3, with our own bound on the decompressed size."""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import urllib3

from sume.net.errors import PermanentFetchError, deadline_error
from sume.net.policy import Target
from sume.net.watchdog import Watchdog, transport_errors

CHUNK_BYTES = 64 * 1024
# Content codings we undo ourselves (text answers only); zlib's "+32" window
# reads both the gzip and the zlib header.
DECODED_ENCODINGS = frozenset({"gzip", "x-gzip", "deflate"})
_INFLATE_WBITS = zlib.MAX_WBITS | 32
# ``str.isdigit`` takes "²", which ``int()`` refuses, and ``int()`` takes
# " 1_0" and "+5": a length is ASCII digits and nothing else.
_LENGTH = re.compile(r"[0-9]+")


@dataclass(frozen=True)
class Endpoint:
    """Where an answer came from: the checked URL, the checked address connected
    to, and the headers sent there (``host`` included)."""

    target: Target
    address: str
    headers: Mapping[str, str]


class _Inflater:
    """gzip or deflate undone here, in bounded pieces.

    Each piece is at most ``CHUNK_BYTES`` however small the input, so the
    caller counts decompressed bytes as they come and refuses a compression
    bomb as soon as it passes the cap, without ever holding it whole, whatever
    urllib3 version the runtime bundles (older ones inflate a whole read at
    once).
    """

    def __init__(self, url: str) -> None:
        self._url = url
        self._z = zlib.decompressobj(_INFLATE_WBITS)

    def inflate(self, data: bytes) -> Iterator[bytes]:
        try:
            while data:
                if self._z.eof:
                    # A gzip body may be several members back to back.
                    self._z = zlib.decompressobj(_INFLATE_WBITS)
                piece = self._z.decompress(data, CHUNK_BYTES)
                data = self._z.unconsumed_tail or self._z.unused_data
                if piece:
                    yield piece
        except zlib.error as exc:
            raise PermanentFetchError(
                "invalid_encoding", f"answer is not valid gzip or deflate: {exc}", self._url
            ) from None


def _inflater(headers: Mapping[str, str], url: str, decode: bool) -> _Inflater | None:
    """What undoes the answer's content coding: None for none, a refusal for one not asked for.

    ``decode`` asked for gzip or deflate; otherwise only identity was asked for,
    and bytes in any coding would be another representation than the one asked.
    """
    encoding = headers.get("content-encoding", "").strip().lower()
    if encoding in ("", "identity"):
        return None
    if decode and encoding in DECODED_ENCODINGS:
        return _Inflater(url)
    raise PermanentFetchError(
        "unsupported_encoding", f"content-encoding {encoding[:40]!r} was not asked for", url
    )


class Response:
    """An answer being streamed; the byte cap and the deadline hold while reading.

    With ``decode`` a gzip or deflate body is decompressed here and the cap
    applies to the compressed and to the decompressed bytes alike; without it
    an answer in any content coding is refused (``unsupported_encoding``).
    """

    def __init__(
        self,
        endpoint: Endpoint,
        raw: urllib3.BaseHTTPResponse,
        max_bytes: int | None,
        watch: Watchdog,
        decode: bool = False,
    ) -> None:
        target = endpoint.target
        self.endpoint = endpoint
        self.url = target.url
        self.status = raw.status
        self.headers: Mapping[str, str] = raw.headers
        self._raw = raw
        self._max = max_bytes
        self._watch = watch
        self._inflater = _inflater(self.headers, target.url, decode)

    @property
    def content_type(self) -> str | None:
        value = self.headers.get("content-type")
        return value.strip() if value else None

    @property
    def content_length(self) -> int | None:
        """The declared length, None when none is; ``invalid_content_length`` unless digits.

        Several ``Content-Length`` headers come joined by commas, and are refused too.
        """
        value = self.headers.get("content-length")
        if value is None:
            return None
        if not _LENGTH.fullmatch(value.strip()):
            raise PermanentFetchError(
                "invalid_content_length",
                f"content-length {value[:40]!r} is not a number of bytes",
                self.url,
                self.status,
            )
        return int(value)

    def _capped(self, seen: int) -> None:
        if self._max is not None and seen > self._max:
            raise PermanentFetchError(
                "too_large", f"answer is over the {self._max}-byte cap", self.url
            )

    def _decoded(self, chunk: bytes) -> Iterator[bytes]:
        return self._inflater.inflate(chunk) if self._inflater else iter((chunk,))

    def iter_bytes(self, chunk_bytes: int = CHUNK_BYTES) -> Iterator[bytes]:
        """The body in chunks; raises ``PermanentFetchError('too_large')`` past the cap."""
        received = produced = 0
        with transport_errors(self.url, self._watch):
            for chunk in self._raw.stream(chunk_bytes, decode_content=False):
                received += len(chunk)
                self._capped(received)
                for piece in self._decoded(chunk):
                    produced += len(piece)
                    self._capped(produced)
                    yield piece
            if self._watch.fired:
                # A body without a length ends where the socket was shut down:
                # that end is the deadline's, not the server's.
                raise deadline_error(self.url)

    def read(self) -> bytes:
        return b"".join(self.iter_bytes())

    def cancel(self) -> None:
        """Shut the connection down from any thread; a read in progress ends with an error."""
        self._watch.cancel()
