"""Registering a job an application submitted to Sume, so the poller watches it.

Call ``expect`` right after Sume accepted the job. The job item is created as
``awaiting`` with its ``status_url`` and the first status poll due after
``POLL_INITIAL_SECONDS``. If the job's webhook arrives first (or later), the
receiver's conditional write completes this same item, keeping ``metadata``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal
from typing import Any
from urllib.parse import urlsplit

from sume.core.ids import check_job_id
from sume.polling.settings import RegistrySettings
from sume.polling.status import host_listed
from sume.store.jobs import JobsTable

# DynamoDB caps an item at 400 KB and an inline event body may take 256 KiB.
MAX_METADATA_BYTES = 64 * 1024
MAX_URL_CHARS = 2048


def _checked_url(status_url: str, allowed_hosts: Sequence[str]) -> str:
    if not isinstance(status_url, str) or len(status_url) > MAX_URL_CHARS:
        raise ValueError(f"status_url must be a string of at most {MAX_URL_CHARS} characters")
    status_url = status_url.strip()
    parts = urlsplit(status_url)
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise ValueError("status_url must be an absolute http(s) URL")
    # The poller would refuse it on every poll until the job is lost: say so now.
    if allowed_hosts and not host_listed(status_url, allowed_hosts):
        raise ValueError(
            f"status_url host {parts.hostname!r} is not on STATUS_ALLOWED_HOSTS "
            f"({', '.join(allowed_hosts)})"
        )
    return status_url


def _checked_metadata(metadata: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if metadata is None:
        return None
    if not isinstance(metadata, Mapping):
        raise ValueError("metadata must be a JSON object")
    try:
        text = json.dumps(dict(metadata), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"metadata must be JSON-serialisable: {exc}") from None
    if len(text.encode("utf-8")) > MAX_METADATA_BYTES:
        raise ValueError(f"metadata must be at most {MAX_METADATA_BYTES} bytes as JSON")
    # DynamoDB numbers are Decimals; a JSON round trip also drops tuples and
    # other types DynamoDB would store differently than the caller expects.
    converted: dict[str, Any] = json.loads(text, parse_float=Decimal)
    return converted


class Registry:
    def __init__(
        self,
        jobs: JobsTable,
        first_poll_after: int,
        clock: Callable[[], float] = time.time,
        allowed_hosts: Sequence[str] = (),
    ) -> None:
        self._jobs = jobs
        self._first_poll_after = first_poll_after
        self._clock = clock
        self._allowed_hosts = tuple(allowed_hosts)

    def expect(
        self, job_id: str, status_url: str, metadata: Mapping[str, Any] | None = None
    ) -> bool:
        """See ``sume.polling.registry.expect``."""
        job_id = check_job_id(job_id)
        status_url = _checked_url(status_url, self._allowed_hosts)
        checked = _checked_metadata(metadata)
        now = int(self._clock())
        return self._jobs.register(
            job_id, status_url, checked, now=now, first_poll_at=now + self._first_poll_after
        )


def expect(
    job_id: str,
    status_url: str,
    metadata: Mapping[str, Any] | None = None,
    *,
    table_name: str | None = None,
    dynamodb: Any = None,
) -> bool:
    """Watch a submitted Sume job through its ``status_url`` until its event arrives.

    Args:
        job_id: Sume's job id (the only idempotency key).
        status_url: the job's absolute ``https://`` status URL, as Sume returned it.
            When ``STATUS_ALLOWED_HOSTS`` is set, its host must be on it (the
            poller checks again at each poll, with the rest of its URL rules:
            no private addresses, https only).
        metadata: optional JSON object kept on the job item as ``metadata``
            (e.g. which user or order the job belongs to); at most 64 KiB.
        table_name: the jobs table; defaults to ``JOBS_TABLE_NAME``.
        dynamodb: a boto3 DynamoDB client; defaults to one per process, which
            honours ``AWS_ENDPOINT_URL`` (local stack).

    Returns:
        True when the job is now registered (state ``awaiting``, first poll after
        ``POLL_INITIAL_SECONDS``, default 900); False when the job was already known
        (received, processed, or registered before): then nothing changed.

    Raises:
        ValueError: a job id ``sume.core.ids.check_job_id`` refuses (``InvalidJobId``),
            a URL that is not absolute http(s) or whose host is not on
            ``STATUS_ALLOWED_HOSTS``, metadata that is not a JSON object.
        botocore.exceptions.ClientError / BotoCoreError: DynamoDB failed; calling
            again is safe.
    """
    # Here, not at the top: the composition imports this module.
    from sume.core import aws
    from sume.polling.compose import build_registry

    settings = RegistrySettings.from_env(table_name=table_name)
    clients = aws.client if dynamodb is None else lambda _service, patient=False: dynamodb
    return build_registry(settings, clients).expect(job_id, status_url, metadata)
