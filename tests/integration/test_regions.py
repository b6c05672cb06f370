"""One MRSC jobs table for two regions (devstack.moto_mrsc), against the receiver.

A write racing another region's gets ``ReplicatedWriteConflictException``,
unapplied: the receiver answers 503 so Sume retries, and never takes it for a
failed condition (a duplicate).
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import boto3
import pytest

import receiver
from devstack import moto_mrsc
from devstack.moto_mrsc import Replication
from infra.spec import ResourceNames
from sume.core import runtime
from sume.polling import registry
from tests.builders import LambdaContext, delivery_event, job_body

HOME, OTHER = "us-east-1", "us-east-2"


@pytest.fixture
def replication(aws: ResourceNames) -> Iterator[Replication]:
    """Every write racing the other region's (within a minute) is a conflict."""
    replicated = Replication(
        home=HOME, regions=frozenset({HOME, OTHER}), conflict_share=1.0, window_seconds=60
    )
    moto_mrsc.install(replicated)
    runtime.reset()
    try:
        yield replicated
    finally:
        moto_mrsc.uninstall()


def deliver(job_id: str) -> tuple[int, dict[str, str]]:
    response = receiver.handler(delivery_event(job_body(job_id)), LambdaContext())
    return response["statusCode"], json.loads(response["body"])


def register_in_the_other_region(names: ResourceNames, job_id: str) -> None:
    assert registry.expect(
        job_id,
        f"https://api.sume.example/jobs/{job_id}",
        table_name=names.table,
        dynamodb=boto3.client("dynamodb", region_name=OTHER),
    )


def queued(names: ResourceNames) -> int:
    sqs = boto3.client("sqs")
    got = sqs.receive_message(QueueUrl=names.queue_url, MaxNumberOfMessages=10)
    return len(got.get("Messages", []))


def test_both_regions_read_the_one_table(aws: ResourceNames, replication: Replication) -> None:
    assert deliver("job_everywhere") == (200, {"result": "new", "job_id": "job_everywhere"})
    stored = boto3.client("dynamodb", region_name=OTHER).get_item(
        TableName=aws.table, Key={"job_id": {"S": "job_everywhere"}}, ConsistentRead=True
    )
    assert stored["Item"]["state"] == {"S": "received"}
    assert replication.total_conflicts() == 0


def test_a_delivery_racing_the_other_region_is_503_and_its_retry_is_decided_once(
    aws: ResourceNames, replication: Replication
) -> None:
    register_in_the_other_region(aws, "job_racing")

    # Recording the event races the other region's registration: botocore
    # retries the conflict (a modeled retryable error; sume.core.aws.FAST's
    # max_attempts of 3 count retries: 4 calls), then it surfaces.
    assert deliver("job_racing") == (503, {"error": "storage_unavailable"})
    assert replication.conflicts["update_item"] == 4
    table = boto3.client("dynamodb")
    item = table.get_item(TableName=aws.table, Key={"job_id": {"S": "job_racing"}})["Item"]
    assert item["state"] == {"S": "awaiting"}
    assert queued(aws) == 0

    # Sume's retry, once the other region's write is over: recorded once, queued once.
    replication.window_seconds = 0
    assert deliver("job_racing") == (200, {"result": "new", "job_id": "job_racing"})
    assert deliver("job_racing") == (200, {"result": "duplicate", "job_id": "job_racing"})
    item = table.get_item(TableName=aws.table, Key={"job_id": {"S": "job_racing"}})["Item"]
    assert (item["state"], item["deliveries"]) == ({"S": "received"}, {"N": "2"})
    assert queued(aws) == 1
