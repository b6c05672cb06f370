"""What a refused conditional write costs: the stored item from the refusal,
else one consistent read, and no read at all where nobody needs the item."""

import boto3
import pytest
from botocore.stub import Stubber

from sume.jobs import JobsTable

BUSY = {"job_id": {"S": "j"}, "state": {"S": "processing"}, "lease_until": {"N": "5"}}
BUSY_PLAIN = {"job_id": "j", "state": "processing", "lease_until": 5}


@pytest.fixture
def stubbed():
    client = boto3.client("dynamodb", region_name="us-east-1")
    with Stubber(client) as stub:
        yield JobsTable(client, "jobs", 4), stub
        stub.assert_no_pending_responses()


def refuse(stub, item=None):
    stub.add_client_error(
        "update_item",
        service_error_code="ConditionalCheckFailedException",
        http_status_code=400,
        modeled_fields={"Item": item} if item else None,
    )


def test_the_item_handed_back_with_the_refusal_costs_no_read(stubbed):
    jobs, stub = stubbed
    refuse(stub, BUSY)
    assert jobs.claim("j", now=1, lease_seconds=10) == (None, BUSY_PLAIN)


def test_without_it_the_item_is_read_once_and_consistently(stubbed):
    jobs, stub = stubbed
    refuse(stub)
    stub.add_response(
        "get_item",
        {"Item": BUSY},
        expected_params={
            "TableName": "jobs",
            "Key": {"job_id": {"S": "j"}},
            "ConsistentRead": True,
        },
    )
    assert jobs.claim("j", now=1, lease_seconds=10) == (None, BUSY_PLAIN)


def test_writes_that_need_no_stored_item_never_read_it(stubbed):
    jobs, stub = stubbed
    refuse(stub)
    assert jobs.release("j", "claim", now=1, error={"code": "x"}) is False
