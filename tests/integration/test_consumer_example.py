"""examples/consumer against moto: its rule matches the worker's real announcements,
and its handler does each announcement's work once, however many copies arrive,
while a replay or a completion after lost (a higher sequence) is worked as new."""

from __future__ import annotations

import json
import time
from typing import Any

import boto3
import pytest

from examples.consumer import handler as consumer_handler
from examples.consumer.handler import Consumer
from examples.consumer.subscribe import subscribe
from sume.core.names import DETAIL_TYPES
from sume.store.jobs import JobsTable
from tests.builders import job_body
from tests.integration.test_poller import (
    FOREVER,
    Clock,
    make_poller,
    register,
)
from tests.integration.test_worker import deliver, run

TABLE = "consumer-jobs"


class Subscriber:
    def __init__(self, names: Any, monkeypatch: pytest.MonkeyPatch) -> None:
        self.sqs = boto3.client("sqs")
        self.events = boto3.client("events")
        self.names = names
        self.bus = names.event_bus
        boto3.client("dynamodb").create_table(
            TableName=TABLE,
            BillingMode="PAY_PER_REQUEST",
            KeySchema=[{"AttributeName": "job_id", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "job_id", "AttributeType": "S"}],
        )
        self.queue_url = subscribe(self.events, self.sqs, self.bus, "consumer")
        self.done: list[dict[str, Any]] = []
        monkeypatch.setattr(
            consumer_handler,
            "consumer",
            lambda: Consumer(boto3.client("dynamodb"), TABLE, self.done.append),
        )

    def records(self) -> list[dict[str, Any]]:
        messages = self.sqs.receive_message(QueueUrl=self.queue_url, MaxNumberOfMessages=10)
        return [
            {"messageId": m["MessageId"], "body": m["Body"]} for m in messages.get("Messages", [])
        ]


@pytest.fixture
def subscriber(aws, monkeypatch) -> Subscriber:
    return Subscriber(aws, monkeypatch)


def test_the_rule_takes_completed_jobs_and_the_handler_works_each_once(
    subscriber, server, local_urls
):
    url = server.route("/render.mp4", body=b"video")
    completed = deliver(job_body(artifacts=[url]))
    failed = deliver(job_body(event="job.failed"))
    assert run(completed, failed)[1] == []

    (record,) = subscriber.records()
    announcement = json.loads(record["body"])
    assert announcement["detail-type"] == DETAIL_TYPES["completed"]
    assert announcement["detail"]["job_id"] == completed

    # A second copy of the same announcement, as after a worker crash.
    copy = {**record, "messageId": "copy"}
    assert consumer_handler.handler({"Records": [record, copy]}, None) == {"batchItemFailures": []}

    assert [d["job_id"] for d in subscriber.done] == [completed]
    assert subscriber.done[0]["artifacts"][0]["uri"].endswith("000-render.mp4")


def test_a_copy_re_announced_on_the_bus_is_dropped_too(subscriber, server, local_urls):
    job_id = deliver(job_body(artifacts=[]))
    assert run(job_id)[1] == []
    (first,) = subscriber.records()
    event = json.loads(first["body"])
    subscriber.events.put_events(
        Entries=[
            {
                "EventBusName": subscriber.bus,
                "Source": event["source"],
                "DetailType": event["detail-type"],
                "Detail": json.dumps(event["detail"]),
            }
        ]
    )
    (second,) = subscriber.records()

    consumer_handler.handler({"Records": [first]}, None)
    consumer_handler.handler({"Records": [second]}, None)

    assert [d["job_id"] for d in subscriber.done] == [job_id]


def test_work_that_fails_is_retried_not_dropped(subscriber, monkeypatch):
    job_id = deliver(job_body(artifacts=[]))
    assert run(job_id)[1] == []
    (record,) = subscriber.records()
    attempts: list[str] = []

    def flaky(detail: dict[str, Any]) -> None:
        attempts.append(detail["job_id"])
        if len(attempts) == 1:
            raise RuntimeError("downstream unavailable")

    monkeypatch.setattr(
        consumer_handler, "consumer", lambda: Consumer(boto3.client("dynamodb"), TABLE, flaky)
    )

    first = consumer_handler.handler({"Records": [record]}, None)
    again = consumer_handler.handler({"Records": [record]}, None)

    assert first == {"batchItemFailures": [{"itemIdentifier": record["messageId"]}]}
    assert again == {"batchItemFailures": []}
    assert attempts == [job_id, job_id]


def test_a_replay_is_worked_as_new_while_copies_and_late_ones_are_dropped(
    subscriber, server, local_urls
):
    job_id = deliver(job_body(artifacts=[server.route("/r.mp4", body=b"r")]))
    assert run(job_id)[1] == []
    (first,) = subscriber.records()
    now = int(time.time())
    assert JobsTable(boto3.client("dynamodb"), subscriber.names.table, 16).request_replay(
        job_id, now, now + 120
    )
    assert run(job_id)[1] == []
    (replayed,) = subscriber.records()
    copy_of = {**first, "messageId": "copy-1"}
    late = {**first, "messageId": "late"}

    batch = [first, copy_of, replayed, {**replayed, "messageId": "copy-2"}, late]
    assert consumer_handler.handler({"Records": batch}, None) == {"batchItemFailures": []}

    # The replay is worked (it may say something new); EventBridge's copies are not,
    # nor is the first announcement arriving again after the replay superseded it.
    assert [(d["job_id"], d["sequence"], d["replay"]) for d in subscriber.done] == [
        (job_id, 1, False),
        (job_id, 2, True),
    ]


def test_a_lost_job_completed_later_reaches_the_consumer_twice(
    subscriber,
    aws,
    sume,
    monkeypatch,
):
    monkeypatch.setenv("MAX_POLL_AGE_SECONDS", "900")
    now = time.time()
    clock = Clock(now - 1000)
    assert register(aws, clock, "job_lost", sume.job_url("job_lost"), {"order": "o-1"})
    sume.answer("job_lost", {"status": "running"})
    clock.now = now
    assert make_poller(clock).run(lambda: FOREVER).lost == 1
    assert run("job_lost")[1] == []
    (lost,) = subscriber.records()
    deliver(job_body("job_lost", artifacts=[]))
    assert run("job_lost")[1] == []
    (completed,) = subscriber.records()

    handled = consumer_handler.handler({"Records": [lost, completed, lost]}, None)

    assert handled == {"batchItemFailures": []}
    kinds = [json.loads(r["body"])["detail-type"] for r in (lost, completed)]
    assert kinds == [DETAIL_TYPES["lost"], DETAIL_TYPES["completed"]]
    assert [(d["sequence"], d["metadata"]) for d in subscriber.done] == [
        (1, {"order": "o-1"}),
        (2, {"order": "o-1"}),
    ]
    assert subscriber.done[1]["lost_at"] == subscriber.done[0]["lost_at"]
