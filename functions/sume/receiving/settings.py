"""The receiver's settings, read from its environment."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from sume.contract.signature import TOLERANCE_SECONDS
from sume.core.errors import ConfigurationError
from sume.core.names import Env
from sume.core.settings import (
    DEFAULT_REDELIVER_GRACE_SECONDS,
    DEFAULT_SECRET_CACHE_SECONDS,
    DEFAULT_SWEEP_AFTER_SECONDS,
    TableSettings,
    integer,
    optional,
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
        arn = optional(env, Env.SIGNING_SECRET_ARN)
        value = optional(env, Env.SUME_COM_WEBHOOK_SIGNING_SECRET)
        if not arn and not value:
            raise ConfigurationError(
                f"set {Env.SIGNING_SECRET_ARN} (Secrets Manager) or "
                f"{Env.SUME_COM_WEBHOOK_SIGNING_SECRET}"
            )
        return cls(
            table=TableSettings.table_from(env),
            payloads_bucket_name=optional(env, Env.PAYLOADS_BUCKET_NAME),
            signing_secret_arn=arn,
            signing_secret_value=value,
            secret_cache_seconds=integer(
                env, Env.SECRET_CACHE_SECONDS, DEFAULT_SECRET_CACHE_SECONDS
            ),
            signature_tolerance_seconds=integer(
                env, Env.SIGNATURE_TOLERANCE_SECONDS, TOLERANCE_SECONDS
            ),
            max_body_bytes=integer(env, Env.MAX_BODY_BYTES, 1024 * 1024, minimum=1),
            # About Sume's 10 s delivery timeout: a twin arriving sooner is
            # most likely concurrent with a first enqueue still in flight.
            redeliver_grace_seconds=integer(
                env, Env.REDELIVER_GRACE_SECONDS, DEFAULT_REDELIVER_GRACE_SECONDS
            ),
            # When the sweeper may first consider a received job abandoned.
            sweep_after_seconds=integer(
                env, Env.SWEEP_AFTER_SECONDS, DEFAULT_SWEEP_AFTER_SECONDS, minimum=1
            ),
        )
