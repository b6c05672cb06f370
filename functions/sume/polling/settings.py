"""The poller's settings: scheduled runs, registrations by event, and ``registry.expect``."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from sume.core.names import DUE_INDEX, MAX_DUE_SHARDS, Env
from sume.core.settings import (
    DAY_SECONDS,
    DEFAULT_POLL_INITIAL_SECONDS,
    LAMBDA_MAX_SECONDS,
    PeerPayloads,
    TableSettings,
    due_shards,
    integer,
    missing,
    optional,
    redeliver_grace_seconds,
    required,
    retention_days,
    seconds,
    secret_cache_seconds,
    sweep_after_seconds,
)
from sume.net.policy import HTTPS_ONLY, UrlPolicy

# Items per index query: small enough that a run out of time leaves little
# read-but-unhandled work, large enough to keep every poll thread busy.
PAGE_SIZE = 50
# What follows a status fetch (recording the answer or the next poll time)
# must fit in the run's time too: a poll starts only with this much to spare
# beyond its fetch's timeout.
POLL_FINISH_SECONDS = 5.0
# Due-work items a run reads per shard to count the jobs awaiting (the
# JobsAwaiting gauge): enough for an exact count of 16,000 outstanding jobs at
# the default 16 shards, and a bounded read (at most this many items a shard)
# beyond, where the gauge is a lower bound, which is all the silence alarm needs.
AWAITING_COUNT_LIMIT = 1000


def _event_bus(name: str | None) -> str:
    if name is None:
        raise missing(Env.EVENT_BUS_NAME)
    return name


@dataclass(frozen=True)
class PollPolicy:
    """When to poll a job, when to give it up, when to sweep owed work, and a run's margins."""

    initial_seconds: int
    max_interval_seconds: int
    max_age_seconds: int
    sweep_after_seconds: int
    poll_timeout_seconds: float
    """Longest one status fetch may take, redirects included."""
    page_size: int = PAGE_SIZE
    time_margin_seconds: float = 0.0
    """Kept back from the invocation's remaining time: a run ends this long before it."""

    @property
    def poll_reserve_seconds(self) -> float:
        """Worst-case duration of one status poll; none is started with less time left."""
        return self.poll_timeout_seconds + POLL_FINISH_SECONDS

    def _doubling(self, base: int, attempt: int) -> int:
        # The exponent is capped so a long-lived item cannot build a huge int.
        return min(base * 2 ** min(attempt, 32), self.max_interval_seconds)

    def poll_delay(self, attempt: int) -> int:
        """Seconds before poll number ``attempt`` (0 = the first, after registering)."""
        return self._doubling(self.initial_seconds, attempt)

    def sweep_delay(self, sweeps: int) -> int:
        """Seconds before an owed job is swept again after ``sweeps`` sweeps."""
        return self._doubling(self.sweep_after_seconds, sweeps)


@dataclass(frozen=True)
class PollerSettings:
    table: TableSettings
    url_policy: UrlPolicy
    api_token_arn: str | None
    api_token_value: str | None
    policy: PollPolicy
    max_parallel_polls: int
    connect_timeout_seconds: float
    read_timeout_seconds: float
    payloads_bucket_name: str | None
    secret_cache_seconds: int
    redeliver_grace_seconds: int
    peer_payloads: PeerPayloads | None = None
    event_bus_name: str | None = None
    """The stack's bus, where a run announces the jobs it gives up."""
    worker_mapping: str | None = None
    """The UUID of this region's worker's event source mapping: while it is off
    (``sume-webhooks pause worker``) the sweep holds owed work (``sume.polling.held``)."""

    @property
    def sweep_after_seconds(self) -> int:
        return self.policy.sweep_after_seconds

    @property
    def total_timeout_seconds(self) -> float:
        """One status poll's fetch, redirects included."""
        return self.policy.poll_timeout_seconds

    def event_bus(self) -> str:
        """The bus lost jobs are announced on; a poller run cannot run without it."""
        return _event_bus(self.event_bus_name)

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> PollerSettings:
        return cls(
            table=TableSettings.table_from(env),
            url_policy=UrlPolicy.from_env(env, Env.STATUS_ALLOWED_HOSTS),
            api_token_arn=optional(env, Env.SUME_API_TOKEN_ARN),
            api_token_value=optional(env, Env.SUME_API_TOKEN),
            # A status answer over 256 KiB is offloaded like a webhook body.
            payloads_bucket_name=optional(env, Env.PAYLOADS_BUCKET_NAME),
            secret_cache_seconds=secret_cache_seconds(env),
            redeliver_grace_seconds=redeliver_grace_seconds(env),
            peer_payloads=PeerPayloads.from_env(env),
            event_bus_name=optional(env, Env.EVENT_BUS_NAME),
            worker_mapping=optional(env, Env.WORKER_EVENT_SOURCE_MAPPING),
            policy=PollPolicy(
                initial_seconds=poll_initial_seconds(env),
                max_interval_seconds=integer(
                    env, Env.POLL_MAX_INTERVAL_SECONDS, 6 * 3600, 1, DAY_SECONDS
                ),
                # Within a year: the jobs are kept for retention_days (at most 3650).
                max_age_seconds=integer(
                    env, Env.MAX_POLL_AGE_SECONDS, 7 * DAY_SECONDS, 1, 365 * DAY_SECONDS
                ),
                sweep_after_seconds=sweep_after_seconds(env),
                # One status poll, redirects included: a slow host gets no more.
                poll_timeout_seconds=seconds(
                    env, Env.HTTP_TOTAL_TIMEOUT_SECONDS, 15, LAMBDA_MAX_SECONDS
                ),
                time_margin_seconds=integer(
                    env, Env.TIME_BUDGET_MARGIN_SECONDS, 10, 0, LAMBDA_MAX_SECONDS
                ),
            ),
            # Polls mostly wait on Sume: 32 at 500 ms answers is 64 polls/s, about
            # what a 512 MB poller's CPU share carries (docs/poller.md); each is a
            # thread, so a few hundred at most.
            max_parallel_polls=integer(env, Env.MAX_PARALLEL_POLLS, 32, 1, 256),
            connect_timeout_seconds=integer(
                env, Env.HTTP_CONNECT_TIMEOUT_SECONDS, 5, 1, LAMBDA_MAX_SECONDS
            ),
            read_timeout_seconds=integer(
                env, Env.HTTP_READ_TIMEOUT_SECONDS, 10, 1, LAMBDA_MAX_SECONDS
            ),
        )


@dataclass(frozen=True)
class FanOutSettings:
    """A round fanned out: the schedule's tick hands groups of shards to parallel runs."""

    shards_queue_url: str
    leases_table_name: str
    read_shards: int
    """Shards the poller reads: ``DUE_SHARDS``, or ``DUE_SHARDS_PREVIOUS`` while that
    is larger (a lowered count's old shards still hold items)."""
    shards_per_run: int
    round_seconds: int = 1
    """A round is named by the start of its period of this many seconds: with two
    regions, the schedule's period, so both regions' ticks of one period name one
    round and only one of them wins each shard (docs/regions.md)."""

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> FanOutSettings:
        return cls(
            shards_queue_url=required(env, Env.POLL_SHARDS_QUEUE_URL),
            leases_table_name=required(env, Env.SHARD_LEASES_TABLE_NAME),
            read_shards=read_shards(env),
            shards_per_run=integer(env, Env.POLL_SHARDS_PER_RUN, 1, 1, MAX_DUE_SHARDS),
            round_seconds=integer(env, Env.POLL_ROUND_SECONDS, 1, 1, DAY_SECONDS),
        )

    def is_shards_queue(self, queue_arn: str) -> bool:
        """Whether SQS records with this ``eventSourceARN`` come from the shards queue."""
        # A queue's URL and its ARN both end in its name.
        return queue_arn.rpartition(":")[2] == self.shards_queue_url.rpartition("/")[2]


def read_shards(env: Mapping[str, str]) -> int:
    """Shards holding due work: ``DUE_SHARDS``, or ``DUE_SHARDS_PREVIOUS`` while that
    is larger (a lowered count's old shards still hold items until they drain)."""
    return max(due_shards(env), integer(env, Env.DUE_SHARDS_PREVIOUS, 0, 0, MAX_DUE_SHARDS))


def poll_initial_seconds(env: Mapping[str, str]) -> int:
    """The first poll's delay after registering: the poller's and every registrar's."""
    return integer(env, Env.POLL_INITIAL_SECONDS, DEFAULT_POLL_INITIAL_SECONDS, 1, DAY_SECONDS)


@dataclass(frozen=True)
class RegistrySettings:
    """What registering a job for status polling needs: by ``sume.polling.registry.expect``,
    by the CLI, and by event in the poller (which parks refusals in its DLQ)."""

    jobs_table_name: str
    due_shards: int
    poll_initial_seconds: int
    status_urls: UrlPolicy = HTTPS_ONLY
    """The poller's status URL policy (``STATUS_ALLOWED_HOSTS``, ``ALLOW_HTTP_URLS``):
    a status_url it would refuse is refused at registration."""
    dead_letter_queue_url: str | None = None
    due_index: str = DUE_INDEX
    """Registering writes the table; it reads no index."""
    """The registrations DLQ, where the poller parks refused events at once."""
    event_bus_name: str | None = None
    """The stack's bus, where the poller announces refused events."""

    @classmethod
    def from_env(
        cls, env: Mapping[str, str] = os.environ, table_name: str | None = None
    ) -> RegistrySettings:
        return cls(
            jobs_table_name=table_name or required(env, Env.JOBS_TABLE_NAME),
            due_shards=due_shards(env),
            poll_initial_seconds=poll_initial_seconds(env),
            status_urls=UrlPolicy.from_env(env, Env.STATUS_ALLOWED_HOSTS),
            dead_letter_queue_url=optional(env, Env.REGISTRATION_DLQ_URL),
            event_bus_name=optional(env, Env.EVENT_BUS_NAME),
        )

    def dead_letters(self) -> str:
        """The registrations DLQ's URL; registering by event cannot run without it."""
        if self.dead_letter_queue_url is None:
            raise missing(Env.REGISTRATION_DLQ_URL)
        return self.dead_letter_queue_url

    def event_bus(self) -> str:
        """The bus refusals are announced on; registering by event cannot run without it."""
        return _event_bus(self.event_bus_name)


@dataclass(frozen=True)
class ExpirySettings:
    """The MRSC table's daily expiry (``sume.polling.expiry``)."""

    table: TableSettings
    retention_days: int
    """The worker's ``RETENTION_DAYS``: a finish sets ``expires_at`` that far ahead."""
    lookback_days: int
    """Days of report partitions, before the cutoff, each run reads."""

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> ExpirySettings:
        return cls(
            table=TableSettings.table_from(env),
            retention_days=retention_days(env),
            lookback_days=integer(env, Env.EXPIRY_LOOKBACK_DAYS, 90, 1, 3650),
        )
