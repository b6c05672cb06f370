"""Create the stack's resources on moto (tests and the local stack)."""

from __future__ import annotations

import json
from typing import Any

from infra import spec
from infra.spec import ResourceNames
from sume.names import Env


def create_resources(
    session: Any,
    prefix: str = "sume-local",
    endpoint_url: str | None = None,
    signing_secret: str | None = None,
    api_token: str | None = None,
) -> ResourceNames:
    """Create the stack's resources; secrets go to Secrets Manager when given."""
    kw = {"endpoint_url": endpoint_url} if endpoint_url else {}
    ddb = session.client("dynamodb", **kw)
    sqs = session.client("sqs", **kw)
    s3 = session.client("s3", **kw)
    events = session.client("events", **kw)

    table = f"{prefix}-jobs"
    ddb.create_table(**spec.table_definition(table))
    ddb.update_time_to_live(
        TableName=table,
        TimeToLiveSpecification={"Enabled": True, "AttributeName": spec.TTL},
    )

    dlq_url = sqs.create_queue(
        QueueName=f"{prefix}-jobs-dlq",
        Attributes={"MessageRetentionPeriod": str(spec.DLQ_RETENTION_SECONDS)},
    )["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    queue_url = sqs.create_queue(
        QueueName=f"{prefix}-jobs",
        Attributes={
            "VisibilityTimeout": str(spec.QUEUE_VISIBILITY_TIMEOUT),
            "RedrivePolicy": json.dumps(
                {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": str(spec.MAX_RECEIVES)}
            ),
        },
    )["QueueUrl"]

    artifacts = f"{prefix}-artifacts"
    payloads = f"{prefix}-payloads"
    for bucket in (artifacts, payloads):
        s3.create_bucket(Bucket=bucket)

    bus = f"{prefix}-jobs-bus"
    events.create_event_bus(Name=bus)

    secrets = session.client("secretsmanager", **kw)
    signing_arn = api_token_arn = None
    if signing_secret:
        signing_arn = secrets.create_secret(
            Name=f"{prefix}-signing-secret", SecretString=signing_secret
        )["ARN"]
    if api_token:
        api_token_arn = secrets.create_secret(
            Name=f"{prefix}-sume-api-token", SecretString=api_token
        )["ARN"]
    return ResourceNames(
        table=table,
        queue_url=queue_url,
        dlq_url=dlq_url,
        artifacts_bucket=artifacts,
        payloads_bucket=payloads,
        event_bus=bus,
        signing_secret_arn=signing_arn,
        api_token_secret_arn=api_token_arn,
    )


def environment(names: ResourceNames) -> dict[str, str]:
    """The Lambda environment the stack would set for these resources."""
    env = {
        Env.JOBS_TABLE_NAME: names.table,
        Env.JOBS_QUEUE_URL: names.queue_url,
        Env.PAYLOADS_BUCKET_NAME: names.payloads_bucket,
        Env.ARTIFACTS_BUCKET_NAME: names.artifacts_bucket,
        Env.EVENT_BUS_NAME: names.event_bus,
    }
    if names.signing_secret_arn:
        env[Env.SIGNING_SECRET_ARN] = names.signing_secret_arn
    if names.api_token_secret_arn:
        env[Env.SUME_API_TOKEN_ARN] = names.api_token_secret_arn
    return env
