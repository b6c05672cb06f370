"""examples/consumer against moto: its rule matches the worker's real announcements,
and its handler does each job's work once, however many copies arrive."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest

from examples.consumer import handler as consumer_handler
from examples.consumer.handler import Consumer
from examples.consumer.subscribe import subscribe
from sume.core.names import DETAIL_TYPES
from tests.builders import job_body
from tests.integration.test_worker import deliver, run

TABLE = "consumer-jobs"


class Subscriber:
    def __init__(self, names: Any, monkeypatch: pytest.MonkeyPatch) -> None:
        self.sqs = boto3.client("sqs")
        self.events = boto3.client("events")
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
