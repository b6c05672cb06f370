"""Which URLs from outside may be fetched: the SSRF guard's settings, and hosts compared one way."""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

from sume.core.names import Env
from sume.core.settings import flag, names


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
