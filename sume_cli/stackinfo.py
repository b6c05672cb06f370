"""Where a deployment's resources are: a stage's stack outputs, or the local stack's names.

A deployed stage is described by its CloudFormation outputs (the keys in
``infra.spec``), so the ops tools never guess physical names that CDK chose.
The local stack (moto) has no CloudFormation; its resources carry the fixed
``sume-local`` prefix of ``devstack.resources``, and each is looked up by name
so a wrong endpoint or prefix fails here, not halfway through a command.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from infra import spec
from infra.spec import ResourceNames

# The default prefix of devstack.resources.create_resources, used by the local stack.
LOCAL_PREFIX = "sume-local"
# The local stack's functions: each named ``<prefix>-<function>``, and logging to
# ``/aws/lambda/<prefix>-<function>`` on moto, as Lambda names a function's log group.
LOCAL_FUNCTIONS = ("receiver", "worker", "poller")


def local_log_groups(prefix: str) -> dict[str, str]:
    """Each of the local stack's functions by name, and its log group."""
    return {f"{prefix}-{name}": f"/aws/lambda/{prefix}-{name}" for name in LOCAL_FUNCTIONS}


class DiscoveryError(Exception):
    """The resources could not be found; the message says where we looked."""


@dataclass(frozen=True)
class Stack:
    names: ResourceNames
    webhook_url: str | None
    description: str
    due_shards: int | None = None
    """The shards the stack's writers spread the due-work index over, when it says."""
    due_shards_previous: int | None = None
    """A larger count its poller still reads while a lowered one drains."""


def _error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def from_outputs(outputs: Mapping[str, str], description: str) -> Stack:
    """Map CloudFormation outputs onto resource names; every required key must be there."""
    # Stacks deployed before registration by event have no registration queues,
    # those before the poller fanned out no shards queue or leases table.
    optional = {
        "signing_secret_arn",
        "api_token_secret_arn",
        "registrations_queue_url",
        "registrations_dlq_url",
        "shards_queue_url",
        "leases_table",
        "announcements_archive",
    }
    missing = [
        key for field, key in spec.OUTPUTS.items() if field not in optional and key not in outputs
    ]
    if missing:
        raise DiscoveryError(f"{description} lacks the output(s) {', '.join(sorted(missing))}")
    values = {
        field: outputs[key] for field, key in spec.OUTPUTS.items() if outputs.get(key) is not None
    }
    return Stack(ResourceNames(**values), outputs.get(spec.OUTPUT_WEBHOOK_URL), description)


def discover_stage(cloudformation: Any, stage: str) -> Stack:
    """Read the stage's stack outputs."""
    name = spec.stack_name(stage)
    region = cloudformation.meta.region_name
    try:
        stacks = cloudformation.describe_stacks(StackName=name)["Stacks"]
    except ClientError as exc:
        if _error_code(exc) == "ValidationError":
            raise DiscoveryError(
                f"no stack {name} in {region} (is stage {stage!r} deployed in this region?)"
            ) from None
        raise
    outputs = {o["OutputKey"]: o["OutputValue"] for o in stacks[0].get("Outputs", [])}
    return from_outputs(outputs, f"stack {name} ({region})")


def discover_local(clients: Mapping[str, Any], endpoint_url: str, prefix: str) -> Stack:
    """Find the local stack's resources by name on ``endpoint_url``.

    ``clients`` maps service names (dynamodb, sqs, secretsmanager) to clients
    already pointed at the endpoint. Buckets and the bus are named the same way
    and need no call to be found.
    """
    where = f"{endpoint_url} (prefix {prefix})"
    table = f"{prefix}-jobs"
    try:
        clients["dynamodb"].describe_table(TableName=table)
    except ClientError as exc:
        if _error_code(exc) == "ResourceNotFoundException":
            raise DiscoveryError(
                f"no table {table} at {clients['dynamodb'].meta.endpoint_url} (a local stack "
                "started with DYNAMODB=local keeps its tables on DynamoDB Local: set "
                "AWS_ENDPOINT_URL_DYNAMODB as its banner says)"
            ) from None
        raise
    # One listing, not a call a queue: every command on the local stack starts here.
    listed = clients["sqs"].list_queues(QueueNamePrefix=f"{prefix}-", MaxResults=1000)
    by_name = {url.rsplit("/", 1)[-1]: url for url in listed.get("QueueUrls", [])}
    queues = {}
    for field, queue in (
        ("queue_url", f"{prefix}-jobs"),
        ("dlq_url", f"{prefix}-jobs-dlq"),
        ("registrations_queue_url", f"{prefix}-registrations"),
        ("registrations_dlq_url", f"{prefix}-registrations-dlq"),
        ("shards_queue_url", f"{prefix}-poll-shards"),
    ):
        if queue not in by_name:
            raise DiscoveryError(f"no queue {queue} at {where}")
        queues[field] = by_name[queue]
    secrets = {}
    for field, secret in (
        ("signing_secret_arn", f"{prefix}-signing-secret"),
        ("api_token_secret_arn", f"{prefix}-sume-api-token"),
    ):
        try:
            secrets[field] = clients["secretsmanager"].describe_secret(SecretId=secret)["ARN"]
        except ClientError as exc:
            # A local stack may take its secrets from the environment instead.
            if _error_code(exc) != "ResourceNotFoundException":
                raise
    names = ResourceNames(
        table=table,
        artifacts_bucket=f"{prefix}-artifacts",
        payloads_bucket=f"{prefix}-payloads",
        event_bus=f"{prefix}-jobs-bus",
        announcements_archive=spec.local_archive(prefix),
        **queues,
        **secrets,
    )
    # A stack started before it tagged its jobs queue says neither.
    tags = clients["sqs"].list_queue_tags(QueueUrl=queues["queue_url"]).get("Tags", {})
    shards, previous = (
        tags.get(key, "") for key in (spec.LOCAL_TAG_DUE_SHARDS, spec.LOCAL_TAG_DUE_SHARDS_PREVIOUS)
    )
    return Stack(
        names,
        tags.get(spec.LOCAL_TAG_WEBHOOK_URL),
        f"local stack at {where}",
        int(shards) if shards.isdigit() else None,
        int(previous) if previous.isdigit() else None,
    )
