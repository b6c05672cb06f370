"""On a store that ignores ALL_OLD (dynalite, for one), nothing changes.

Such a store refuses a conditional write without handing back the stored
item. The receiver's duplicate, conflict and crash-gap stories, told on
DynamoDB in test_receiver.py, are told again here on such a store, and the
worker still tells a busy job from a finished one: each reads the stored
item with one consistent GetItem instead.
"""

import time

import boto3
import pytest

import receiver
from devstack.counting import CallCounter
from sume.core import runtime
from sume.store.jobs import JobsTable
from sume.working.compose import build_worker
from sume.working.errors import JobBusy
from sume.working.results import Action
from sume.working.settings import WorkerSettings
from tests.awscalls import without_all_old
from tests.builders import LambdaContext, delivery_event, job_body
from tests.integration import test_receiver as on_dynamodb


@pytest.fixture
def store(aws):
    with without_all_old():
        runtime.reset()
        yield aws


def deliver(body):
    response = receiver.handler(delivery_event(body), LambdaContext())
    assert response["statusCode"] == 200, response
    return body["job_id"]


def test_duplicate_counts_and_never_overwrites(store):
    on_dynamodb.test_duplicate_counts_and_never_overwrites(store)


def test_conflicting_duplicate_is_kept_out_and_counted(store):
    on_dynamodb.test_conflicting_duplicate_is_kept_out_and_counted(store)


def test_crash_gap_retry_after_grace_is_enqueued_again(store):
    on_dynamodb.test_crash_gap_sqs_down_then_retry_after_grace(store)


def test_a_duplicate_costs_one_read_more(store):
    body = job_body("job_calls")
    deliver(body)
    with CallCounter().installed() as counter:
        runtime.reset()
        deliver(body)
    assert counter.calls == ["dynamodb.UpdateItem", "dynamodb.GetItem", "dynamodb.UpdateItem"]


def test_claim_of_a_busy_job_says_busy(store):
    job_id = deliver(job_body("job_busy", event="job.failed"))
    JobsTable(boto3.client("dynamodb"), store.table, 16).claim(job_id, int(time.time()), 900)
    with pytest.raises(JobBusy):
        build_worker(WorkerSettings.from_env()).process(job_id)


def test_claim_of_a_finished_job_says_finished(store):
    job_id = deliver(job_body("job_done", event="job.failed"))
    processor = build_worker(WorkerSettings.from_env())
    assert processor.process(job_id).action == Action.PROCESSED
    again = processor.process(job_id)
    assert (again.action, again.reason, again.outcome) == (Action.SKIPPED, "finished", "failed")


def test_claim_of_an_unknown_job_says_absent(store):
    result = build_worker(WorkerSettings.from_env()).process("job_unknown")
    assert (result.action, result.reason) == (Action.SKIPPED, "absent")
