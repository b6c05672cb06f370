"""Registering a job an application submitted to Sume, so the poller watches it.

Call ``expect`` right after Sume accepted the job. The job item is created as
``awaiting`` with its ``status_url`` and the first status poll due after
``POLL_INITIAL_SECONDS``. If the job's webhook arrives first (or later), the
receiver's conditional write completes this same item, keeping ``metadata``.
The checks and the write are ``sume.polling.registering``'s; its ``Registry`` and
``InvalidRegistration`` are named here too, as docs/poller.md documents them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sume.core import aws
from sume.polling.compose import build_registry
from sume.polling.registering import InvalidRegistration, Registry
from sume.polling.settings import RegistrySettings

__all__ = ["InvalidRegistration", "Registry", "expect"]


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
            It must pass the poller's URL rule (``sume.net.policy.check_url``:
            https unless ``ALLOW_HTTP_URLS``, no user info, its host on
            ``STATUS_ALLOWED_HOSTS`` when set); the poller checks again at each
            poll, with the addresses the host resolves to.
        metadata: optional JSON object kept on the job item as ``metadata``
            (e.g. which user or order the job belongs to); at most 64 KiB as
            JSON, and only what DynamoDB stores exactly (``sume.core.bounded.storable``):
            string keys, not empty; at most 32 levels, the object itself the
            first; numbers of at most 38 significant digits between 1E-130 and
            9.99...E+125 in magnitude, or zero. Ints and Decimals are kept to the
            last digit; a float is kept as its shortest repr (``0.1`` as 0.1).
        table_name: the jobs table; defaults to ``JOBS_TABLE_NAME``.
        dynamodb: a boto3 DynamoDB client; defaults to one per process, which
            honours ``AWS_ENDPOINT_URL`` (local stack).

    Returns:
        True when the job is now registered (state ``awaiting``, first poll after
        ``POLL_INITIAL_SECONDS``, default 900); False when the job was already known
        (received, processed, or registered before): then nothing changed.

    Raises:
        InvalidRegistration: a ``ValueError`` for a registration that can never
            be stored, so calling again cannot help: a job id ``sume.core.ids.check_job_id``
            refuses or metadata that breaks a rule above (``reason``
            ``invalid_registration``), a status_url the poller would refuse
            (``reason`` ``invalid_url``, ``refused_scheme`` or ``refused_host``,
            its codes), nothing written; or a
            write DynamoDB refused as invalid (``reason`` ``refused_by_dynamodb``).
        botocore.exceptions.ClientError / BotoCoreError: DynamoDB failed (unavailable,
            throttled); calling again is safe.
        sume.core.errors.ConfigurationError: the environment is wrong (no
            ``JOBS_TABLE_NAME`` and no ``table_name``, a setting that is not a
            number); nothing was sent.
    """
    settings = RegistrySettings.from_env(table_name=table_name)
    clients = aws.client if dynamodb is None else lambda _service, patient=False: dynamodb
    return build_registry(settings, clients).expect(job_id, status_url, metadata)
