"""Create the stack's resources on moto (tests and the local stack)."""

from __future__ import annotations

import json
from typing import Any

from infra import spec
from infra.spec import ResourceNames
from sume.core.names import Env

# The local stack's (`make run`) names start with it.
LOCAL_PREFIX = "sume-local"


def signing_secret_name(prefix: str = LOCAL_PREFIX) -> str:
    """The secret holding the signing secret(s) the receiver checks."""
    return f"{prefix}-signing-secret"


def create_resources(
    session: Any,
    prefix: str = LOCAL_PREFIX,
    endpoint_url: str | None = None,
    signing_secret: str | None = None,
    api_token: str | None = None,
    jobs_table: str | None = None,
    leases_table: str | None = None,
    dynamodb_endpoint_url: str | None = None,
) -> ResourceNames:
    """Create the stack's resources; secrets go to Secrets Manager when given.

    ``jobs_table`` names a jobs table that exists already (a global table's
    replica in this region): it is used, not created; so does ``leases_table`` (the
    shard leases, one global table for two regions). ``dynamodb_endpoint_url`` puts the
    tables elsewhere than the rest (DynamoDB Local).
    """
    kw = {"endpoint_url": endpoint_url} if endpoint_url else {}
    ddb = session.client("dynamodb", endpoint_url=dynamodb_endpoint_url or endpoint_url)
    sqs = session.client("sqs", **kw)
    s3 = session.client("s3", **kw)
    events = session.client("events", **kw)

    table = jobs_table or f"{prefix}-jobs"
    if jobs_table is None:
        ddb.create_table(**spec.table_definition(table))
        ddb.update_time_to_live(
            TableName=table,
            TimeToLiveSpecification={"Enabled": True, "AttributeName": spec.TTL},
        )

    queue_url, dlq_url, _ = _queue_with_dlq(sqs, f"{prefix}-jobs", spec.QUEUE_VISIBILITY_TIMEOUT)

    leases = leases_table or f"{prefix}-shard-leases"
    if leases_table is None:
        ddb.create_table(**spec.leases_table_definition(leases))
    shards_url = sqs.create_queue(
        QueueName=f"{prefix}-poll-shards",
        Attributes={
            "VisibilityTimeout": str(spec.SHARDS_VISIBILITY_TIMEOUT),
            "MessageRetentionPeriod": str(spec.SHARDS_MIN_RETENTION_SECONDS),
        },
    )["QueueUrl"]

    artifacts = f"{prefix}-artifacts"
    payloads = f"{prefix}-payloads"
    # S3 refuses a bucket without its region outside us-east-1, moto too.
    region = s3.meta.region_name
    where = {"CreateBucketConfiguration": {"LocationConstraint": region}}
    if region == "us-east-1":
        where = {}
    for bucket in (artifacts, payloads):
        s3.create_bucket(Bucket=bucket, **where)

    bus = f"{prefix}-jobs-bus"
    bus_arn = events.create_event_bus(Name=bus)["EventBusArn"]
    archive = spec.local_archive(prefix)
    events.create_archive(
        ArchiveName=archive,
        EventSourceArn=bus_arn,
        EventPattern=json.dumps(spec.ANNOUNCEMENTS_PATTERN),
        RetentionDays=spec.LOCAL_ARCHIVE_DAYS,
    )
    registrations_url, registrations_dlq_url = _registrations(sqs, events, prefix, bus)

    secrets = session.client("secretsmanager", **kw)
    signing_arn = api_token_arn = None
    if signing_secret:
        signing_arn = secrets.create_secret(
            Name=signing_secret_name(prefix), SecretString=signing_secret
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
        registrations_queue_url=registrations_url,
        registrations_dlq_url=registrations_dlq_url,
        shards_queue_url=shards_url,
        leases_table=leases,
        announcements_archive=archive,
    )


def _queue_with_dlq(sqs: Any, name: str, visibility_timeout: int) -> tuple[str, str, str]:
    """A queue whose messages go to ``<name>-dlq`` after ``spec.MAX_RECEIVES`` receives:
    its URL, the DLQ's URL and the DLQ's ARN."""
    dlq_url = sqs.create_queue(
        QueueName=f"{name}-dlq",
        Attributes={"MessageRetentionPeriod": str(spec.DLQ_RETENTION_SECONDS)},
    )["QueueUrl"]
    dlq_arn = queue_arn(sqs, dlq_url)
    queue_url = sqs.create_queue(
        QueueName=name,
        Attributes={
            "VisibilityTimeout": str(visibility_timeout),
            "RedrivePolicy": json.dumps(
                {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": str(spec.MAX_RECEIVES)}
            ),
        },
    )["QueueUrl"]
    return queue_url, dlq_url, dlq_arn


def queue_arn(sqs: Any, queue_url: str) -> str:
    """The ARN of the queue at ``queue_url``."""
    return str(
        sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
    )


def _registrations(sqs: Any, events: Any, prefix: str, bus: str) -> tuple[str, str]:
    """The registrations queue and DLQ, and the rule on the bus that fills the queue."""
    url, dlq_url, dlq_arn = _queue_with_dlq(
        sqs, f"{prefix}-registrations", spec.REGISTRATIONS_VISIBILITY_TIMEOUT
    )
    rule = f"{prefix}-registrations"
    events.put_rule(Name=rule, EventBusName=bus, EventPattern=json.dumps(spec.REGISTRATION_PATTERN))
    events.put_targets(
        Rule=rule,
        EventBusName=bus,
        Targets=[
            {
                "Id": "registrations",
                "Arn": queue_arn(sqs, url),
                "DeadLetterConfig": {"Arn": dlq_arn},
            }
        ],
    )
    return url, dlq_url


def describe_stack(
    sqs: Any, queue_url: str, webhook_url: str, due_shards: int, previous: int
) -> None:
    """Tag the jobs queue with what the ops CLI needs to know of the running stack
    (the queue, not the table: DynamoDB Local has no tags)."""
    sqs.tag_queue(
        QueueUrl=queue_url,
        Tags={
            spec.LOCAL_TAG_WEBHOOK_URL: webhook_url,
            spec.LOCAL_TAG_DUE_SHARDS: str(due_shards),
            spec.LOCAL_TAG_DUE_SHARDS_PREVIOUS: str(previous),
        },
    )


def environment(names: ResourceNames) -> dict[str, str]:
    """The Lambda environment the stack would set for these resources."""
    env = {
        Env.JOBS_TABLE_NAME: names.table,
        Env.JOBS_QUEUE_URL: names.queue_url,
        Env.PAYLOADS_BUCKET_NAME: names.payloads_bucket,
        Env.ARTIFACTS_BUCKET_NAME: names.artifacts_bucket,
        Env.EVENT_BUS_NAME: names.event_bus,
        **spec.worker_queue_environment(),
    }
    if names.signing_secret_arn:
        env[Env.SIGNING_SECRET_ARN] = names.signing_secret_arn
    if names.api_token_secret_arn:
        env[Env.SUME_API_TOKEN_ARN] = names.api_token_secret_arn
    if names.registrations_dlq_url:
        env[Env.REGISTRATION_DLQ_URL] = names.registrations_dlq_url
    if names.shards_queue_url:
        env[Env.POLL_SHARDS_QUEUE_URL] = names.shards_queue_url
    if names.leases_table:
        env[Env.SHARD_LEASES_TABLE_NAME] = names.leases_table
    return env


# What a consumer of every announcement subscribes with (the banner prints it).


def subscribe_queue(sqs: Any, events: Any, name: str, bus: str) -> str:
    """A queue ``name`` that a rule on ``bus`` fills with every announcement, as a
    consumer's would be; returns its URL."""
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    pattern = json.dumps(spec.ANNOUNCEMENTS_PATTERN)
    events.put_rule(Name=name, EventBusName=bus, EventPattern=pattern)
    events.put_targets(
        Rule=name, EventBusName=bus, Targets=[{"Id": "tap", "Arn": queue_arn(sqs, url)}]
    )
    return str(url)
