"""The receiver's service, wired from its settings, built once per container."""

from __future__ import annotations

import functools
import os
import time

from sume.core import aws
from sume.core.aws import Clients
from sume.core.names import Env
from sume.core.runtime import Clock, per_container
from sume.core.secrets import SigningSecrets, secret_fetcher
from sume.core.settings import required
from sume.receiving.health import TableProbe
from sume.receiving.settings import ReceiverSettings
from sume.receiving.webhook import WebhookReceiver
from sume.store.compose import build_intake


def build_receiver(
    settings: ReceiverSettings, clients: Clients = aws.client, clock: Clock = time.time
) -> WebhookReceiver:
    # Built on first use: a rejected request never creates an AWS client.
    intake = functools.cache(functools.partial(build_intake, settings, clients))
    return WebhookReceiver(
        intake,
        build_signing_secrets(settings, clients),
        settings.signature_tolerance_seconds,
        settings.max_body_bytes,
        clock,
    )


def build_signing_secrets(
    settings: ReceiverSettings, clients: Clients = aws.client
) -> SigningSecrets:
    """From Secrets Manager (cached per container) when an ARN is set, else the environment's."""
    arn = settings.signing_secret_arn
    if not arn:
        return SigningSecrets(None, settings.signing_secret_value)
    return SigningSecrets(
        secret_fetcher(arn, settings.secret_cache_seconds, clients("secretsmanager")), None
    )


@per_container
def receiver_service() -> WebhookReceiver:
    return build_receiver(ReceiverSettings.from_env())


@per_container
def health_probe() -> TableProbe:
    # The table's name alone: the health route must answer even where the
    # receiver's other settings (its signing secret, the queue) are what is broken.
    table = required(os.environ, Env.JOBS_TABLE_NAME)
    return TableProbe(aws.probe_client("dynamodb"), table)
