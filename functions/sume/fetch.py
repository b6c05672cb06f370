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

Errors say whether retrying can help: ``PermanentFetchError`` (refused URL,
4xx, over the size cap) or ``TransientFetchError`` (5xx, 429, timeouts,
connection and DNS failures).
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import socket
import ssl
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar
from urllib.parse import urljoin, urlsplit

import urllib3
from botocore.httpsession import get_cert_path
from urllib3.exceptions import (
    HTTPError,
    LocationParseError,
    LocationValueError,
    NewConnectionError,
    ProtocolError,
)
from urllib3.exceptions import SSLError as Urllib3SSLError
from urllib3.exceptions import TimeoutError as Urllib3TimeoutError
from urllib3.util.ssl_match_hostname import CertificateError

from sume.settings import UrlPolicy

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
DEFAULT_JSON_MAX_BYTES = 1024 * 1024
CHUNK_BYTES = 64 * 1024
USER_AGENT = "sume-webhooks/1"


class FetchError(Exception):
    """A fetch that did not produce a usable answer; ``code`` is machine-readable."""

    permanent: ClassVar[bool] = False

    def __init__(self, code: str, message: str, url: str, status: int | None = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.url = url
        self.status = status

    def as_dict(self) -> dict[str, str]:
        return {"code": self.code, "message": self.message, "url": self.url}


class PermanentFetchError(FetchError):
    """Retrying cannot help: refused URL, 4xx, answer over the size cap."""

    permanent = True


class TransientFetchError(FetchError):
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


def host_allowed(host: str, allowed: Sequence[str]) -> bool:
    """Exact names match themselves; ``*.example.com`` matches its subdomains only."""
    if not allowed:
        return True
    for entry in allowed:
        if entry.startswith("*."):
            if host.endswith(entry[1:]) and host != entry[2:]:
                return True
        elif host == entry:
            return True
    return False


def check_url(url: str, policy: UrlPolicy) -> Target:
    """Check everything about ``url`` that needs no DNS lookup; raise ``RefusedUrl``."""
    if not isinstance(url, str) or not url or len(url) > 8192:
        raise RefusedUrl("invalid_url", "not a usable URL", str(url)[:200])
    if any(c.isspace() or ord(c) < 0x20 or ord(c) == 0x7F or c == "\\" for c in url):
        raise RefusedUrl("invalid_url", "URL contains whitespace or control characters", url)
    try:
        parts = urlsplit(url)
        port = parts.port
        host = parts.hostname
    except ValueError as exc:
        raise RefusedUrl("invalid_url", f"cannot parse URL: {exc}", url) from None
    scheme = parts.scheme.lower()
    if scheme not in ("https", "http"):
        raise RefusedUrl("refused_scheme", f"scheme {scheme!r} is not allowed", url)
    if scheme == "http" and not policy.allow_http:
        raise RefusedUrl("refused_scheme", "plain http is not allowed (https only)", url)
    if parts.username is not None or parts.password is not None:
        raise RefusedUrl("invalid_url", "URLs with user info are not allowed", url)
    if not host:
        raise RefusedUrl("invalid_url", "URL has no host", url)
    host = host.rstrip(".")
    if _literal_ip(host) is None:
        try:
            host = host.encode("idna").decode("ascii").lower()
        except UnicodeError:
            raise RefusedUrl("invalid_url", "host is not a valid domain name", url) from None
    if not host_allowed(host, policy.allowed_hosts):
        raise RefusedUrl("refused_host", f"host {host!r} is not on the allow-list", url)
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
    message = f"HTTP {status} from {url}"
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


@contextlib.contextmanager
def _transport_errors(url: str) -> Iterator[None]:
    """urllib3's exceptions, classified."""
    try:
        yield
    except FetchError:
        raise
    except NewConnectionError as exc:
        # Checked before timeouts: urllib3 makes it a subclass of ConnectTimeoutError.
        raise TransientFetchError("connection_error", str(exc), url) from None
    except (Urllib3TimeoutError, TimeoutError) as exc:
        raise TransientFetchError("timeout", f"timed out: {exc}", url) from None
    except Urllib3SSLError as exc:
        # A certificate that does not match the host will not start matching.
        if _certificate_rejected(exc):
            raise PermanentFetchError("tls_certificate", str(exc), url) from None
        raise TransientFetchError("tls_error", str(exc), url) from None
    except (LocationParseError, LocationValueError) as exc:
        raise RefusedUrl("invalid_url", str(exc), url) from None
    except (ProtocolError, HTTPError, OSError) as exc:
        raise TransientFetchError("connection_error", str(exc), url) from None


class Response:
    """A 2xx answer being streamed; the byte cap is enforced while reading."""

    def __init__(self, target: Target, raw: urllib3.BaseHTTPResponse, max_bytes: int | None):
        self.url = target.url
        self.status = raw.status
        self.headers: Mapping[str, str] = raw.headers
        self._raw = raw
        self._max = max_bytes

    @property
    def content_type(self) -> str | None:
        value = self.headers.get("content-type")
        return value.strip() if value else None

    @property
    def content_length(self) -> int | None:
        value = self.headers.get("content-length", "").strip()
        return int(value) if value.isdigit() else None

    def iter_bytes(self, chunk_bytes: int = CHUNK_BYTES) -> Iterator[bytes]:
        """The body in chunks; raises ``PermanentFetchError('too_large')`` past the cap."""
        seen = 0
        with _transport_errors(self.url):
            for chunk in self._raw.stream(chunk_bytes):
                seen += len(chunk)
                if self._max is not None and seen > self._max:
                    raise PermanentFetchError(
                        "too_large", f"answer is over the {self._max}-byte cap", self.url
                    )
                yield chunk

    def read(self) -> bytes:
        return b"".join(self.iter_bytes())


class SafeHttp:
    """GET with the URL policy applied to every hop. Thread-safe; holds no pools."""

    def __init__(
        self,
        policy: UrlPolicy,
        connect_timeout: float,
        read_timeout: float,
        *,
        max_redirects: int = DEFAULT_MAX_REDIRECTS,
        resolver: Resolver = system_resolver,
        ca_certs: str | None = None,
    ) -> None:
        self._policy = policy
        self._timeout = urllib3.Timeout(connect=connect_timeout, read=read_timeout)
        self._max_redirects = max_redirects
        self._resolver = resolver
        # The CA bundle botocore itself uses, so TLS trust in Lambda does not
        # depend on the runtime image's system store.
        self._ca_certs = ca_certs or get_cert_path(True)

    def _pool(self, target: Target, address: str) -> urllib3.HTTPConnectionPool:
        if target.scheme == "https":
            return urllib3.HTTPSConnectionPool(
                address,
                target.port,
                maxsize=1,
                retries=False,
                timeout=self._timeout,
                cert_reqs="CERT_REQUIRED",
                ca_certs=self._ca_certs,
                assert_hostname=target.host,
                server_hostname=target.host,
            )
        return urllib3.HTTPConnectionPool(
            address, target.port, maxsize=1, retries=False, timeout=self._timeout
        )

    @contextlib.contextmanager
    def _exchange(
        self, url: str, headers: Mapping[str, str] | None, decode_content: bool
    ) -> Iterator[tuple[Target, urllib3.BaseHTTPResponse]]:
        """The final (non-redirect) answer, its body not yet read."""
        sent = {k.lower(): v for k, v in (headers or {}).items() if k.lower() != "host"}
        sent.setdefault("user-agent", USER_AGENT)
        if not decode_content:
            sent.setdefault("accept-encoding", "identity")
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
            address = resolve_checked(target, self._policy, self._resolver)
            pool = self._pool(target, address)
            try:
                with _transport_errors(target.url):
                    raw = pool.urlopen(
                        "GET",
                        target.path,
                        headers={**sent, "host": target.host_header},
                        redirect=False,
                        retries=False,
                        preload_content=False,
                        decode_content=decode_content,
                        assert_same_host=False,
                    )
                location = raw.headers.get("location")
                if raw.status in REDIRECT_STATUSES and location:
                    raw.drain_conn()
                    raw.release_conn()
                    if hop == self._max_redirects:
                        raise PermanentFetchError(
                            "too_many_redirects",
                            f"more than {self._max_redirects} redirects",
                            url,
                        )
                    current = urljoin(target.url, location.strip())
                    continue
                try:
                    yield target, raw
                finally:
                    raw.release_conn()
                return
            finally:
                pool.close()

    @contextlib.contextmanager
    def open(
        self,
        url: str,
        headers: Mapping[str, str] | None = None,
        max_bytes: int | None = None,
        decode_content: bool = False,
    ) -> Iterator[Response]:
        """Stream a 2xx answer; any other final status raises a ``FetchError``.

        A declared ``Content-Length`` over ``max_bytes`` is refused before the
        body is read; an undeclared one is refused as soon as the cap is passed.
        """
        with self._exchange(url, headers, decode_content) as (target, raw):
            if not 200 <= raw.status < 300:
                raise _status_error(raw.status, target.url)
            response = Response(target, raw, max_bytes)
            declared = response.content_length
            if max_bytes is not None and declared is not None and declared > max_bytes:
                raise PermanentFetchError(
                    "too_large",
                    f"declared size {declared} is over the {max_bytes}-byte cap",
                    target.url,
                )
            yield response

    def get_text(
        self,
        url: str,
        headers: Mapping[str, str] | None = None,
        max_bytes: int = DEFAULT_JSON_MAX_BYTES,
    ) -> tuple[int, str]:
        """The final status code and body text, whatever the status.

        For callers that give status codes their own meaning (the poller reads
        a 404 as "not known yet"); refused URLs and transport failures still
        raise ``FetchError``.
        """
        with self._exchange(url, headers, decode_content=True) as (target, raw):
            body = Response(target, raw, max_bytes).read()
            return raw.status, body.decode("utf-8", errors="replace")

    def get_json(
        self,
        url: str,
        headers: Mapping[str, str] | None = None,
        max_bytes: int = DEFAULT_JSON_MAX_BYTES,
    ) -> Any:
        """A 2xx JSON answer, parsed; non-JSON answers raise ``PermanentFetchError``."""
        sent = {"accept": "application/json", **(headers or {})}
        with self.open(url, sent, max_bytes, decode_content=True) as response:
            body = response.read()
        try:
            return json.loads(body)
        except ValueError:
            raise PermanentFetchError("invalid_json", "answer is not JSON", url) from None
