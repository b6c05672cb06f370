"""The stand-ins for Lambda's event sources, on the local stack's moto server."""

from __future__ import annotations

import json
import threading
import uuid
from typing import Any

import pytest

from devstack.eventsources import Schedule, SqsEventSource
from devstack.stack import DevStack
from infra import spec

# Generous: waits on events, never a measure of speed.
PATIENCE = 60


@pytest.fixture
def queues(stack: DevStack) -> tuple[Any, str, str]:
    """A queue with the stack's redrive policy, and its DLQ."""
    sqs = stack.client("sqs")
    name = f"es-{uuid.uuid4().hex[:8]}"
    dlq = sqs.create_queue(QueueName=f"{name}-dlq")["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    queue = sqs.create_queue(
        QueueName=name,
        Attributes={
            "RedrivePolicy": json.dumps(
                {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": str(spec.MAX_RECEIVES)}
            )
        },
    )["QueueUrl"]
    return sqs, queue, dlq


def bodies(sqs: Any, url: str) -> list[str]:
    messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=0)
    return sorted(m["Body"] for m in messages.get("Messages", []))


def source(sqs: Any, url: str, handler: Any) -> SqsEventSource:
    return SqsEventSource(sqs, url, handler, "fn", 30, retry_delay_seconds=0, wait_seconds=0)


def test_batch_item_failures_stay_queued_and_reach_the_dlq_once(
    queues: tuple[Any, str, str],
) -> None:
    sqs, queue, dlq = queues
    for body in ("good-1", "poison", "good-2"):
        sqs.send_message(QueueUrl=queue, MessageBody=body)
    seen: list[str] = []

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        assert context.get_remaining_time_in_millis() > 0
        records = event["Records"]
        assert all(r["eventSource"] == "aws:sqs" for r in records)
        seen.extend(r["body"] for r in records)
        return {
            "batchItemFailures": [
                {"itemIdentifier": r["messageId"]} for r in records if r["body"] == "poison"
            ]
        }

    events = source(sqs, queue, handler)
    while events.poll_once():
        pass

    assert sorted(seen) == sorted(["good-1", "good-2"] + ["poison"] * spec.MAX_RECEIVES)
    assert bodies(sqs, queue) == []
    assert bodies(sqs, dlq) == ["poison"]


def test_an_exception_or_an_unknown_identifier_fails_the_whole_batch(
    queues: tuple[Any, str, str],
) -> None:
    sqs, queue, _ = queues
    sqs.send_message(QueueUrl=queue, MessageBody="a")
    sqs.send_message(QueueUrl=queue, MessageBody="b")

    def raising(event: dict[str, Any], context: Any) -> dict[str, Any]:
        raise RuntimeError("function crashed")

    def unknown_id(event: dict[str, Any], context: Any) -> dict[str, Any]:
        return {"batchItemFailures": [{"itemIdentifier": "not-in-this-batch"}]}

    assert source(sqs, queue, raising).poll_once() == 2
    assert bodies(sqs, queue) == ["a", "b"]
    assert source(sqs, queue, unknown_id).poll_once() == 2
    assert bodies(sqs, queue) == ["a", "b"]
    assert source(sqs, queue, lambda e, c: {"batchItemFailures": []}).poll_once() == 2
    assert bodies(sqs, queue) == []


def test_the_schedule_hands_the_poller_a_scheduled_event_and_a_deadline() -> None:
    calls: list[tuple[dict[str, Any], int]] = []
    results: list[Any] = []

    def handler(event: dict[str, Any], context: Any) -> dict[str, int]:
        calls.append((event, context.get_remaining_time_in_millis()))
        return {"polled": 0}

    schedule = Schedule(handler, 60, "poller", 120, observer=results.append)
    assert schedule.run_once() == {"polled": 0}
    event, remaining = calls[0]
    assert event["detail-type"] == "Scheduled Event"
    assert event["source"] == "aws.events"
    assert 0 < remaining <= 120_000
    assert results == [{"polled": 0}]


def test_a_disabled_mapping_reads_nothing_and_a_batch_it_raced_goes_back_unworked(
    queues: tuple[Any, str, str],
) -> None:
    sqs, queue, _ = queues
    sqs.send_message(QueueUrl=queue, MessageBody="job")
    worked: list[str] = []
    answers = iter([False, True, False])  # off; on before the receive, off after it

    def handler(event: dict[str, Any], context: Any) -> None:
        worked.extend(r["body"] for r in event["Records"])

    paused = SqsEventSource(
        sqs, queue, handler, "fn", 30, 0, wait_seconds=0, enabled=lambda: next(answers)
    )
    assert paused.poll_once() == 0
    assert paused.poll_once() == 0
    assert worked == []
    # Still there, visible at once, for the mapping once it is enabled again.
    assert bodies(sqs, queue) == ["job"]
    assert SqsEventSource(sqs, queue, handler, "fn", 30, 0, wait_seconds=0).poll_once() == 1
    assert worked == ["job"]


def test_a_disabled_schedule_does_not_tick_but_a_tick_by_hand_runs() -> None:
    ticks: list[dict[str, Any]] = []
    enabled = False
    schedule = Schedule(
        lambda event, context: ticks.append(event), 1, "fn", 30, enabled=lambda: enabled
    )
    schedule.step()
    assert ticks == []
    schedule.run_once()
    assert len(ticks) == 1
    enabled = True
    schedule.step()
    assert len(ticks) == 2


def test_a_tick_with_nothing_due_is_skipped_but_a_tick_by_hand_runs() -> None:
    """An idle stack ran a whole round (a run per shard group) every tick."""
    ticks: list[dict[str, Any]] = []
    due = False
    schedule = Schedule(lambda event, context: ticks.append(event), 1, "fn", 30, due=lambda: due)
    schedule.step()
    assert ticks == []
    schedule.run_once()
    assert len(ticks) == 1
    due = True
    schedule.step()
    assert len(ticks) == 2


class HeldQueue:
    """An SQS client whose long poll returns only when the test lets it."""

    def __init__(self) -> None:
        self.polling, self.answer, self.released = (threading.Event() for _ in range(3))
        self.visibility: list[int] = []

    def get_queue_attributes(self, **request: Any) -> dict[str, Any]:
        return {"Attributes": {"QueueArn": "arn:aws:sqs:us-east-1:123456789012:held"}}

    def receive_message(self, **request: Any) -> dict[str, Any]:
        self.polling.set()
        self.answer.wait()
        return {"Messages": [{"MessageId": "m1", "ReceiptHandle": "r1", "Body": "job"}]}

    def change_message_visibility_batch(self, **request: Any) -> None:
        self.visibility += [entry["VisibilityTimeout"] for entry in request["Entries"]]
        self.released.set()


def test_a_stop_does_not_wait_out_a_long_poll_and_what_it_brings_goes_back_unworked() -> None:
    """With one-second polls a stop waited a second; a 10 s poll would hold it 10 s."""
    sqs, worked = HeldQueue(), []
    loop = SqsEventSource(sqs, "held", lambda event, context: worked.append(event), "fn", 30, 0)
    loop.start()
    assert sqs.polling.wait(PATIENCE)
    stopping = threading.Thread(target=loop.stop)
    stopping.start()
    stopping.join(PATIENCE)  # the poll is still held: a stop that waited for it never ends
    assert not stopping.is_alive()
    sqs.answer.set()
    assert sqs.released.wait(PATIENCE)
    assert (sqs.visibility, worked) == ([0], [])
