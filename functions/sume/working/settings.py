"""The worker's settings, read from its environment."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from sume.core.names import Env
from sume.core.settings import TableSettings, integer, optional, required, required_integer, seconds
from sume.net.policy import UrlPolicy


@dataclass(frozen=True)
class WorkerSettings:
    table: TableSettings
    payloads_bucket_name: str | None
    artifacts_bucket_name: str
    event_bus_name: str
    url_policy: UrlPolicy
    max_artifact_bytes: int
    retention_days: int
    lease_seconds: int
    connect_timeout_seconds: float
    read_timeout_seconds: float
    max_receives: int
    queue_retry_seconds: int
    dlq_retention_seconds: int
    max_attempts: int
    part_size_bytes: int
    total_timeout_seconds: float
    time_reserve_seconds: float
    artifact_connections: int
    artifact_uploads: int
    artifact_planned_bytes_per_second: int

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> WorkerSettings:
        return cls(
            table=TableSettings.table_from(env),
            payloads_bucket_name=optional(env, Env.PAYLOADS_BUCKET_NAME),
            artifacts_bucket_name=required(env, Env.ARTIFACTS_BUCKET_NAME),
            event_bus_name=required(env, Env.EVENT_BUS_NAME),
            url_policy=UrlPolicy.from_env(env, Env.ARTIFACT_ALLOWED_HOSTS),
            max_artifact_bytes=integer(env, Env.MAX_ARTIFACT_BYTES, 5 * 1024**3, minimum=1),
            retention_days=integer(env, Env.RETENTION_DAYS, 35, minimum=1),
            lease_seconds=integer(env, Env.LEASE_SECONDS, 900, minimum=1),
            connect_timeout_seconds=seconds(env, Env.HTTP_CONNECT_TIMEOUT_SECONDS, 5),
            read_timeout_seconds=seconds(env, Env.HTTP_READ_TIMEOUT_SECONDS, 30),
            # One artifact download at most; within an invocation every copy
            # also ends time_reserve_seconds before the function's deadline.
            total_timeout_seconds=seconds(env, Env.HTTP_TOTAL_TIMEOUT_SECONDS, 270),
            # Covers what follows the last copy: its final part's upload, the
            # announcement and the finish, or releasing the claim.
            time_reserve_seconds=seconds(env, Env.TIME_BUDGET_MARGIN_SECONDS, 20),
            # The jobs queue's: its maxReceiveCount, visibility timeout and DLQ
            # retention, set by the stack from one place (infra/spec.py).
            max_receives=required_integer(env, Env.MAX_RECEIVES),
            queue_retry_seconds=required_integer(env, Env.QUEUE_RETRY_SECONDS),
            dlq_retention_seconds=required_integer(env, Env.DLQ_RETENTION_SECONDS),
            # As many as the message's receives: a job whose work keeps failing
            # ends as a processing error before its message could reach the DLQ.
            max_attempts=integer(env, Env.MAX_ATTEMPTS, required_integer(env, Env.MAX_RECEIVES)),
            # S3 refuses multipart parts under 5 MiB (except the last).
            part_size_bytes=integer(env, Env.ARTIFACT_PART_BYTES, 8 * 1024**2, minimum=5 * 1024**2),
            # Ranged connections per artifact when the origin offers ranges (1:
            # never ranged) and parts uploaded at once; a copy holds at most
            # their sum in parts (sume.working.transfer).
            artifact_connections=integer(env, Env.ARTIFACT_CONNECTIONS, 4, minimum=1),
            artifact_uploads=integer(env, Env.ARTIFACT_UPLOADS, 4, minimum=1),
            # The slowest copy planned for: a declared size that would not end
            # in the time left at this rate is not started (infra/spec.py has
            # the arithmetic that ties it to MAX_ARTIFACT_BYTES and the timeouts).
            artifact_planned_bytes_per_second=integer(
                env, Env.ARTIFACT_PLANNED_BYTES_PER_SECOND, 20_000_000, minimum=1
            ),
        )
