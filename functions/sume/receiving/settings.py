"""The receiver's settings, read from its environment."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from sume.contract.signature import TOLERANCE_SECONDS
from sume.core.errors import ConfigurationError
from sume.core.names import Env
from sume.core.settings import (
    PeerPayloads,
    TableSettings,
    integer,
    optional,
    redeliver_grace_seconds,
    secret_cache_seconds,
    sweep_after_seconds,
)

# No larger body reaches the function: Lambda's invocation payload is 6 MB at most.
MAX_BODY_BYTES_LIMIT = 6 * 1024 * 1024


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
    peer_payloads: PeerPayloads | None = None

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
            secret_cache_seconds=secret_cache_seconds(env),
            # 0 would refuse every delivery; over an hour, a captured request
            # could be replayed for that long.
            signature_tolerance_seconds=integer(
                env, Env.SIGNATURE_TOLERANCE_SECONDS, TOLERANCE_SECONDS, 1, 3600
            ),
            max_body_bytes=integer(env, Env.MAX_BODY_BYTES, 1024 * 1024, 1, MAX_BODY_BYTES_LIMIT),
            # About Sume's 10 s delivery timeout: a twin arriving sooner is
            # most likely concurrent with a first enqueue still in flight.
            redeliver_grace_seconds=redeliver_grace_seconds(env),
            sweep_after_seconds=sweep_after_seconds(env),
            peer_payloads=PeerPayloads.from_env(env),
        )
