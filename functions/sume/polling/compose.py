"""The poller's services (scheduled runs, registrations by event), built once per container."""

from __future__ import annotations

import time

from sume.core import aws
from sume.core.aws import Clients
from sume.core.runtime import Clock, per_container
from sume.core.secrets import secret_fetcher
from sume.net.fetch import SafeHttp
from sume.polling.awaiting import AwaitingGauge
from sume.polling.expiry import Expiry
from sume.polling.fanout import FanOut, ShardLeases, ShardQueue, ShardRun
from sume.polling.held import WorkerSwitch, never_paused
from sume.polling.poller import Poller
from sume.polling.registering import Registry
from sume.polling.registration import Registrations
from sume.polling.serving import ServingProbe, ServingSettings
from sume.polling.settings import (
    AWAITING_COUNT_LIMIT,
    ExpirySettings,
    FanOutSettings,
    PollerSettings,
    RegistrySettings,
)
from sume.polling.status import StatusClient, TokenSource, status_getter, token_source
from sume.store.announcing import Announcer
from sume.store.bus import EventBus
from sume.store.compose import build_intake, build_jobs
from sume.store.expiry import JobExpiry
from sume.store.queue import DeadLetterQueue, JobQueue


def build_poller(settings: PollerSettings, clients: Clients = aws.client) -> Poller:
    table = settings.table
    status = StatusClient(
        status_getter(SafeHttp.for_settings(settings)),
        _api_token(settings, clients),
        settings.url_policy.allowed_hosts,
    )
    return Poller(
        build_jobs(table, clients("dynamodb")),
        build_intake(settings, clients),
        JobQueue(clients("sqs"), table.jobs_queue_url),
        # Fast, as the run's other calls: a put that fails is swept later.
        Announcer(clients("events"), settings.event_bus()),
        status.check,
        settings.policy,
        max_parallel_polls=settings.max_parallel_polls,
        # The Lambda client only when a run has owed work to sweep.
        worker_paused=WorkerSwitch(lambda: clients("lambda"), settings.worker_mapping).paused
        if settings.worker_mapping
        else never_paused,
    )


def build_awaiting_gauge(
    settings: PollerSettings, read_shards: int, clients: Clients = aws.client
) -> AwaitingGauge:
    """Counted over every shard the poller reads: while a lowered count drains,
    jobs still wait in the old shards."""
    return AwaitingGauge(
        build_jobs(settings.table, clients("dynamodb")), read_shards, AWAITING_COUNT_LIMIT
    )


def build_fanout(
    settings: FanOutSettings, clients: Clients = aws.client, clock: Clock = time.time
) -> FanOut:
    """The schedule's tick: the round's assignments onto the shards queue."""
    queue = ShardQueue(clients("sqs"), settings.shards_queue_url)
    return FanOut(
        queue, settings.read_shards, settings.shards_per_run, clock, settings.round_seconds
    )


def build_shard_run(
    poller: PollerSettings,
    fanout: FanOutSettings,
    clients: Clients = aws.client,
    clock: Clock = time.time,
) -> ShardRun:
    """One assignment's run: its shards claimed in the leases table, then polled."""
    leases = ShardLeases(clients("dynamodb"), fanout.leases_table_name)
    return ShardRun(build_poller(poller, clients).run, leases, fanout.read_shards, clock)


def build_expiry(
    settings: ExpirySettings, clients: Clients = aws.client, clock: Clock = time.time
) -> Expiry:
    """The MRSC table's daily expiry of ended jobs (two regions)."""
    table = settings.table
    dynamodb = clients("dynamodb", patient=True)
    return Expiry(
        JobExpiry(build_jobs(table, dynamodb), dynamodb, table.jobs_table_name),
        settings.retention_days,
        settings.lookback_days,
        table.due_shards,
        clock,
    )


def build_registrations(
    settings: RegistrySettings, clients: Clients = aws.client, clock: Clock = time.time
) -> Registrations:
    """Registration by event (in the poller): ``registry.expect``'s checks, refusals
    announced and parked."""
    return Registrations(
        build_registry(settings, clients, clock),
        DeadLetterQueue(clients("sqs"), settings.dead_letters()),
        EventBus(clients("events", patient=True), settings.event_bus()),
        clock,
    )


def build_registry(
    settings: RegistrySettings, clients: Clients = aws.client, clock: Clock = time.time
) -> Registry:
    """Registering jobs for polling: by event, by ``registry.expect``, by the CLI, locally."""
    return Registry(
        build_jobs(settings, clients("dynamodb")),
        settings.poll_initial_seconds,
        clock,
        url_policy=settings.status_urls,
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
def fanout_settings() -> FanOutSettings:
    return FanOutSettings.from_env()


@per_container
def fanout_service() -> FanOut:
    return build_fanout(fanout_settings())


@per_container
def shard_run_service() -> ShardRun:
    return build_shard_run(PollerSettings.from_env(), fanout_settings())


@per_container
def awaiting_gauge() -> AwaitingGauge:
    return build_awaiting_gauge(PollerSettings.from_env(), fanout_settings().read_shards)


@per_container
def registrations_service() -> Registrations:
    return build_registrations(RegistrySettings.from_env())


@per_container
def serving_probe() -> ServingProbe | None:
    """None in a single-region stage."""
    settings = ServingSettings.from_env()
    return None if settings is None else ServingProbe(settings)


def expiry_service() -> Expiry:
    return build_expiry(ExpirySettings.from_env())
