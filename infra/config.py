"""One stage's settings, read from CDK context (``cdk.json`` or ``-c key=value``).

Every knob has a default, so ``-c stage=prod`` alone is a complete deployment.
Values from the command line arrive as strings; they are checked here, once,
so a typo fails the synth with the key's name instead of deploying nonsense.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from aws_cdk import aws_logs as logs

from infra.spec import POLLER_TIMEOUT

STAGE_PATTERN = re.compile(r"^[a-z][a-z0-9-]{0,23}$")
DEFAULT_STAGE = "dev"

# CloudWatch Logs only accepts these retention periods.
_RETENTION_DAYS = {
    1: logs.RetentionDays.ONE_DAY,
    3: logs.RetentionDays.THREE_DAYS,
    5: logs.RetentionDays.FIVE_DAYS,
    7: logs.RetentionDays.ONE_WEEK,
    14: logs.RetentionDays.TWO_WEEKS,
    30: logs.RetentionDays.ONE_MONTH,
    60: logs.RetentionDays.TWO_MONTHS,
    90: logs.RetentionDays.THREE_MONTHS,
    180: logs.RetentionDays.SIX_MONTHS,
    365: logs.RetentionDays.ONE_YEAR,
}

# Context key -> default. Documented in the README's infra section.
DEFAULTS: Mapping[str, Any] = {
    "throttle_rate": 50,
    "throttle_burst": 100,
    "poll_rate_minutes": 5,
    "alarm_email": "",
    "log_retention_days": 30,
    "log_level": "INFO",
    "worker_batch_size": 10,
    "worker_batching_window_seconds": 5,
    "worker_max_concurrency": 10,
    "signature_rejection_threshold": 20,
    "retention_days": 35,
    "payloads_expire_days": 90,
    "artifacts_infrequent_access_days": 30,
    "artifact_allowed_hosts": "",
    "status_allowed_hosts": "",
}


class ConfigError(ValueError):
    """A context value that cannot be deployed."""


def is_dev_stage(stage: str) -> bool:
    """Dev stages are disposable: their data may be destroyed with the stack."""
    return stage == DEFAULT_STAGE or stage.startswith(f"{DEFAULT_STAGE}-")


@dataclass(frozen=True)
class StageConfig:
    stage: str
    throttle_rate: int
    throttle_burst: int
    poll_rate_minutes: int
    alarm_email: str | None
    log_retention: logs.RetentionDays
    log_level: str
    worker_batch_size: int
    worker_batching_window_seconds: int
    worker_max_concurrency: int
    signature_rejection_threshold: int
    retention_days: int
    payloads_expire_days: int
    artifacts_infrequent_access_days: int
    artifact_allowed_hosts: str
    status_allowed_hosts: str

    @property
    def is_dev(self) -> bool:
        return is_dev_stage(self.stage)

    @classmethod
    def from_context(
        cls,
        stage: str,
        lookup: Callable[[str], Any],
        overrides: Mapping[str, Any] | None = None,
    ) -> StageConfig:
        if not STAGE_PATTERN.match(stage):
            raise ConfigError(
                f"stage {stage!r} must be lowercase letters, digits and '-', "
                "start with a letter, at most 24 characters"
            )
        values = {key: _pick(key, lookup, overrides or {}) for key in DEFAULTS}

        def number(key: str, low: int, high: int) -> int:
            raw = values[key]
            try:
                value = int(raw)
            except (TypeError, ValueError):
                raise ConfigError(f"context {key} must be an integer, got {raw!r}") from None
            if not low <= value <= high:
                raise ConfigError(f"context {key} must be within {low}..{high}, got {value}")
            return value

        retention = number("log_retention_days", 1, 365)
        if retention not in _RETENTION_DAYS:
            raise ConfigError(
                f"context log_retention_days must be one of {sorted(_RETENTION_DAYS)}"
            )
        log_level = str(values["log_level"]).upper()
        if log_level not in {"DEBUG", "INFO", "WARN", "ERROR"}:
            raise ConfigError("context log_level must be DEBUG, INFO, WARN or ERROR")
        retention_days = number("retention_days", 1, 3650)
        payloads_days = number("payloads_expire_days", 1, 3650)
        # A large event's body lives only in the payloads bucket: it must
        # outlive the job item that points to it.
        if payloads_days <= retention_days:
            raise ConfigError("context payloads_expire_days must exceed retention_days")
        poll_rate = number("poll_rate_minutes", 1, 1440)
        # A run may last the poller's whole timeout; the next tick must not
        # start while it is still going.
        if poll_rate * 60 < POLLER_TIMEOUT:
            raise ConfigError(
                f"context poll_rate_minutes must cover the poller's {POLLER_TIMEOUT} s timeout"
            )
        batch_size = number("worker_batch_size", 1, 10_000)
        batching_window = number("worker_batching_window_seconds", 0, 300)
        if batch_size > 10 and batching_window < 1:
            raise ConfigError(
                "context worker_batch_size over 10 needs worker_batching_window_seconds >= 1"
            )
        email = str(values["alarm_email"] or "").strip()
        if email and "@" not in email:
            raise ConfigError(f"context alarm_email is not an e-mail address: {email!r}")
        return cls(
            stage=stage,
            throttle_rate=number("throttle_rate", 1, 10_000),
            throttle_burst=number("throttle_burst", 1, 5_000),
            poll_rate_minutes=poll_rate,
            alarm_email=email or None,
            log_retention=_RETENTION_DAYS[retention],
            log_level=log_level,
            worker_batch_size=batch_size,
            worker_batching_window_seconds=batching_window,
            # SQS event sources accept a maximum concurrency of 2..1000.
            worker_max_concurrency=number("worker_max_concurrency", 2, 1000),
            signature_rejection_threshold=number("signature_rejection_threshold", 1, 1_000_000),
            retention_days=retention_days,
            payloads_expire_days=payloads_days,
            artifacts_infrequent_access_days=number("artifacts_infrequent_access_days", 30, 3650),
            artifact_allowed_hosts=str(values["artifact_allowed_hosts"] or "").strip(),
            status_allowed_hosts=str(values["status_allowed_hosts"] or "").strip(),
        )


def _pick(key: str, lookup: Callable[[str], Any], overrides: Mapping[str, Any]) -> Any:
    if key in overrides:
        return overrides[key]
    value = lookup(key)
    return DEFAULTS[key] if value is None else value
