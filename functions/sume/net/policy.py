"""Which URLs from outside may be fetched: the SSRF guard's settings."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

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
