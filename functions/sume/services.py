"""The composition root: what each handler calls, wired from its settings.

One builder per handler takes the settings, the clients and a clock, so the
tests and the bench build exactly what Lambda runs, with their own clients or
time. The handlers call the cached accessors, built on first use from
``*Settings.from_env()`` and kept for the container's life; ``reset()``
forgets all of it, as a fresh container would.

A builder imports the modules only its handler needs: a handler's cold start
loads none of the other two's.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from sume import aws
from sume.settings import (
    PollerSettings,
    ReceiverSettings,
    RegistrationSettings,
    TableSettings,
    WorkerSettings,
)

if TYPE_CHECKING:
    from sume.artifacts import ArtifactStore
    from sume.fetch import SafeHttp
    from sume.intake import JobIntake
    from sume.jobs import JobsTable
    from sume.polling import Poller
    from sume.processing import JobProcessor
    from sume.registration import Registrations
    from sume.secrets import SigningSecrets
    from sume.status import TokenSource
    from sume.webhook import WebhookReceiver

Clock = Callable[[], float]


class Clients(Protocol):
    """A boto3 client per service; ``patient`` ones wait and retry longer (``sume.aws``)."""

    def __call__(self, service: str, patient: bool = False) -> Any: ...


def build_receiver(
    settings: ReceiverSettings, clients: Clients = aws.client, clock: Clock = time.time
) -> WebhookReceiver:
    from sume.webhook import WebhookReceiver

    # Built on first use: a rejected request never creates an AWS client.
    intake = functools.cache(functools.partial(build_intake, settings, clients))
    return WebhookReceiver(
        intake,
        build_signing_secrets(settings, clients),
        settings.signature_tolerance_seconds,
        settings.max_body_bytes,
        clock,
    )


def build_worker(
    settings: WorkerSettings, clients: Clients = aws.client, clock: Clock = time.time
) -> JobProcessor:
    from sume.announce import Announcer
    from sume.payloads import PayloadStore
    from sume.processing import JobProcessor, RetryPolicy

    s3 = clients("s3", patient=True)
    return JobProcessor(
        jobs=_jobs(settings.table, clients("dynamodb", patient=True)),
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


def build_poller(
    settings: PollerSettings, clients: Clients = aws.client, clock: Clock = time.time
) -> Poller:
    from sume.polling import Poller, PollPolicy
    from sume.queue import JobQueue
    from sume.status import StatusClient, status_getter

    table = settings.table
    status = StatusClient(
        status_getter(_http(settings)),
        _api_token(settings, clients),
        settings.url_policy.allowed_hosts,
    )
    policy = PollPolicy(
        initial_seconds=settings.poll_initial_seconds,
        max_interval_seconds=settings.poll_max_interval_seconds,
        max_age_seconds=settings.max_poll_age_seconds,
        sweep_after_seconds=settings.sweep_after_seconds,
        poll_timeout_seconds=settings.total_timeout_seconds,
        time_margin_seconds=settings.time_budget_margin_seconds,
    )
    return Poller(
        _jobs(table, clients("dynamodb")),
        build_intake(settings, clients),
        JobQueue(clients("sqs"), table.jobs_queue_url),
        status.check,
        policy,
        shards=table.due_shards,
        max_parallel_polls=settings.max_parallel_polls,
        clock=clock,
    )


def build_intake(
    settings: ReceiverSettings | PollerSettings, clients: Clients = aws.client
) -> JobIntake:
    """Recording a terminal event, as the receiver and the poller both do."""
    from sume.intake import JobIntake
    from sume.payloads import PayloadStore
    from sume.queue import JobQueue

    table, bucket = settings.table, settings.payloads_bucket_name
    return JobIntake(
        _jobs(table, clients("dynamodb")),
        JobQueue(clients("sqs"), table.jobs_queue_url),
        PayloadStore(functools.partial(clients, "s3"), bucket) if bucket else None,
        settings.redeliver_grace_seconds,
        settings.sweep_after_seconds,
    )


def build_artifact_store(settings: WorkerSettings, clients: Clients = aws.client) -> ArtifactStore:
    """Where the worker copies artifacts to, with its HTTP client and part size."""
    from sume.artifacts import ArtifactStore

    return ArtifactStore(
        clients("s3", patient=True),
        settings.artifacts_bucket_name,
        _http(settings),
        settings.max_artifact_bytes,
        settings.part_size_bytes,
        connections=settings.artifact_connections,
        uploads=settings.artifact_uploads,
        planned_bytes_per_second=settings.artifact_planned_bytes_per_second,
    )


def build_signing_secrets(
    settings: ReceiverSettings, clients: Clients = aws.client
) -> SigningSecrets:
    """From Secrets Manager (cached per container) when an ARN is set, else the environment's."""
    from sume.secrets import SigningSecrets, secret_fetcher

    arn = settings.signing_secret_arn
    if not arn:
        return SigningSecrets(None, settings.signing_secret_value)
    return SigningSecrets(
        secret_fetcher(arn, settings.secret_cache_seconds, clients("secretsmanager")), None
    )


def build_registrations(
    settings: RegistrationSettings, clients: Clients = aws.client, clock: Clock = time.time
) -> Registrations:
    """Registration by event (in the poller): ``registry.expect``'s checks, refusals parked."""
    from sume.jobs import JobsTable
    from sume.queue import DeadLetterQueue
    from sume.registration import Registrations
    from sume.registry import Registry

    registry = settings.registry
    jobs = JobsTable(clients("dynamodb"), registry.jobs_table_name, registry.due_shards)
    return Registrations(
        Registry(
            jobs, registry.poll_initial_seconds, clock, allowed_hosts=registry.status_allowed_hosts
        ),
        DeadLetterQueue(clients("sqs"), settings.dead_letter_queue_url),
    )


def _http(settings: WorkerSettings | PollerSettings) -> SafeHttp:
    """The SSRF-safe HTTP client, with the handler's URL policy and timeouts."""
    from sume.fetch import SafeHttp

    return SafeHttp(
        settings.url_policy,
        settings.connect_timeout_seconds,
        settings.read_timeout_seconds,
        total_timeout=settings.total_timeout_seconds,
    )


def _jobs(table: TableSettings, dynamodb: Any) -> JobsTable:
    from sume.jobs import JobsTable

    return JobsTable(dynamodb, table.jobs_table_name, table.due_shards)


def _api_token(settings: PollerSettings, clients: Clients) -> TokenSource:
    """From Secrets Manager when an ARN is set, else the environment's value, if any."""
    from sume.secrets import secret_fetcher
    from sume.status import token_source

    arn, value = settings.api_token_arn, settings.api_token_value
    if arn:
        return token_source(
            secret_fetcher(arn, settings.secret_cache_seconds, clients("secretsmanager"))
        )
    return token_source(None if value is None else lambda: value)


@functools.cache
def receiver_service() -> WebhookReceiver:
    return build_receiver(ReceiverSettings.from_env())


@functools.cache
def worker_service() -> JobProcessor:
    return build_worker(WorkerSettings.from_env())


@functools.cache
def poller_service() -> Poller:
    return build_poller(PollerSettings.from_env())


@functools.cache
def registrations_service() -> Registrations:
    return build_registrations(RegistrationSettings.from_env())


# Held here, so reset() clears them even while a test stands in for one.
_ACCESSORS = (receiver_service, worker_service, poller_service, registrations_service)


def reset() -> None:
    """Forget the services, their settings and clients, and the boto3 session."""
    for accessor in _ACCESSORS:
        accessor.cache_clear()
    aws.reset()
