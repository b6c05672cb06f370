"""Typed settings per handler, read from the environment in one place.

Each ``from_env`` fails at the first invocation with a message that names the
missing or invalid variable, instead of a KeyError deep inside a request.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from sume.names import DUE_SHARDS, Env
from sume.signature import TOLERANCE_SECONDS

# Defaults that more than one reader applies (two handlers, or a handler and
# the ops CLI), so they cannot drift apart.
DEFAULT_SWEEP_AFTER_SECONDS: Final = 120
DEFAULT_REDELIVER_GRACE_SECONDS: Final = 15
DEFAULT_SECRET_CACHE_SECONDS: Final = 300
DEFAULT_POLL_INITIAL_SECONDS: Final = 900


class ConfigurationError(RuntimeError):
    """The function is deployed wrong; it must fail loudly, never degrade."""


def _required(env: Mapping[str, str], name: str) -> str:
    value = env.get(name, "").strip()
    if not value:
        raise ConfigurationError(f"{name} must be set")
    return value


def _optional(env: Mapping[str, str], name: str) -> str | None:
    return env.get(name, "").strip() or None


def _int(env: Mapping[str, str], name: str, default: int, minimum: int = 0) -> int:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigurationError(f"{name} must be an integer, got {raw!r}") from None
    if value < minimum:
        raise ConfigurationError(f"{name} must be at least {minimum}, got {value}")
    return value


def _required_int(env: Mapping[str, str], name: str) -> int:
    _required(env, name)
    return _int(env, name, 0, minimum=1)


def _seconds(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigurationError(f"{name} must be a number of seconds, got {raw!r}") from None
    if not value > 0:
        raise ConfigurationError(f"{name} must be positive, got {raw!r}")
    return value


def _flag(env: Mapping[str, str], name: str) -> bool:
    return env.get(name, "").strip().lower() in {"1", "true", "yes", "on"}


def _list(env: Mapping[str, str], name: str) -> tuple[str, ...]:
    return tuple(h.strip().lower() for h in env.get(name, "").split(",") if h.strip())


@dataclass(frozen=True)
class TableSettings:
    jobs_table_name: str
    jobs_queue_url: str
    due_shards: int

    @staticmethod
    def table_from(env: Mapping[str, str]) -> TableSettings:
        return TableSettings(
            jobs_table_name=_required(env, Env.JOBS_TABLE_NAME),
            jobs_queue_url=_required(env, Env.JOBS_QUEUE_URL),
            due_shards=_int(env, Env.DUE_SHARDS, DUE_SHARDS, minimum=1),
        )


@dataclass(frozen=True)
class ReceiverSettings:
    table: TableSettings
    payloads_bucket_name: str | None
    signing_secret_arn: str | None
    signing_secret_value: str | None
    secret_cache_seconds: int
    signature_tolerance_seconds: int
    max_body_bytes: int
    redeliver_grace_seconds: int
    sweep_after_seconds: int

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> ReceiverSettings:
        arn = _optional(env, Env.SIGNING_SECRET_ARN)
        value = _optional(env, Env.SUME_COM_WEBHOOK_SIGNING_SECRET)
        if not arn and not value:
            raise ConfigurationError(
                f"set {Env.SIGNING_SECRET_ARN} (Secrets Manager) or "
                f"{Env.SUME_COM_WEBHOOK_SIGNING_SECRET}"
            )
        return cls(
            table=TableSettings.table_from(env),
            payloads_bucket_name=_optional(env, Env.PAYLOADS_BUCKET_NAME),
            signing_secret_arn=arn,
            signing_secret_value=value,
            secret_cache_seconds=_int(env, Env.SECRET_CACHE_SECONDS, DEFAULT_SECRET_CACHE_SECONDS),
            signature_tolerance_seconds=_int(
                env, Env.SIGNATURE_TOLERANCE_SECONDS, TOLERANCE_SECONDS
            ),
            max_body_bytes=_int(env, Env.MAX_BODY_BYTES, 1024 * 1024, minimum=1),
            # About Sume's 10 s delivery timeout: a twin arriving sooner is
            # most likely concurrent with a first enqueue still in flight.
            redeliver_grace_seconds=_int(
                env, Env.REDELIVER_GRACE_SECONDS, DEFAULT_REDELIVER_GRACE_SECONDS
            ),
            # When the sweeper may first consider a received job abandoned.
            sweep_after_seconds=_int(
                env, Env.SWEEP_AFTER_SECONDS, DEFAULT_SWEEP_AFTER_SECONDS, minimum=1
            ),
        )


@dataclass(frozen=True)
class UrlPolicy:
    """Which artifact and status URLs may be fetched (SSRF guard)."""

    allow_http: bool
    allow_private_hosts: bool
    allowed_hosts: tuple[str, ...]

    @classmethod
    def from_env(cls, env: Mapping[str, str], hosts_var: str) -> UrlPolicy:
        return cls(
            allow_http=_flag(env, Env.ALLOW_HTTP_URLS),
            allow_private_hosts=_flag(env, Env.ALLOW_PRIVATE_HOSTS),
            allowed_hosts=_list(env, hosts_var),
        )


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
    part_size_bytes: int = 8 * 1024**2
    total_timeout_seconds: float = 270.0
    time_reserve_seconds: float = 20.0
    artifact_connections: int = 4
    artifact_uploads: int = 4
    artifact_planned_bytes_per_second: int = 20_000_000

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> WorkerSettings:
        return cls(
            table=TableSettings.table_from(env),
            payloads_bucket_name=_optional(env, Env.PAYLOADS_BUCKET_NAME),
            artifacts_bucket_name=_required(env, Env.ARTIFACTS_BUCKET_NAME),
            event_bus_name=_required(env, Env.EVENT_BUS_NAME),
            url_policy=UrlPolicy.from_env(env, Env.ARTIFACT_ALLOWED_HOSTS),
            max_artifact_bytes=_int(env, Env.MAX_ARTIFACT_BYTES, 5 * 1024**3, minimum=1),
            retention_days=_int(env, Env.RETENTION_DAYS, 35, minimum=1),
            lease_seconds=_int(env, Env.LEASE_SECONDS, 900, minimum=1),
            connect_timeout_seconds=_seconds(env, Env.HTTP_CONNECT_TIMEOUT_SECONDS, 5),
            read_timeout_seconds=_seconds(env, Env.HTTP_READ_TIMEOUT_SECONDS, 30),
            # One artifact download at most; within an invocation every copy
            # also ends time_reserve_seconds before the function's deadline.
            total_timeout_seconds=_seconds(env, Env.HTTP_TOTAL_TIMEOUT_SECONDS, 270),
            # Covers what follows the last copy: its final part's upload, the
            # announcement and the finish, or releasing the claim.
            time_reserve_seconds=_seconds(env, Env.TIME_BUDGET_MARGIN_SECONDS, 20),
            # The jobs queue's: its maxReceiveCount, visibility timeout and DLQ
            # retention, set by the stack from one place (infra/spec.py).
            max_receives=_required_int(env, Env.MAX_RECEIVES),
            queue_retry_seconds=_required_int(env, Env.QUEUE_RETRY_SECONDS),
            dlq_retention_seconds=_required_int(env, Env.DLQ_RETENTION_SECONDS),
            # As many as the message's receives: a job whose work keeps failing
            # ends as a processing error before its message could reach the DLQ.
            max_attempts=_int(env, Env.MAX_ATTEMPTS, _required_int(env, Env.MAX_RECEIVES)),
            # S3 refuses multipart parts under 5 MiB (except the last).
            part_size_bytes=_int(env, Env.ARTIFACT_PART_BYTES, 8 * 1024**2, minimum=5 * 1024**2),
            # Ranged connections per artifact when the origin offers ranges (1:
            # never ranged) and parts uploaded at once; a copy holds at most
            # their sum in parts (sume.transfer).
            artifact_connections=_int(env, Env.ARTIFACT_CONNECTIONS, 4, minimum=1),
            artifact_uploads=_int(env, Env.ARTIFACT_UPLOADS, 4, minimum=1),
            # The slowest copy planned for: a declared size that would not end
            # in the time left at this rate is not started (infra/spec.py has
            # the arithmetic that ties it to MAX_ARTIFACT_BYTES and the timeouts).
            artifact_planned_bytes_per_second=_int(
                env, Env.ARTIFACT_PLANNED_BYTES_PER_SECOND, 20_000_000, minimum=1
            ),
        )


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
    total_timeout_seconds: float = 15.0
    payloads_bucket_name: str | None = None
    secret_cache_seconds: int = DEFAULT_SECRET_CACHE_SECONDS
    redeliver_grace_seconds: int = DEFAULT_REDELIVER_GRACE_SECONDS

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> PollerSettings:
        return cls(
            table=TableSettings.table_from(env),
            url_policy=UrlPolicy.from_env(env, Env.STATUS_ALLOWED_HOSTS),
            api_token_arn=_optional(env, Env.SUME_API_TOKEN_ARN),
            api_token_value=_optional(env, Env.SUME_API_TOKEN),
            # A status answer over 256 KiB is offloaded like a webhook body.
            payloads_bucket_name=_optional(env, Env.PAYLOADS_BUCKET_NAME),
            secret_cache_seconds=_int(env, Env.SECRET_CACHE_SECONDS, DEFAULT_SECRET_CACHE_SECONDS),
            redeliver_grace_seconds=_int(
                env, Env.REDELIVER_GRACE_SECONDS, DEFAULT_REDELIVER_GRACE_SECONDS
            ),
            poll_initial_seconds=_int(
                env, Env.POLL_INITIAL_SECONDS, DEFAULT_POLL_INITIAL_SECONDS, minimum=1
            ),
            poll_max_interval_seconds=_int(env, Env.POLL_MAX_INTERVAL_SECONDS, 6 * 3600, minimum=1),
            max_poll_age_seconds=_int(env, Env.MAX_POLL_AGE_SECONDS, 7 * 24 * 3600, minimum=1),
            sweep_after_seconds=_int(
                env, Env.SWEEP_AFTER_SECONDS, DEFAULT_SWEEP_AFTER_SECONDS, minimum=1
            ),
            # Polls mostly wait on Sume: 32 at 500 ms answers is 64 polls/s, about
            # what a 512 MB poller's CPU share carries (docs/poller.md).
            max_parallel_polls=_int(env, Env.MAX_PARALLEL_POLLS, 32, minimum=1),
            time_budget_margin_seconds=_int(env, Env.TIME_BUDGET_MARGIN_SECONDS, 10),
            connect_timeout_seconds=_int(env, Env.HTTP_CONNECT_TIMEOUT_SECONDS, 5, minimum=1),
            read_timeout_seconds=_int(env, Env.HTTP_READ_TIMEOUT_SECONDS, 10, minimum=1),
            # One status poll, redirects included: a slow host gets no more.
            total_timeout_seconds=_seconds(env, Env.HTTP_TOTAL_TIMEOUT_SECONDS, 15),
        )


@dataclass(frozen=True)
class RegistrySettings:
    """What registering a job for status polling needs (``sume.registry``)."""

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
            jobs_table_name=table_name or _required(env, Env.JOBS_TABLE_NAME),
            due_shards=_int(env, Env.DUE_SHARDS, DUE_SHARDS, minimum=1),
            poll_initial_seconds=_int(
                env, Env.POLL_INITIAL_SECONDS, DEFAULT_POLL_INITIAL_SECONDS, minimum=1
            ),
            status_allowed_hosts=_list(env, Env.STATUS_ALLOWED_HOSTS),
        )


@dataclass(frozen=True)
class RegistrationSettings:
    """What registering jobs by event needs (``sume.registration``, in the poller)."""

    registry: RegistrySettings
    dead_letter_queue_url: str
    """The registrations DLQ: refused events are parked there at once."""

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> RegistrationSettings:
        return cls(
            registry=RegistrySettings.from_env(env),
            dead_letter_queue_url=_required(env, Env.REGISTRATION_DLQ_URL),
        )
