"""A fetch's wall-clock deadline: the watchdog that ends an exchange at it, the DNS lookup
bound by it, and transport failures classified (any failure once it has come is its doing).

Every fetch has a deadline besides its per-read timeout: a server that
trickles one byte at a time never trips a read timeout (see ``Watchdog``).
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import ssl
import threading
import time
from collections.abc import Iterator, Sequence

from urllib3.exceptions import (
    HTTPError,
    LocationParseError,
    LocationValueError,
    NewConnectionError,
)
from urllib3.exceptions import SSLError as Urllib3SSLError
from urllib3.exceptions import TimeoutError as Urllib3TimeoutError
from urllib3.util.ssl_match_hostname import CertificateError

from sume.net.errors import (
    FetchError,
    PermanentFetchError,
    RefusedUrl,
    TransientFetchError,
    deadline_error,
)
from sume.net.policy import Resolver


class Watchdog:
    """Shuts a connection's socket down when the fetch's deadline comes.

    Per-read timeouts cannot bound an exchange: a server sending one byte
    every half second satisfies every read, and http.client reads a status
    line, a header or a chunk-size line with as many reads as it takes.
    Clamping each read to the time left would need to own every read, in
    http.client, urllib3 and the TLS layer. Shutting the socket down instead
    wakes whichever read is blocked, in whatever layer, at once, and works the
    same for http and https: it acts on the TCP socket under TLS
    (``socket.socket.shutdown``, no close_notify exchange that could itself
    wait). The reader then sees an error or an early end of the stream, which
    ``expired`` turns into the ``deadline`` error. Connecting and the TLS
    handshake happen before it is armed and are bounded by a connect timeout
    clamped to the time left (CPython bounds a whole handshake by the socket
    timeout).
    """

    def __init__(self, deadline: float) -> None:
        self._deadline = deadline
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._timer: threading.Timer | None = None
        self.fired = False

    def expired(self) -> bool:
        return self.fired or time.monotonic() >= self._deadline

    def arm(self, sock: socket.socket) -> None:
        with self._lock:
            self._sock = sock
        self._timer = threading.Timer(max(0.0, self._deadline - time.monotonic()), self._fire)
        self._timer.daemon = True
        self._timer.start()

    def _fire(self) -> None:
        with self._lock:
            if self._sock is None:
                return
            self.fired = True
            with contextlib.suppress(OSError):
                socket.socket.shutdown(self._sock, socket.SHUT_RDWR)

    def cancel(self) -> None:
        """End the exchange now, as the deadline would."""
        self._fire()

    def disarm(self) -> None:
        """Before the socket is closed, so a reused file descriptor is never shut down."""
        with self._lock:
            self._sock = None
        if self._timer is not None:
            self._timer.cancel()


def resolver_within(resolver: Resolver, deadline: float, url: str) -> Resolver:
    """``resolver``, given up on at the deadline: getaddrinfo has no timeout of its own."""

    def resolve(host: str, port: int) -> Sequence[str]:
        answer: list[Sequence[str]] = []
        failure: list[Exception] = []

        def look_up() -> None:
            try:
                answer.append(resolver(host, port))
            except Exception as exc:  # handed to the caller below
                failure.append(exc)

        lookup = threading.Thread(target=look_up, name="resolve", daemon=True)
        lookup.start()
        lookup.join(max(0.0, deadline - time.monotonic()))
        if lookup.is_alive():
            raise TransientFetchError(
                "deadline", f"resolving {host!r} outlasted the fetch's deadline", url
            )
        if failure:
            raise failure[0]
        return answer[0]

    return resolve


def _certificate_rejected(exc: BaseException) -> bool:
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ssl.SSLCertVerificationError | CertificateError):
            return True
        seen = seen.__cause__ or seen.__context__
    return "CERTIFICATE_VERIFY_FAILED" in str(exc)


def _transport_error(exc: Exception, url: str) -> FetchError:
    if isinstance(exc, NewConnectionError):
        # Checked before timeouts: urllib3 makes it a subclass of ConnectTimeoutError.
        return TransientFetchError("connection_error", str(exc), url)
    if isinstance(exc, Urllib3TimeoutError | TimeoutError):
        return TransientFetchError("timeout", f"timed out: {exc}", url)
    if isinstance(exc, Urllib3SSLError | ssl.SSLError | CertificateError):
        # A certificate that does not match the host will not start matching.
        if _certificate_rejected(exc):
            return PermanentFetchError("tls_certificate", str(exc), url)
        return TransientFetchError("tls_error", str(exc), url)
    if isinstance(exc, LocationParseError | LocationValueError | http.client.InvalidURL):
        return RefusedUrl("invalid_url", str(exc), url)
    return TransientFetchError("connection_error", str(exc), url)


@contextlib.contextmanager
def transport_errors(url: str, watch: Watchdog) -> Iterator[None]:
    """Transport failures, classified; any failure once the deadline has come is its doing."""
    try:
        yield
    except FetchError:
        raise
    except (
        HTTPError,
        OSError,
        http.client.HTTPException,
        http.client.InvalidURL,
        CertificateError,
    ) as exc:
        if watch.expired():
            raise deadline_error(url) from None
        raise _transport_error(exc, url) from None
