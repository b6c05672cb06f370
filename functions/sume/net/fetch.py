"""HTTP GET of URLs that come from outside (artifact links, status URLs), SSRF-safe.

Every hop of a request (the first URL and each redirect target) passes the
URL rule of ``sume.net.policy`` before any byte is sent.

The connection then goes to the address that was checked, not to a second
lookup of the name, so a DNS answer that changes between check and connect
(rebinding) cannot redirect it; the ``Host`` header, TLS SNI and certificate
check still use the hostname. Redirects are followed by hand, a bounded number
of times, each target checked like the first URL.

Every fetch has a wall-clock deadline besides its per-read timeout: a server
that trickles one byte at a time never trips a read timeout, so a watchdog
ends the exchange at the deadline (``sume.net.watchdog``). A redirect's body is
never read, and a compressed answer is decompressed by ``sume.net.response``, never by urllib3,
with our own bound on the decompressed size.

An artifact (``SafeHttp.open``) is asked for whole and as it is stored
(``accept-encoding: identity``), and the answer must be just that: a content
coding, a ``206`` or ``Content-Range``, or a ``Content-Length`` that is not
ASCII digits is refused before the body is read, so no other bytes (a prefix,
a compressed copy) are ever stored as the artifact.

Errors (``sume.net.errors``) say whether retrying can help: ``PermanentFetchError``
(refused URL, 4xx, over the size cap) or ``TransientFetchError`` (5xx, 429,
timeouts, the deadline, connection and DNS failures).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Mapping
from typing import Protocol
from urllib.parse import urljoin

import urllib3
from botocore.httpsession import get_cert_path
from urllib3.connection import HTTPConnection, HTTPSConnection

from sume.net.errors import PermanentFetchError, deadline_error, status_error
from sume.net.policy import Resolver, Target, UrlPolicy, check_url, resolve_checked, system_resolver
from sume.net.response import Endpoint, Response
from sume.net.watchdog import Watchdog, resolver_within, transport_errors

REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
DEFAULT_MAX_REDIRECTS = 5
DEFAULT_TEXT_MAX_BYTES = 1024 * 1024
DEFAULT_TOTAL_TIMEOUT_SECONDS = 60.0
USER_AGENT = "sume-webhooks/1"


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
    ) -> Iterator[tuple[urllib3.BaseHTTPResponse, Watchdog]]:
        """One GET to ``endpoint``; the answer's body is not read, and closed on exit."""
        target = endpoint.target
        left = deadline - time.monotonic()
        if left <= 0:
            raise deadline_error(target.url)
        conn = self._connection(target, endpoint.address, min(self._connect_timeout, left))
        watch = Watchdog(deadline)
        raw: urllib3.BaseHTTPResponse | None = None
        try:
            with transport_errors(target.url, watch):
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
    ) -> Iterator[tuple[Endpoint, urllib3.BaseHTTPResponse, Watchdog]]:
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
            resolver = resolver_within(self._resolver, deadline, target.url)
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
                raise status_error(raw.status, target_url)
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
