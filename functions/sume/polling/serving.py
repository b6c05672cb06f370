"""The ``Serving`` gauge of a two-region deployment: whether Sume's deliveries reach this region.

Route 53 sends every delivery to one region, so the other verifies none, and
its silence alarms would read that as Sume gone quiet. Each scheduled tick
asks the failover domain's ``GET /health``, as Sume's deliveries reach it, and
reads which region answered (the ``region`` of its 200); the silence alarms
page only in a region whose gauge said so all their window
(docs/operations.md, "What to watch"). With no usable answer (both regions
failing their checks, or the domain unreachable from here) Route 53 answers
with the primary's record, so the primary counts itself serving and the
secondary not.
"""

from __future__ import annotations

import http.client
import json
import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

from sume.core.errors import ConfigurationError
from sume.core.names import HEALTH_REGION, Env

# Route 53 wants an answer within 2 s of connecting; so does the tick.
TIMEOUT_SECONDS: Final = 2.0
# {"status": "ok", "region": "..."}: anything longer is not the health route's.
MAX_ANSWER_BYTES: Final = 1024


@dataclass(frozen=True)
class ServingSettings:
    url: str
    region: str
    primary_region: str

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> ServingSettings | None:
        """None in a single-region stage (no failover domain)."""
        url = env.get(Env.FAILOVER_HEALTH_URL, "").strip()
        if not url:
            return None
        parts = urlsplit(url)
        if parts.scheme not in ("https", "http") or not parts.hostname:
            raise ConfigurationError(f"{Env.FAILOVER_HEALTH_URL} is not an http(s) URL")
        region = env.get("AWS_REGION", "").strip()
        primary = env.get(Env.FAILOVER_PRIMARY_REGION, "").strip()
        if not region or not primary:
            raise ConfigurationError(f"AWS_REGION and {Env.FAILOVER_PRIMARY_REGION} must be set")
        return cls(url, region, primary)


class ServingProbe:
    def __init__(self, settings: ServingSettings, timeout: float = TIMEOUT_SECONDS) -> None:
        self._settings = settings
        self._timeout = timeout

    def serving(self) -> bool:
        """Whether the failover domain's health route answered from this region."""
        answered = self.answered_by()
        if answered is None:
            return self._settings.region == self._settings.primary_region
        return answered == self._settings.region

    def answered_by(self) -> str | None:
        """The region whose receiver answered 200, or None (no usable answer)."""
        parts = urlsplit(self._settings.url)
        host, port = parts.hostname or "", parts.port
        connection = (
            http.client.HTTPSConnection(
                host, port, timeout=self._timeout, context=ssl.create_default_context()
            )
            if parts.scheme == "https"
            else http.client.HTTPConnection(host, port, timeout=self._timeout)
        )
        try:
            connection.request("GET", parts.path or "/", headers={"accept": "application/json"})
            response = connection.getresponse()
            raw = response.read(MAX_ANSWER_BYTES + 1)
            if response.status != 200 or len(raw) > MAX_ANSWER_BYTES:
                return None
            answer = json.loads(raw)
        except (OSError, http.client.HTTPException, ValueError):
            return None
        finally:
            connection.close()
        region = answer.get(HEALTH_REGION) if isinstance(answer, dict) else None
        return region if isinstance(region, str) and region else None
