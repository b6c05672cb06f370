"""Reading settings from the environment: the readers every slice's settings use, and the table.

Each ``from_env`` fails at the first invocation with a message that names the
missing or invalid variable, instead of a KeyError deep inside a request.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from sume.core.errors import ConfigurationError
from sume.core.names import DUE_SHARDS, Env

# Defaults that more than one reader applies (two handlers, or a handler and
# the ops CLI), so they cannot drift apart.
DEFAULT_SWEEP_AFTER_SECONDS: Final = 120
DEFAULT_REDELIVER_GRACE_SECONDS: Final = 15
DEFAULT_SECRET_CACHE_SECONDS: Final = 300
DEFAULT_POLL_INITIAL_SECONDS: Final = 900


def missing(name: str) -> ConfigurationError:
    return ConfigurationError(f"{name} must be set")


def required(env: Mapping[str, str], name: str) -> str:
    value = env.get(name, "").strip()
    if not value:
        raise missing(name)
    return value


def optional(env: Mapping[str, str], name: str) -> str | None:
    return env.get(name, "").strip() or None


def integer(env: Mapping[str, str], name: str, default: int, minimum: int = 0) -> int:
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


def required_integer(env: Mapping[str, str], name: str) -> int:
    required(env, name)
    return integer(env, name, 0, minimum=1)


def seconds(env: Mapping[str, str], name: str, default: float) -> float:
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


def flag(env: Mapping[str, str], name: str) -> bool:
    return env.get(name, "").strip().lower() in {"1", "true", "yes", "on"}


def names(env: Mapping[str, str], name: str) -> tuple[str, ...]:
    return tuple(h.strip().lower() for h in env.get(name, "").split(",") if h.strip())


@dataclass(frozen=True)
class TableSettings:
    jobs_table_name: str
    jobs_queue_url: str
    due_shards: int

    @staticmethod
    def table_from(env: Mapping[str, str]) -> TableSettings:
        return TableSettings(
            jobs_table_name=required(env, Env.JOBS_TABLE_NAME),
            jobs_queue_url=required(env, Env.JOBS_QUEUE_URL),
            due_shards=due_shards(env),
        )


def due_shards(env: Mapping[str, str]) -> int:
    """Partitions of the due-work index: every reader of the table must agree on it."""
    return integer(env, Env.DUE_SHARDS, DUE_SHARDS, minimum=1)
