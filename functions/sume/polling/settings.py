"""The poller's settings: scheduled runs, registrations by event, and ``registry.expect``."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from sume.core.names import DUE_SHARDS, Env
from sume.core.settings import (
    DEFAULT_POLL_INITIAL_SECONDS,
    DEFAULT_REDELIVER_GRACE_SECONDS,
    DEFAULT_SECRET_CACHE_SECONDS,
    DEFAULT_SWEEP_AFTER_SECONDS,
    TableSettings,
    integer,
    names,
    optional,
    required,
    seconds,
)
from sume.net.policy import UrlPolicy


@dataclass(frozen=True)
class PollerSettings:
    table: TableSettings
    url_policy: UrlPolicy
    api_token_arn: str | None
    api_token_value: str | None
    poll_initial_seconds: int
    poll_max_interval_seconds: int
    max_poll_age_seconds: int
    sweep_after_seconds: int
    max_parallel_polls: int
    time_budget_margin_seconds: int
    connect_timeout_seconds: float
    read_timeout_seconds: float
    total_timeout_seconds: float
    payloads_bucket_name: str | None
    secret_cache_seconds: int
    redeliver_grace_seconds: int

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> PollerSettings:
        return cls(
            table=TableSettings.table_from(env),
            url_policy=UrlPolicy.from_env(env, Env.STATUS_ALLOWED_HOSTS),
            api_token_arn=optional(env, Env.SUME_API_TOKEN_ARN),
            api_token_value=optional(env, Env.SUME_API_TOKEN),
            # A status answer over 256 KiB is offloaded like a webhook body.
            payloads_bucket_name=optional(env, Env.PAYLOADS_BUCKET_NAME),
            secret_cache_seconds=integer(
                env, Env.SECRET_CACHE_SECONDS, DEFAULT_SECRET_CACHE_SECONDS
            ),
            redeliver_grace_seconds=integer(
                env, Env.REDELIVER_GRACE_SECONDS, DEFAULT_REDELIVER_GRACE_SECONDS
            ),
            poll_initial_seconds=integer(
                env, Env.POLL_INITIAL_SECONDS, DEFAULT_POLL_INITIAL_SECONDS, minimum=1
            ),
            poll_max_interval_seconds=integer(
                env, Env.POLL_MAX_INTERVAL_SECONDS, 6 * 3600, minimum=1
            ),
            max_poll_age_seconds=integer(env, Env.MAX_POLL_AGE_SECONDS, 7 * 24 * 3600, minimum=1),
            sweep_after_seconds=integer(
                env, Env.SWEEP_AFTER_SECONDS, DEFAULT_SWEEP_AFTER_SECONDS, minimum=1
            ),
            # Polls mostly wait on Sume: 32 at 500 ms answers is 64 polls/s, about
            # what a 512 MB poller's CPU share carries (docs/poller.md).
            max_parallel_polls=integer(env, Env.MAX_PARALLEL_POLLS, 32, minimum=1),
            time_budget_margin_seconds=integer(env, Env.TIME_BUDGET_MARGIN_SECONDS, 10),
            connect_timeout_seconds=integer(env, Env.HTTP_CONNECT_TIMEOUT_SECONDS, 5, minimum=1),
            read_timeout_seconds=integer(env, Env.HTTP_READ_TIMEOUT_SECONDS, 10, minimum=1),
            # One status poll, redirects included: a slow host gets no more.
            total_timeout_seconds=seconds(env, Env.HTTP_TOTAL_TIMEOUT_SECONDS, 15),
        )


@dataclass(frozen=True)
class RegistrySettings:
    """What registering a job for status polling needs (``sume.polling.registry``)."""

    jobs_table_name: str
    due_shards: int
    poll_initial_seconds: int
    status_allowed_hosts: tuple[str, ...] = ()
    """The poller's ``STATUS_ALLOWED_HOSTS``: a status_url elsewhere is refused."""

    @classmethod
    def from_env(
        cls, env: Mapping[str, str] = os.environ, table_name: str | None = None
    ) -> RegistrySettings:
        return cls(
            jobs_table_name=table_name or required(env, Env.JOBS_TABLE_NAME),
            due_shards=integer(env, Env.DUE_SHARDS, DUE_SHARDS, minimum=1),
            poll_initial_seconds=integer(
                env, Env.POLL_INITIAL_SECONDS, DEFAULT_POLL_INITIAL_SECONDS, minimum=1
            ),
            status_allowed_hosts=names(env, Env.STATUS_ALLOWED_HOSTS),
        )


@dataclass(frozen=True)
class RegistrationSettings:
    """What registering jobs by event needs (``sume.polling.registration``, in the poller)."""

    registry: RegistrySettings
    dead_letter_queue_url: str
    """The registrations DLQ: refused events are parked there at once."""

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> RegistrationSettings:
        return cls(
            registry=RegistrySettings.from_env(env),
            dead_letter_queue_url=required(env, Env.REGISTRATION_DLQ_URL),
        )
