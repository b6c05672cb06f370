"""The worker's service, wired from its settings, built once per container."""

from __future__ import annotations

import time

from sume.core import aws
from sume.core.aws import Clients
from sume.core.runtime import Clock, per_container
from sume.net.fetch import SafeHttp
from sume.store.compose import build_jobs
from sume.store.payloads import PayloadStore
from sume.working.announce import Announcer
from sume.working.artifacts import ArtifactStore
from sume.working.policy import RetryPolicy
from sume.working.processing import JobProcessor
from sume.working.settings import WorkerSettings


def build_worker(
    settings: WorkerSettings, clients: Clients = aws.client, clock: Clock = time.time
) -> JobProcessor:
    s3 = clients("s3", patient=True)
    return JobProcessor(
        jobs=build_jobs(settings.table, clients("dynamodb", patient=True)),
        # get() reads the bucket from the s3:// reference stored on the item.
        payloads=PayloadStore(lambda: s3, settings.payloads_bucket_name or ""),
        artifacts=build_artifact_store(settings, clients),
        announcer=Announcer(clients("events", patient=True), settings.event_bus_name),
        clock=clock,
        lease_seconds=settings.lease_seconds,
        retention_days=settings.retention_days,
        retries=RetryPolicy(
            max_attempts=settings.max_attempts,
            max_receives=settings.max_receives,
            retry_seconds=settings.queue_retry_seconds,
            dlq_retention_seconds=settings.dlq_retention_seconds,
        ),
        time_reserve_seconds=settings.time_reserve_seconds,
    )


def build_artifact_store(settings: WorkerSettings, clients: Clients = aws.client) -> ArtifactStore:
    """Where the worker copies artifacts to, with its HTTP client and part size."""
    return ArtifactStore(
        clients("s3", patient=True),
        settings.artifacts_bucket_name,
        SafeHttp.for_settings(settings),
        settings.max_artifact_bytes,
        settings.part_size_bytes,
        connections=settings.artifact_connections,
        uploads=settings.artifact_uploads,
        planned_bytes_per_second=settings.artifact_planned_bytes_per_second,
    )


@per_container
def worker_service() -> JobProcessor:
    return build_worker(WorkerSettings.from_env())
