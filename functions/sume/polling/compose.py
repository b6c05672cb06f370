"""The poller's services (scheduled runs, registrations by event), built once per container."""

from __future__ import annotations

import time

from sume.core import aws
from sume.core.aws import Clients
from sume.core.clock import Clock
from sume.core.container import per_container
from sume.core.secrets import secret_fetcher
from sume.net.fetch import SafeHttp
from sume.polling.poller import Poller, PollPolicy
from sume.polling.registration import Registrations
from sume.polling.registry import Registry
from sume.polling.settings import PollerSettings, RegistrationSettings, RegistrySettings
from sume.polling.status import StatusClient, TokenSource, status_getter, token_source
from sume.store.compose import build_intake, build_jobs
from sume.store.queue import DeadLetterQueue, JobQueue


def build_poller(
    settings: PollerSettings, clients: Clients = aws.client, clock: Clock = time.time
) -> Poller:
    table = settings.table
    status = StatusClient(
        status_getter(SafeHttp.for_settings(settings)),
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
        build_jobs(table, clients("dynamodb")),
        build_intake(settings, clients),
        JobQueue(clients("sqs"), table.jobs_queue_url),
        status.check,
        policy,
        shards=table.due_shards,
        max_parallel_polls=settings.max_parallel_polls,
        clock=clock,
    )


def build_registrations(
    settings: RegistrationSettings, clients: Clients = aws.client, clock: Clock = time.time
) -> Registrations:
    """Registration by event (in the poller): ``registry.expect``'s checks, refusals parked."""
    return Registrations(
        build_registry(settings.registry, clients, clock),
        DeadLetterQueue(clients("sqs"), settings.dead_letter_queue_url),
    )


def build_registry(
    settings: RegistrySettings, clients: Clients = aws.client, clock: Clock = time.time
) -> Registry:
    """Registering jobs for polling: by event, by ``registry.expect``, by the CLI, locally."""
    return Registry(
        build_jobs(settings, clients("dynamodb")),
        settings.poll_initial_seconds,
        clock,
        allowed_hosts=settings.status_allowed_hosts,
    )


def _api_token(settings: PollerSettings, clients: Clients) -> TokenSource:
    """From Secrets Manager when an ARN is set, else the environment's value, if any."""
    arn, value = settings.api_token_arn, settings.api_token_value
    if arn:
        return token_source(
            secret_fetcher(arn, settings.secret_cache_seconds, clients("secretsmanager"))
        )
    return token_source(None if value is None else lambda: value)


@per_container
def poller_service() -> Poller:
    return build_poller(PollerSettings.from_env())


@per_container
def registrations_service() -> Registrations:
    return build_registrations(RegistrationSettings.from_env())
