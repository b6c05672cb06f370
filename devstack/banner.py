"""What `make run` prints first: where each resource is, and how to send a first job."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Protocol

from devstack.settings import LOCAL_ONLY, DevStackSettings
from infra import spec
from infra.spec import ResourceNames
from sume.core.names import DUE_INDEX, REGISTRATION_DETAIL_TYPE

# Seconds between attempts in the "Send one" line: with Sume's minute, a wrong
# secret would mean nine silent minutes before the simulator gives up.
SEND_ONE_SPACING = 5


class Running(Protocol):
    """What the banner reads of a running stack (``devstack.stack.DevStack``)."""

    settings: DevStackSettings
    names: ResourceNames | None
    url: str
    signing_secret: str
    api_token: str
    endpoint_url: str
    dynamodb_endpoint_url: str

    def client_environment(self) -> dict[str, str]: ...

    def lambda_environment(self) -> dict[str, str]: ...


def banner(stack: Running) -> Iterator[str]:
    assert stack.names is not None
    n = stack.names
    env = stack.lambda_environment()
    secret_origin = (
        "from SUME_COM_WEBHOOK_SIGNING_SECRET"
        if stack.settings.signing_secret
        else "generated dev secret"
    )
    rows = [
        ("webhook URL", stack.url),
        ("signing secret", f"{stack.signing_secret}   ({secret_origin})"),
        ("Sume API token", f"{stack.api_token}   (bearer for status_url polls)"),
        ("moto endpoint", stack.endpoint_url),
        *(
            [("DynamoDB Local", f"{stack.dynamodb_endpoint_url}   (the tables; DYNAMODB=local)")]
            if stack.dynamodb_endpoint_url
            else []
        ),
        ("jobs table", f"{n.table}   (GSI {DUE_INDEX})"),
        ("jobs queue", n.queue_url),
        ("jobs DLQ", f"{n.dlq_url}   (after {spec.MAX_RECEIVES} receives)"),
        ("artifacts bucket", n.artifacts_bucket),
        ("payloads bucket", n.payloads_bucket),
        ("event bus", n.event_bus),
        (
            "registrations",
            f"put '{REGISTRATION_DETAIL_TYPE}' on the bus; "
            f"refused ones wait in {n.registrations_dlq_url}",
        ),
        # Where the two values above are kept, as the functions read them.
        ("signing secret ARN", n.signing_secret_arn),
        ("API token ARN", n.api_token_secret_arn),
        (
            "announcements",
            f"make your own rule on the bus, pattern {json.dumps(spec.ANNOUNCEMENTS_PATTERN)}, "
            "and queue (docs/integrating.md#on-the-local-stack)",
        ),
        # Both region variables: boto3 and the AWS CLI read AWS_DEFAULT_REGION, the
        # SDK for JavaScript only AWS_REGION.
        (
            "any AWS SDK/CLI:",
            " ".join(f"{k}={v}" for k, v in stack.client_environment().items()),
        ),
    ]
    if stack.dynamodb_endpoint_url:
        yield (
            "Sume webhooks: local stack on moto, its tables on Amazon's DynamoDB Local "
            "(no AWS account involved)"
        )
    else:
        yield "Sume webhooks: local stack on moto (no AWS account involved)"
    for label, value in rows:
        yield f"  {label:<19} {value}"
    yield (
        "LOCAL ONLY: "
        + " ".join(f"{k}={v}" for k, v in LOCAL_ONLY.items())
        + " (http and loopback artifact/status URLs, the API token to loopback only;"
        + " the deployed stack refuses loopback)"
    )
    yield (
        "Short timings: "
        + " ".join(f"{k}={env[k]}" for k in spec.LOCAL_TIMINGS)
        + f"; poller every {stack.settings.poll_every_seconds:g}s"
        + f"; a failed message is retried after {stack.settings.retry_delay_seconds}s"
    )
    yield (
        "Send one:  .venv/bin/python -m devstack.simulator send "
        f"{stack.url} --secret {stack.signing_secret} --spacing {SEND_ONE_SPACING}"
    )
