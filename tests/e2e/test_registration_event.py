"""Registering a job by an event on the bus, through the local stack end to end."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from devstack.simulator import Sume
from devstack.stack import DevStack
from sume.core.names import DUE_SHARDS
from tests.builders import registration_entry

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

        registered = until(lambda: stack.journal.entries("registered"))
        assert [e.job_id for e in registered] == [job.job_id]
        assert until(lambda: stack.announced()[job.job_id])
        assert sume.hits[f"/status/{job.job_id}"] >= 1

    stored = item(stack, job.job_id)
    assert stored is not None
    assert (stored["state"]["S"], stored["source"]["S"]) == ("processed", "poll")
    assert stored["metadata"]["M"] == {"order": {"S": "o-7"}}
    assert [e.job_id for e in stack.journal.entries("recovered")] == [job.job_id]
    # Another round, fanned out over every shard as in AWS, and a second look at
    # the bus change nothing.
    assert stack.poll()["runs"] == DUE_SHARDS
    time.sleep(0.5)
    assert stack.announced()[job.job_id] == 1


def test_a_refused_registration_waits_in_the_dlq_with_its_reason(stack: DevStack) -> None:
    assert stack.names is not None
    put_registration(stack, {"job_id": "job_refused", "status_url": "https://evil.example/x"})

    refused = until(lambda: stack.journal.entries("refused"))

    assert [e.job_id for e in refused] == ["job_refused"]
    assert item(stack, "job_refused") is None
    (parked,) = stack.client("sqs").receive_message(
        QueueUrl=stack.names.registrations_dlq_url, MessageAttributeNames=["All"]
    )["Messages"]
    assert parked["MessageAttributes"]["reason"]["StringValue"] == "invalid_registration"
    assert json.loads(parked["Body"])["detail"]["job_id"] == "job_refused"
