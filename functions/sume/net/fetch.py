"""HTTP GET of URLs that come from outside (artifact links, status URLs), SSRF-safe.

A URL in a webhook or a status answer is attacker-influenced: fetched blindly
it can reach the instance metadata service, the VPC or localhost. So every hop
of a request (the first URL and each redirect target) is checked before any
byte is sent:

1. scheme ``https`` (``http`` only when the policy allows it, for local use);
   no user info in the URL;
2. host on the allow-list, when one is configured;
3. every address the host resolves to is public (no private, loopback,
   link-local, shared, reserved, multicast or unspecified address, including
   one embedded in an IPv6 mapping) unless the policy allows private hosts;
   metadata endpoints are refused whatever the policy says.

The connection then goes to the address that was checked, not to a second
lookup of the name, so a DNS answer that changes between check and connect
(rebinding) cannot redirect it; the ``Host`` header, TLS SNI and certificate
check still use the hostname. Redirects are followed by hand, a bounded number
of times, each target checked like the first URL.

Every fetch has a wall-clock deadline besides its per-read timeout: a server
that trickles one byte at a time never trips a read timeout, so a watchdog
ends the exchange at the deadline (see ``_Watchdog``). A redirect's body is
never read, and a compressed answer is decompressed here, never by urllib3,
with our own bound on the decompressed size.

An artifact (``SafeHttp.open``) is asked for whole and as it is stored
(``accept-encoding: identity``), and the answer must be just that: a content
coding, a ``206`` or ``Content-Range``, or a ``Content-Length`` that is not
ASCII digits is refused before the body is read, so no other bytes (a prefix,
a compressed copy) are ever stored as the artifact.

Errors say whether retrying can help: ``PermanentFetchError`` (refused URL,
4xx, over the size cap) or ``TransientFetchError`` (5xx, 429, timeouts, the
deadline, connection and DNS failures). Their ``url`` and message never carry
a URL's query string or user info (``sume.net.urls.redact_url``): presigned links
are credentials.
"""

from __future__ import annotations

import contextlib
import http.client
import ipaddress
import re
import socket
import ssl
import threading
import time
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import urljoin, urlsplit

import urllib3
from botocore.httpsession import get_cert_path
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.exceptions import (
    HTTPError,
    LocationParseError,
    LocationValueError,
    NewConnectionError,
)
from urllib3.exceptions import SSLError as Urllib3SSLError
from urllib3.exceptions import TimeoutError as Urllib3TimeoutError
from urllib3.util.ssl_match_hostname import CertificateError

from sume.core.errors import PermanentError, RetryableError, SumeError
from sume.net.policy import UrlPolicy, host_allowed, normal_host
from sume.net.urls import redact_url, scrub_urls

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[[str, int], Sequence[str]]
"""Host and port to the IP addresses (as text) a connection may use."""

# Cloud metadata and credential endpoints: refused even when private hosts are
# allowed, because nothing legitimate ever serves an artifact from them.
METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(a)
    for a in (
        "169.254.169.254",  # EC2 instance metadata (IMDS)
        "fd00:ec2::254",  # IMDS over IPv6
        "169.254.170.2",  # ECS / container credentials
        "169.254.170.23",  # EKS pod identity
        "fd00:ec2::23",  # EKS pod identity over IPv6
    )
)
_NAT64 = ipaddress.ip_network("64:ff9b::/96")

REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
# Client errors a retry can fix: the server asks us to come back later.
RETRYABLE_CLIENT_STATUSES = frozenset({408, 425, 429})
DEFAULT_MAX_REDIRECTS = 5
DEFAULT_TEXT_MAX_BYTES = 1024 * 1024
DEFAULT_TOTAL_TIMEOUT_SECONDS = 60.0
CHUNK_BYTES = 64 * 1024
USER_AGENT = "sume-webhooks/1"
# Content codings we undo ourselves (text answers only); zlib's "+32" window
# reads both the gzip and the zlib header.
DECODED_ENCODINGS = frozenset({"gzip", "x-gzip", "deflate"})
_INFLATE_WBITS = zlib.MAX_WBITS | 32
# ``str.isdigit`` takes "²", which ``int()`` refuses, and ``int()`` takes
# " 1_0" and "+5": a length is ASCII digits and nothing else.
_LENGTH = re.compile(r"[0-9]+")


class FetchError(SumeError):
    """A fetch that did not produce a usable answer; ``code`` is machine-readable.

    ``url`` is the redacted URL and ``message`` is scrubbed of the URL's query
    string and user info, so both are safe to log, store and announce.
    """

    def __init__(self, code: str, message: str, url: str, status: int | None = None) -> None:
        message = scrub_urls(message, [url])
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.url = redact_url(url)
        self.status = status

    @property
    def permanent(self) -> bool:
        """Retrying cannot help."""
        return isinstance(self, PermanentError)

    def as_dict(self) -> dict[str, str]:
        return {"code": self.code, "message": self.message, "url": self.url}


class PermanentFetchError(FetchError, PermanentError):
    """Retrying cannot help: refused URL, 4xx, answer over the size cap."""


class TransientFetchError(FetchError, RetryableError):
    """A retry later may succeed: 5xx, 429, timeout, connection or DNS trouble."""


class RefusedUrl(PermanentFetchError):
    """The URL (or a redirect target) is not allowed by the policy."""


@dataclass(frozen=True)
class Target:
    """One checked URL, split into what the connection needs."""

    url: str
    scheme: str
    host: str
    """Lower-case hostname (ASCII, IDNA-encoded) or IP literal, without brackets."""
    port: int
    path: str
    """Path and query, as sent in the request line."""

    @property
    def host_header(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        default = 443 if self.scheme == "https" else 80
        return host if self.port == default else f"{host}:{self.port}"

    @property
    def origin(self) -> tuple[str, str, int]:
        return (self.scheme, self.host, self.port)


@dataclass(frozen=True)
class Endpoint:
    """Where an answer came from: the checked URL, the checked address connected
    to, and the headers sent there (``host`` included)."""

    target: Target
    address: str
    headers: Mapping[str, str]


def _literal_ip(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def _embedded_ipv4(ip: IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address carries, if any (mapped, 6to4, Teredo, NAT64)."""
    if not isinstance(ip, ipaddress.IPv6Address):
        return None
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip.teredo is not None:
        return ip.teredo[1]
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


_NON_PUBLIC_KINDS = (
    ("loopback", "is_loopback"),
    ("link-local", "is_link_local"),
    ("multicast", "is_multicast"),
    ("unspecified", "is_unspecified"),
    ("reserved", "is_reserved"),
    ("private", "is_private"),
)


def _non_public(ip: IPAddress) -> str | None:
    for kind, attribute in _NON_PUBLIC_KINDS:
        if getattr(ip, attribute):
            return kind
    # Shared address space (100.64/10), documentation and benchmark ranges, ...
    return None if ip.is_global else "non-global"


def address_refusal(ip: IPAddress, policy: UrlPolicy) -> str | None:
    """Why connecting to ``ip`` is refused under ``policy``, or None when allowed."""
    candidates = [ip] if (inner := _embedded_ipv4(ip)) is None else [ip, inner]
    if any(candidate in METADATA_ADDRESSES for candidate in candidates):
        return "metadata endpoint"
    if policy.allow_private_hosts:
        return None
    for candidate in candidates:
        if kind := _non_public(candidate):
            return f"{kind} address"
    return None


INVALID_URL = "invalid_url"
REFUSED_SCHEME = "refused_scheme"
REFUSED_HOST = "refused_host"
# The codes ``check_url`` refuses with: the fetch's, and registration's for a status_url.
URL_REFUSALS = (INVALID_URL, REFUSED_SCHEME, REFUSED_HOST)


def check_url(url: str, policy: UrlPolicy) -> Target:
    """Check everything about ``url`` that needs no DNS lookup; raise ``RefusedUrl``."""
    if not isinstance(url, str) or not url or len(url) > 8192:
        raise RefusedUrl(INVALID_URL, "not a usable URL", str(url)[:200])
    if any(c.isspace() or ord(c) < 0x20 or ord(c) == 0x7F or c == "\\" for c in url):
        raise RefusedUrl(INVALID_URL, "URL contains whitespace or control characters", url)
    try:
        parts = urlsplit(url)
        port = parts.port
        host = parts.hostname
    except ValueError as exc:
        raise RefusedUrl(INVALID_URL, f"cannot parse URL: {exc}", url) from None
    scheme = parts.scheme.lower()
    if scheme not in ("https", "http"):
        raise RefusedUrl(REFUSED_SCHEME, f"scheme {scheme!r} is not allowed", url)
    if scheme == "http" and not policy.allow_http:
        raise RefusedUrl(REFUSED_SCHEME, "plain http is not allowed (https only)", url)
    if parts.username is not None or parts.password is not None:
        raise RefusedUrl(INVALID_URL, "URLs with user info are not allowed", url)
    if not host:
        raise RefusedUrl(INVALID_URL, "URL has no host", url)
    try:
        host = normal_host(host)
    except UnicodeError:
        raise RefusedUrl(INVALID_URL, "host is not a valid domain name", url) from None
    if not host_allowed(host, policy.allowed_hosts):
        raise RefusedUrl(REFUSED_HOST, f"host {host!r} is not on the allow-list", url)
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    default_port = 443 if scheme == "https" else 80
    return Target(url, scheme, host, port or default_port, path)


def system_resolver(host: str, port: int) -> list[str]:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


def resolve_checked(target: Target, policy: UrlPolicy, resolver: Resolver) -> str:
    """The address to connect to: every address of the host must pass the policy."""
    literal = _literal_ip(target.host)
    if literal is not None:
        addresses = [literal]
    else:
        try:
            found = resolver(target.host, target.port)
        except socket.gaierror as exc:
            if exc.errno in _NO_SUCH_HOST:
                raise PermanentFetchError(
                    "unresolvable_host", f"host {target.host!r} does not exist", target.url
                ) from None
            raise TransientFetchError(
                "dns_error", f"cannot resolve {target.host!r}: {exc}", target.url
            ) from None
        except OSError as exc:
            raise TransientFetchError(
                "dns_error", f"cannot resolve {target.host!r}: {exc}", target.url
            ) from None
        addresses = []
        for text in found:
            # A scope id (fe80::1%eth0) is only ever on link-local addresses.
            ip = _literal_ip(text.split("%", 1)[0])
            if ip is None:
                raise RefusedUrl("refused_address", f"resolver gave {text!r}", target.url)
            addresses.append(ip)
        if not addresses:
            raise TransientFetchError("dns_error", f"no address for {target.host!r}", target.url)
    # All of them, not just the first: the connection may not go where we think
    # if any answer is refused, and a mixed answer is itself suspicious.
    for ip in addresses:
        if reason := address_refusal(ip, policy):
            raise RefusedUrl(
                "refused_address", f"host {target.host!r} resolves to a {reason} ({ip})", target.url
            )
    return str(addresses[0])


_NO_SUCH_HOST = {
    code
    for code in (getattr(socket, "EAI_NONAME", None), getattr(socket, "EAI_NODATA", None))
    if code is not None
}


def _status_error(status: int, url: str) -> FetchError:
    message = f"HTTP {status} from {redact_url(url)}"
    if status >= 500 or status in RETRYABLE_CLIENT_STATUSES:
        return TransientFetchError(f"http_{status}", message, url, status)
    return PermanentFetchError(f"http_{status}", message, url, status)


def _certificate_rejected(exc: BaseException) -> bool:
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ssl.SSLCertVerificationError | CertificateError):
            return True
        seen = seen.__cause__ or seen.__context__
    return "CERTIFICATE_VERIFY_FAILED" in str(exc)


def _deadline_error(url: str) -> TransientFetchError:
    return TransientFetchError("deadline", "no complete answer before the fetch's deadline", url)


class _Watchdog:
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


def _resolver_within(resolver: Resolver, deadline: float, url: str) -> Resolver:
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
def _transport_errors(url: str, watch: _Watchdog) -> Iterator[None]:
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
            raise _deadline_error(url) from None
        raise _transport_error(exc, url) from None


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
        watch: _Watchdog,
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
        with _transport_errors(self.url, self._watch):
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
                raise _deadline_error(self.url)

    def read(self) -> bytes:
        return b"".join(self.iter_bytes())

    def cancel(self) -> None:
        """Shut the connection down from any thread; a read in progress ends with an error."""
        self._watch.cancel()


class HttpSettings(Protocol):
    """What a handler's settings give the HTTP client (worker and poller alike)."""

    @property
    def url_policy(self) -> UrlPolicy: ...
    @property
    def connect_timeout_seconds(self) -> float: ...
    @property
    def read_timeout_seconds(self) -> float: ...
    @property
    def total_timeout_seconds(self) -> float: ...


class SafeHttp:
    """GET with the URL policy applied to every hop. Thread-safe; holds no pools."""

    def __init__(
        self,
        policy: UrlPolicy,
        connect_timeout: float,
        read_timeout: float,
        *,
        total_timeout: float = DEFAULT_TOTAL_TIMEOUT_SECONDS,
        max_redirects: int = DEFAULT_MAX_REDIRECTS,
        resolver: Resolver = system_resolver,
        ca_certs: str | None = None,
    ) -> None:
        self._policy = policy
        self._connect_timeout = connect_timeout
        self._read_timeout = read_timeout
        self._total_timeout = total_timeout
        self._max_redirects = max_redirects
        self._resolver = resolver
        # The CA bundle botocore itself uses, so TLS trust in Lambda does not
        # depend on the runtime image's system store.
        self._ca_certs = ca_certs or get_cert_path(True)

    @classmethod
    def for_settings(cls, settings: HttpSettings) -> SafeHttp:
        """The client a handler's settings describe: its URL policy and timeouts."""
        return cls(
            settings.url_policy,
            settings.connect_timeout_seconds,
            settings.read_timeout_seconds,
            total_timeout=settings.total_timeout_seconds,
        )

    def _connection(self, target: Target, address: str, timeout: float) -> HTTPConnection:
        if target.scheme == "https":
            return HTTPSConnection(
                address,
                target.port,
                timeout=timeout,
                cert_reqs="CERT_REQUIRED",
                ca_certs=self._ca_certs,
                assert_hostname=target.host,
                server_hostname=target.host,
            )
        return HTTPConnection(address, target.port, timeout=timeout)

    @property
    def total_timeout(self) -> float:
        """The longest any one fetch may take, whatever deadline it is given."""
        return self._total_timeout

    def deadline(self, deadline: float | None = None) -> float:
        """When a fetch given ``deadline`` (``time.monotonic()``, or None) must end."""
        latest = time.monotonic() + self._total_timeout
        return latest if deadline is None else min(deadline, latest)

    @contextlib.contextmanager
    def _request(
        self, endpoint: Endpoint, deadline: float
    ) -> Iterator[tuple[urllib3.BaseHTTPResponse, _Watchdog]]:
        """One GET to ``endpoint``; the answer's body is not read, and closed on exit."""
        target = endpoint.target
        left = deadline - time.monotonic()
        if left <= 0:
            raise _deadline_error(target.url)
        conn = self._connection(target, endpoint.address, min(self._connect_timeout, left))
        watch = _Watchdog(deadline)
        raw: urllib3.BaseHTTPResponse | None = None
        try:
            with _transport_errors(target.url, watch):
                conn.connect()
                watch.arm(conn.sock)
                conn.timeout = self._read_timeout
                conn.request(
                    "GET",
                    target.path,
                    headers=endpoint.headers,
                    preload_content=False,
                    decode_content=False,
                )
                raw = conn.getresponse()
            yield raw, watch
        finally:
            watch.disarm()
            if raw is not None:
                raw.close()
            conn.close()

    @contextlib.contextmanager
    def _exchange(
        self,
        url: str,
        headers: Mapping[str, str] | None,
        accept_encoding: str,
        deadline: float,
    ) -> Iterator[tuple[Endpoint, urllib3.BaseHTTPResponse, _Watchdog]]:
        """The final (non-redirect) answer, its body not yet read."""
        sent = {k.lower(): v for k, v in (headers or {}).items() if k.lower() != "host"}
        sent.setdefault("user-agent", USER_AGENT)
        sent["accept-encoding"] = accept_encoding
        current = url
        first_origin: tuple[str, str, int] | None = None
        for hop in range(self._max_redirects + 1):
            target = check_url(current, self._policy)
            if first_origin is None:
                first_origin = target.origin
            elif target.origin != first_origin:
                # Credentials meant for one origin never travel to another.
                sent.pop("authorization", None)
                sent.pop("cookie", None)
            resolver = _resolver_within(self._resolver, deadline, target.url)
            address = resolve_checked(target, self._policy, resolver)
            endpoint = Endpoint(target, address, {**sent, "host": target.host_header})
            with self._request(endpoint, deadline) as (raw, watch):
                location = raw.headers.get("location")
                if raw.status in REDIRECT_STATUSES and location:
                    # The redirect's body is never read: leaving this block
                    # closes the connection, where draining it could take any
                    # amount of time a hostile server chooses.
                    if hop == self._max_redirects:
                        raise PermanentFetchError(
                            "too_many_redirects",
                            f"more than {self._max_redirects} redirects",
                            url,
                        )
                    current = urljoin(target.url, location.strip())
                    continue
                yield endpoint, raw, watch
                return

    @contextlib.contextmanager
    def open(
        self,
        url: str,
        headers: Mapping[str, str] | None = None,
        max_bytes: int | None = None,
        *,
        deadline: float | None = None,
    ) -> Iterator[Response]:
        """Stream a 2xx answer that is the whole object as stored; else raise a ``FetchError``.

        The whole object, unencoded, is asked for and must be what comes: a
        content coding (``unsupported_encoding``), a part (``partial_content``:
        a 206 or a ``Content-Range``) or a ``Content-Length`` that is not ASCII
        digits (``invalid_content_length``) is refused, all permanent, before
        the body is read. A declared ``Content-Length`` over ``max_bytes`` is
        refused before the body is read; an undeclared one is refused as soon
        as the cap is passed. ``deadline`` (a ``time.monotonic()`` value) ends
        the whole fetch, redirects and body included, with
        ``TransientFetchError('deadline')``; it is never later than the
        client's total timeout from now.
        """
        with self._exchange(url, headers, "identity", self.deadline(deadline)) as (
            endpoint,
            raw,
            watch,
        ):
            target_url = endpoint.target.url
            if not 200 <= raw.status < 300:
                raise _status_error(raw.status, target_url)
            part = raw.headers.get("content-range")
            if raw.status == 206 or part is not None:
                raise PermanentFetchError(
                    "partial_content",
                    f"HTTP {raw.status} with content-range {(part or '')[:80]!r} "
                    "to a request for the whole object",
                    target_url,
                    raw.status,
                )
            response = Response(endpoint, raw, max_bytes, watch)
            declared = response.content_length
            if max_bytes is not None and declared is not None and declared > max_bytes:
                raise PermanentFetchError(
                    "too_large",
                    f"declared size {declared} is over the {max_bytes}-byte cap",
                    target_url,
                )
            yield response

    @contextlib.contextmanager
    def open_range(
        self, source: Endpoint, start: int, end: int, if_range: str, *, deadline: float
    ) -> Iterator[Response]:
        """Bytes ``[start, end)`` of what ``source`` answered, on a connection of its own.

        The request goes to the address checked for ``source`` (never looked
        up again) with the headers sent there, plus ``Range`` and ``If-Range``;
        no redirect is followed. The answer comes back whatever its status
        (the caller expects 206) and may carry at most ``end - start`` bytes;
        one in a content coding is refused (``unsupported_encoding``), as by ``open``.
        """
        headers = {
            **source.headers,
            "accept-encoding": "identity",
            "range": f"bytes={start}-{end - 1}",
            "if-range": if_range,
        }
        endpoint = Endpoint(source.target, source.address, headers)
        with self._request(endpoint, self.deadline(deadline)) as (raw, watch):
            yield Response(source, raw, end - start, watch)

    def get_text(
        self,
        url: str,
        headers: Mapping[str, str] | None = None,
        max_bytes: int = DEFAULT_TEXT_MAX_BYTES,
        *,
        deadline: float | None = None,
    ) -> tuple[int, str]:
        """The final status code and body text, whatever the status.

        For callers that give status codes their own meaning (the poller reads
        a 404 as "not known yet"); refused URLs, transport failures and the
        deadline still raise ``FetchError``.
        """
        with self._exchange(url, headers, "gzip", self.deadline(deadline)) as (
            endpoint,
            raw,
            watch,
        ):
            body = Response(endpoint, raw, max_bytes, watch, decode=True).read()
            return raw.status, body.decode("utf-8", errors="replace")
