"""Reading settings from the environment: the readers every slice's settings use, and the table.

Each ``from_env`` fails at the first invocation with a message that names the
missing or invalid variable, instead of a KeyError deep inside a request.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from sume.core.errors import ConfigurationError
from sume.core.names import DUE_INDEX, DUE_INDEX_BEFORE, DUE_SHARDS, MAX_DUE_SHARDS, Env

# Defaults that more than one reader applies (two handlers, or a handler and
# the ops CLI), so they cannot drift apart.
DEFAULT_SWEEP_AFTER_SECONDS: Final = 120
DEFAULT_REDELIVER_GRACE_SECONDS: Final = 15
DEFAULT_SECRET_CACHE_SECONDS: Final = 300
DEFAULT_POLL_INITIAL_SECONDS: Final = 900

# Upper ends of the ranges that more than one setting shares. No timeout, margin
# or fetch can outlast an invocation, which Lambda ends after 15 minutes at most.
LAMBDA_MAX_SECONDS: Final = 900
DAY_SECONDS: Final = 24 * 3600
# A signing secret or API token is read again after this long, so a rotation waits
# for it (docs/operations.md, "Rotating secrets"): at most an hour.
MAX_SECRET_CACHE_SECONDS: Final = 3600


def missing(name: str) -> ConfigurationError:
    return ConfigurationError(f"{name} must be set")


def required(env: Mapping[str, str], name: str) -> str:
    value = env.get(name, "").strip()
    if not value:
        raise missing(name)
    return value


def optional(env: Mapping[str, str], name: str) -> str | None:
    return env.get(name, "").strip() or None


def integer(env: Mapping[str, str], name: str, default: int, low: int, high: int) -> int:
    """An integer within ``low..high`` (the range its docs table gives), else the default."""
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigurationError(f"{name} must be an integer, got {raw!r}") from None
    if not low <= value <= high:
        raise ConfigurationError(f"{name} must be within {low}..{high}, got {value}")
    return value


def required_integer(env: Mapping[str, str], name: str, low: int, high: int) -> int:
    required(env, name)
    return integer(env, name, 0, low, high)


def seconds(env: Mapping[str, str], name: str, default: float, high: float) -> float:
    """A duration above 0 and at most ``high`` seconds (fractions allowed), else the default."""
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigurationError(f"{name} must be a number of seconds, got {raw!r}") from None
    # Written so that NaN fails too.
    if not 0 < value <= high:
        raise ConfigurationError(f"{name} must be above 0 and at most {high:g}, got {raw!r}")
    return value


def flag(env: Mapping[str, str], name: str) -> bool:
    return env.get(name, "").strip().lower() in {"1", "true", "yes", "on"}


def names(env: Mapping[str, str], name: str) -> tuple[str, ...]:
    return tuple(h.strip().lower() for h in env.get(name, "").split(",") if h.strip())


@dataclass(frozen=True)
class TableSettings:
    jobs_table_name: str
    jobs_queue_url: str
    due_shards: int
    due_index: str = DUE_INDEX

    @staticmethod
    def table_from(env: Mapping[str, str]) -> TableSettings:
        return TableSettings(
            jobs_table_name=required(env, Env.JOBS_TABLE_NAME),
            jobs_queue_url=required(env, Env.JOBS_QUEUE_URL),
            due_shards=due_shards(env),
            due_index=due_index(env),
        )


@dataclass(frozen=True)
class PeerPayloads:
    """The other region's payloads bucket, where large events are written too (two regions)."""

    region: str
    bucket: str

    @staticmethod
    def from_env(env: Mapping[str, str]) -> PeerPayloads | None:
        region = optional(env, Env.PEER_REGION)
        bucket = optional(env, Env.PEER_PAYLOADS_BUCKET_NAME)
        if (region is None) != (bucket is None):
            raise ConfigurationError(
                f"{Env.PEER_REGION} and {Env.PEER_PAYLOADS_BUCKET_NAME} are set together "
                "or not at all"
            )
        return PeerPayloads(region, bucket) if region and bucket else None


def due_shards(env: Mapping[str, str]) -> int:
    """Partitions of the due-work index: every reader of the table must agree on it."""
    return integer(env, Env.DUE_SHARDS, DUE_SHARDS, 1, MAX_DUE_SHARDS)


def retention_days(env: Mapping[str, str]) -> int:
    """How long an ended job is kept: the worker sets ``expires_at`` by it, and the
    MRSC table's expiry (two regions, no TTL) looks back by it."""
    return integer(env, Env.RETENTION_DAYS, 35, 1, 3650)


def due_index(env: Mapping[str, str]) -> str:
    """The due-work index its readers query: the one before, while a live table migrates
    (docs/operations.md, "Changing an index's projection")."""
    name = env.get(Env.DUE_INDEX_NAME) or DUE_INDEX
    if name not in (DUE_INDEX, DUE_INDEX_BEFORE):
        raise ConfigurationError(
            f"{Env.DUE_INDEX_NAME} must be {DUE_INDEX} or {DUE_INDEX_BEFORE}, got {name!r}"
        )
    return name


def secret_cache_seconds(env: Mapping[str, str]) -> int:
    """How long a container keeps a secret it read: the receiver's and the poller's."""
    return integer(
        env, Env.SECRET_CACHE_SECONDS, DEFAULT_SECRET_CACHE_SECONDS, 0, MAX_SECRET_CACHE_SECONDS
    )


def redeliver_grace_seconds(env: Mapping[str, str]) -> int:
    """How long a duplicate waits before it re-enqueues owed work: the receiver's and the
    poller's (a redelivery by status poll)."""
    return integer(env, Env.REDELIVER_GRACE_SECONDS, DEFAULT_REDELIVER_GRACE_SECONDS, 0, 3600)


def sweep_after_seconds(env: Mapping[str, str]) -> int:
    """When the sweeper first considers a received job's work abandoned."""
    return integer(env, Env.SWEEP_AFTER_SECONDS, DEFAULT_SWEEP_AFTER_SECONDS, 1, DAY_SECONDS)
