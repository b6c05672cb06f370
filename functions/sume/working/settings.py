"""The worker's settings, read from its environment."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from sume.core.names import Env
from sume.core.settings import (
    LAMBDA_MAX_SECONDS,
    TableSettings,
    integer,
    optional,
    required,
    required_integer,
    retention_days,
    seconds,
)
from sume.net.policy import UrlPolicy

MiB = 1024**2
# S3's limits: an object of at most 5 TiB, multipart parts of 5 MiB..5 GiB.
MAX_OBJECT_BYTES = 5 * 1024**4
MIN_PART_BYTES, MAX_PART_BYTES = 5 * MiB, 5 * 1024**3
# SQS's: maxReceiveCount 1..1000, a visibility timeout of at most 12 hours, a
# retention of 60 s..14 days.
MAX_RECEIVE_COUNT = 1000
MAX_VISIBILITY_SECONDS = 12 * 3600
MIN_RETENTION_SECONDS, MAX_RETENTION_SECONDS = 60, 14 * 24 * 3600
# A copy holds up to ARTIFACT_CONNECTIONS + ARTIFACT_UPLOADS parts in memory.
MAX_COPY_STREAMS = 16


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
        max_receives = required_integer(env, Env.MAX_RECEIVES, 1, MAX_RECEIVE_COUNT)
        return cls(
            table=TableSettings.table_from(env),
            payloads_bucket_name=optional(env, Env.PAYLOADS_BUCKET_NAME),
            artifacts_bucket_name=required(env, Env.ARTIFACTS_BUCKET_NAME),
            event_bus_name=required(env, Env.EVENT_BUS_NAME),
            url_policy=UrlPolicy.from_env(env, Env.ARTIFACT_ALLOWED_HOSTS),
            max_artifact_bytes=integer(
                env, Env.MAX_ARTIFACT_BYTES, 5 * 1024**3, 1, MAX_OBJECT_BYTES
            ),
            retention_days=retention_days(env),
            lease_seconds=integer(env, Env.LEASE_SECONDS, 900, 1, MAX_VISIBILITY_SECONDS),
            connect_timeout_seconds=seconds(
                env, Env.HTTP_CONNECT_TIMEOUT_SECONDS, 5, LAMBDA_MAX_SECONDS
            ),
            read_timeout_seconds=seconds(
                env, Env.HTTP_READ_TIMEOUT_SECONDS, 30, LAMBDA_MAX_SECONDS
            ),
            # One artifact download at most; within an invocation every copy
            # also ends time_reserve_seconds before the function's deadline.
            total_timeout_seconds=seconds(
                env, Env.HTTP_TOTAL_TIMEOUT_SECONDS, 270, LAMBDA_MAX_SECONDS
            ),
            # Covers what follows the last copy: its final part's upload, the
            # announcement and the finish, or releasing the claim.
            time_reserve_seconds=seconds(
                env, Env.TIME_BUDGET_MARGIN_SECONDS, 20, LAMBDA_MAX_SECONDS
            ),
            # The jobs queue's: its maxReceiveCount, visibility timeout and DLQ
            # retention, set by the stack from one place (infra/spec.py).
            max_receives=max_receives,
            queue_retry_seconds=required_integer(
                env, Env.QUEUE_RETRY_SECONDS, 1, MAX_VISIBILITY_SECONDS
            ),
            dlq_retention_seconds=required_integer(
                env, Env.DLQ_RETENTION_SECONDS, MIN_RETENTION_SECONDS, MAX_RETENTION_SECONDS
            ),
            # As many as the message's receives: a job whose work keeps failing
            # ends as a processing error before its message could reach the DLQ.
            # At least one: 0 would give up every job before its first attempt.
            max_attempts=integer(env, Env.MAX_ATTEMPTS, max_receives, 1, MAX_RECEIVE_COUNT),
            # S3 refuses multipart parts under 5 MiB (except the last).
            part_size_bytes=integer(
                env, Env.ARTIFACT_PART_BYTES, 8 * MiB, MIN_PART_BYTES, MAX_PART_BYTES
            ),
            # Ranged connections per artifact when the origin offers ranges (1:
            # never ranged) and parts uploaded at once; a copy holds at most
            # their sum in parts (sume.working.transfer).
            artifact_connections=integer(env, Env.ARTIFACT_CONNECTIONS, 4, 1, MAX_COPY_STREAMS),
            artifact_uploads=integer(env, Env.ARTIFACT_UPLOADS, 4, 1, MAX_COPY_STREAMS),
            # The slowest copy planned for: a declared size that would not end
            # in the time left at this rate is not started (infra/spec.py has
            # the arithmetic that ties it to MAX_ARTIFACT_BYTES and the timeouts).
            # At most 10 GB/s, beyond any one function's network.
            artifact_planned_bytes_per_second=integer(
                env, Env.ARTIFACT_PLANNED_BYTES_PER_SECOND, 20_000_000, 1, 10**10
            ),
        )
