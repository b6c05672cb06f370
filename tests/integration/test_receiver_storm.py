"""Concurrent twins against moto's server over real HTTP."""

import json
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import boto3

from sume.core import runtime
from sume.receiving.compose import receiver_service
from sume.receiving.http import request_from_event
from tests.awscalls import hooking_new_clients
from tests.builders import delivery_event, job_body
from tests.integration.conftest import CONFORMANCE

pytestmark = CONFORMANCE

JOBS = 12
COPIES = 8


def body_of(request: Any) -> str:
    """The job id a SendMessage request carries (a request dict's or a prepared request's body)."""
    body = request["body"] if isinstance(request, dict) else request.body
    return str(json.loads(body)["MessageBody"])


def test_duplicate_storm_stores_and_enqueues_each_job_once(remote_aws):
    bodies = [job_body(f"job_storm_{i}") for i in range(JOBS)]
    deliveries = [b for b in bodies for _ in range(COPIES)]
    # Each delivery is freshly signed, like Sume's retries. The domain entry
    # point is called from many threads at once; Powertools' metric buffer is
    # per-container state (one request at a time in Lambda), so the handler's
    # decorators stay out of the threads.
    events = [delivery_event(b) for b in deliveries]
    # The receiver's SendMessage calls, and their requests on the wire: botocore
    # sends one again when its answer is lost (a read timeout on a busy server).
    calls: list[str] = []
    sent: list[str] = []

    def watch(client: Any) -> None:
        hooks = client.meta.events
        hooks.register(
            "before-call.sqs.SendMessage", lambda params, **_: calls.append(body_of(params))
        )
        hooks.register(
            "before-send.sqs.SendMessage", lambda request, **_: sent.append(body_of(request))
        )

    with hooking_new_clients(watch):
        runtime.reset()
        entry = receiver_service()
        with ThreadPoolExecutor(max_workers=16) as pool:
            receipts = list(pool.map(lambda e: entry.receive(request_from_event(e)), events))
    runtime.reset()

    results = Counter(r.result for r in receipts)
    assert results == {"new": JOBS, "duplicate": JOBS * (COPIES - 1)}
    assert Counter(r.job_id for r in receipts if r.result == "new") == Counter(
        b["job_id"] for b in bodies
    )

    ddb = boto3.client("dynamodb")
    for body in bodies:
        stored = ddb.get_item(
            TableName=remote_aws.table, Key={"job_id": {"S": body["job_id"]}}, ConsistentRead=True
        )["Item"]
        assert stored["deliveries"]["N"] == str(COPIES)
    assert ddb.scan(TableName=remote_aws.table, Select="COUNT")["Count"] == JOBS

    sqs = boto3.client("sqs")
    messages: Counter[str] = Counter()
    while batch := sqs.receive_message(
        QueueUrl=remote_aws.queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=0
    ).get("Messages"):
        messages.update(m["Body"] for m in batch)
    # Each job sent once; its queue holds that message, twice only if botocore
    # resent it and both requests landed (SQS delivers at least once anyway).
    job_ids = Counter(b["job_id"] for b in bodies)
    assert Counter(calls) == job_ids
    on_the_wire = Counter(sent)
    assert set(messages) == set(job_ids)
    assert all(1 <= messages[job] <= on_the_wire[job] for job in job_ids)
