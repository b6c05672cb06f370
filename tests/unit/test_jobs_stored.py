"""What a refused conditional write costs: the stored item from the refusal,
else one consistent read, and no read at all where nobody needs the item."""

import boto3
import pytest
from botocore.stub import Stubber

from sume.store.errors import NotClaimable
from sume.store.job import Job, State
from sume.store.jobs import JobsTable

BUSY = {"job_id": {"S": "j"}, "state": {"S": "processing"}, "lease_until": {"N": "5"}}
BUSY_JOB = Job(job_id="j", state=State.PROCESSING, lease_until=5)


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


def stored_with_refused_claim(jobs):
    with pytest.raises(NotClaimable) as refused:
        jobs.claim("j", now=1, lease_seconds=10)
    return refused.value.stored


def test_the_item_handed_back_with_the_refusal_costs_no_read(stubbed):
    jobs, stub = stubbed
    refuse(stub, BUSY)
    assert stored_with_refused_claim(jobs) == BUSY_JOB


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
    assert stored_with_refused_claim(jobs) == BUSY_JOB


def test_a_claim_of_no_such_job_carries_none(stubbed):
    jobs, stub = stubbed
    refuse(stub)
    stub.add_response("get_item", {})
    assert stored_with_refused_claim(jobs) is None


def test_a_claim_hands_back_the_claimed_job(stubbed):
    jobs, stub = stubbed
    claimed = {**BUSY, "claim_id": {"S": "c1"}, "attempts": {"N": "1"}}
    stub.add_response("update_item", {"Attributes": claimed})
    assert jobs.claim("j", now=1, lease_seconds=4) == Job(
        job_id="j", state=State.PROCESSING, lease_until=5, claim_id="c1", attempts=1
    )


def test_writes_that_need_no_stored_item_never_read_it(stubbed):
    jobs, stub = stubbed
    refuse(stub)
    assert jobs.release("j", "claim", now=1, error={"code": "x"}, due_at=2) is False
