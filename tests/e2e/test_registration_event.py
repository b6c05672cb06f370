"""Registering a job by an event on the bus, through the local stack end to end."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from devstack.journal import Entry
from devstack.resources import subscribe_queue
from devstack.simulator import Sume
from devstack.stack import DevStack
from sume.core.names import Env
from tests.builders import registration_entry
from tests.e2e.conftest import E2E_STACK

BOUND = 60.0


def put_registration(stack: DevStack, detail: dict[str, Any]) -> None:
    """What an application in any language does: one PutEvents on the stack's bus."""
    assert stack.names is not None
    response = stack.client("events").put_events(
        Entries=[registration_entry(stack.names.event_bus, detail)]
    )
    assert response["FailedEntryCount"] == 0


def until(condition: Callable[[], Any]) -> Any:
    deadline = time.monotonic() + BOUND
    while not (value := condition()) and time.monotonic() < deadline:
        time.sleep(0.05)
    return value


def entries_of(stack: DevStack, kind: str, job_id: str) -> list[Entry]:
    """This job's journal entries: other tests share the stack and its journal."""
    return [e for e in stack.journal.entries(kind) if e.job_id == job_id]


def item(stack: DevStack, job_id: str) -> dict[str, Any] | None:
    assert stack.names is not None
    found = stack.client("dynamodb").get_item(
        TableName=stack.names.table, Key={"job_id": {"S": job_id}}, ConsistentRead=True
    )
    return found.get("Item")


def test_an_event_on_the_bus_registers_a_job_that_is_polled_processed_and_announced_once(
    stack: DevStack,
) -> None:
    with Sume(stack.url, [stack.signing_secret], api_token=stack.api_token) as sume:
        # Sume finished the job, but its webhook never reaches us.
        job = sume.new_job(artifacts=1)
        put_registration(
            stack,
            {"job_id": job.job_id, "status_url": job.status_url, "metadata": {"order": "o-7"}},
        )

        registered = until(lambda: entries_of(stack, "registered", job.job_id))
        assert len(registered) == 1
        assert until(lambda: stack.announced()[job.job_id])
        assert sume.hits[f"/status/{job.job_id}"] >= 1

    stored = item(stack, job.job_id)
    assert stored is not None
    assert (stored["state"]["S"], stored["source"]["S"]) == ("processed", "poll")
    assert stored["metadata"]["M"] == {"order": {"S": "o-7"}}
    assert len(entries_of(stack, "recovered", job.job_id)) == 1
    # Another round, fanned out over every shard as in AWS, and a second look at
    # the bus change nothing.
    assert stack.poll()["runs"] == int(E2E_STACK[Env.DUE_SHARDS])
    # Read in the order a second announcement would travel: each run holds its
    # assignment until it ends, what it queued is worked (and announced) before its
    # message leaves the jobs queue, and the journal counts an announcement before
    # it deletes it from its own.
    assert stack.names is not None
    queues = (stack.names.shards_queue_url, stack.names.queue_url, stack.journal_queue_url)
    assert until(lambda: not any(stack.queue_depth(url) for url in queues))
    assert stack.announced()[job.job_id] == 1


def test_metadata_numbers_keep_every_digit_in_the_item_and_the_announcement(
    stack: DevStack,
) -> None:
    assert stack.names is not None
    # More digits than a double holds: AWS carries the number as it was written.
    amount = "12345678901234567.89"
    queue = subscribe_queue(
        stack.client("sqs"), stack.client("events"), "digits", stack.names.event_bus
    )
    with Sume(stack.url, [stack.signing_secret], api_token=stack.api_token) as sume:
        job = sume.new_job(artifacts=0)
        entry = registration_entry(stack.names.event_bus, {})
        entry["Detail"] = (
            f'{{"job_id": "{job.job_id}", "status_url": "{job.status_url}", '
            f'"metadata": {{"amount": {amount}}}}}'
        )
        assert stack.client("events").put_events(Entries=[entry])["FailedEntryCount"] == 0
        assert until(lambda: stack.announced()[job.job_id])

    stored = item(stack, job.job_id)
    assert stored is not None
    assert stored["metadata"]["M"]["amount"] == {"N": amount}
    bodies = [
        m["Body"]
        for m in stack.client("sqs").receive_message(QueueUrl=queue, MaxNumberOfMessages=10)[
            "Messages"
        ]
    ]
    (announced,) = [b for b in bodies if job.job_id in b]
    metadata = json.loads(announced, parse_float=Decimal)["detail"]["metadata"]
    assert metadata["amount"] == Decimal(amount)


def test_a_refused_registration_waits_in_the_dlq_with_its_reason(stack: DevStack) -> None:
    assert stack.names is not None
    put_registration(stack, {"job_id": "job_refused", "status_url": "https://evil.example/x"})

    refused = until(lambda: entries_of(stack, "refused", "job_refused"))

    assert len(refused) == 1
    assert item(stack, "job_refused") is None
    parked = [
        message
        for message in stack.client("sqs").receive_message(
            QueueUrl=stack.names.registrations_dlq_url,
            MessageAttributeNames=["All"],
            MaxNumberOfMessages=10,
        )["Messages"]
        if json.loads(message["Body"])["detail"]["job_id"] == "job_refused"
    ]
    assert [m["MessageAttributes"]["reason"]["StringValue"] for m in parked] == ["refused_host"]
