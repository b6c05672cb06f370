"""Which URLs from outside may be fetched (the SSRF rule): the policy, the URL check, the addresses.

A URL in a webhook or a status answer is attacker-influenced: fetched blindly
it can reach the instance metadata service, the VPC or localhost. So every hop
of a request (the first URL and each redirect target) is checked before any
byte is sent:

1. scheme ``https`` (``http`` only when the policy allows it, for local use);
   no user info in the URL (``check_url``);
2. host on the allow-list, when one is configured (``check_url``);
3. every address the host resolves to is public (no private, loopback,
   link-local, shared, reserved, multicast or unspecified address, including
   one embedded in an IPv6 mapping) unless the policy allows private hosts;
   metadata endpoints are refused whatever the policy says (``resolve_checked``).

The rule needs no HTTP client: the registry checks a status_url with it
before any write, and ``sume.net.fetch`` applies it to every hop.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

from sume.core.names import Env
from sume.core.settings import flag, names
from sume.net.errors import PermanentFetchError, RefusedUrl, TransientFetchError

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


@dataclass(frozen=True)
class UrlPolicy:
    """Which artifact and status URLs may be fetched (SSRF guard)."""

    allow_http: bool
    allow_private_hosts: bool
    allowed_hosts: tuple[str, ...]

    @classmethod
    def from_env(cls, env: Mapping[str, str], hosts_var: str) -> UrlPolicy:
        return cls(
            allow_http=flag(env, Env.ALLOW_HTTP_URLS),
            allow_private_hosts=flag(env, Env.ALLOW_PRIVATE_HOSTS),
            allowed_hosts=names(env, hosts_var),
        )


# What a deployed stage allows when nothing is set: https, public hosts, any host.
HTTPS_ONLY: Final = UrlPolicy(allow_http=False, allow_private_hosts=False, allowed_hosts=())


def normal_host(host: str) -> str:
    """``host`` as every rule compares it: no trailing dot, lowercase IDNA; an IP as it is.

    Raises ``UnicodeError`` when it is not a valid domain name.
    """
    host = host.rstrip(".")
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return host.encode("idna").decode("ascii").lower()
    return host


def url_host(url: str) -> str | None:
    """``url``'s host as ``normal_host`` gives it; None when it has no usable one."""
    try:
        host = urlsplit(url).hostname
        return normal_host(host) if host else None
    except (ValueError, UnicodeError):
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


def host_listed(url: str, allowed: Sequence[str]) -> bool:
    """Whether ``url``'s host is on ``allowed``; an empty list lists no host at all."""
    host = url_host(url) if allowed else None
    return host is not None and host_allowed(host, allowed)


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
