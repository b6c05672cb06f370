"""Registering a job by an event on the bus: rule, queue, poller, DLQ (on moto)."""

from __future__ import annotations

import json
import re
from decimal import Decimal
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from jsonschema import Draft4Validator

import poller
from devstack.eventsources import sqs_records
from infra.schemas.files import bundled, file_name
from infra.spec import SCHEMAS_DIR
from sume.core.names import (
    DUE_SHARDS,
    EVENT_SOURCE,
    REGISTRATION_DETAIL_TYPE,
    REGISTRATION_REFUSED_DETAIL_TYPE,
)
from sume.polling import compose
from sume.polling.registering import REFUSED_BY_DYNAMODB, Registry
from sume.polling.registration import MAX_LOGGED_BYTES, Registrations
from sume.store.bus import EventBus
from sume.store.job import Job, State
from sume.store.jobs import JobsTable
from sume.store.queue import DeadLetterQueue
from tests.builders import LambdaContext, registration_entry, scheduled_event
from tests.integration.conftest import CONFORMANCE
from tests.rounds import assignments

pytestmark = CONFORMANCE

URL = "https://api.sume.example/v1/jobs/"


def refusal_schema() -> Draft4Validator:
    path = SCHEMAS_DIR / file_name(REGISTRATION_REFUSED_DETAIL_TYPE)
    return Draft4Validator(bundled(path), format_checker=Draft4Validator.FORMAT_CHECKER)


METADATA = {"customer": "c-1234", "email": "someone@example.com"}


class Bus:
    """The stack's bus and the registrations queue its rule fills, as an application sees them."""

    def __init__(self, names: Any) -> None:
        self.names = names
        self.events = boto3.client("events")
        self.sqs = boto3.client("sqs")
        self._capture: str | None = None
        self.subscribe()

    def put(self, detail: Any, detail_type: str = REGISTRATION_DETAIL_TYPE) -> None:
        response = self.events.put_events(
            Entries=[registration_entry(self.names.event_bus, detail, detail_type)]
        )
        assert response["FailedEntryCount"] == 0

    def received(self, url: str | None = None) -> list[dict[str, Any]]:
        return self.sqs.receive_message(
            QueueUrl=url or self.names.registrations_queue_url,
            MaxNumberOfMessages=10,
            MessageAttributeNames=["All"],
            MessageSystemAttributeNames=["All"],
        ).get("Messages", [])

    def deliver(self) -> dict[str, Any]:
        """Hand what the queue holds to the poller, as its SQS event source would."""
        messages = self.received()
        assert messages, "the rule put nothing on the registrations queue"
        arn = "arn:aws:sqs:us-east-1:123456789012:registrations"
        result: dict[str, Any] = poller.handler(sqs_records(messages, arn), LambdaContext())
        return result

    def announcements(self) -> list[dict[str, Any]]:
        """What a subscriber to the stack's own announcements received."""
        if self._capture is None:
            raise AssertionError("subscribe() first")
        return [json.loads(m["Body"]) for m in self.received(self._capture)]

    def subscribe(self) -> None:
        url = self.sqs.create_queue(QueueName="announcements")["QueueUrl"]
        arn = self.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])[
            "Attributes"
        ]["QueueArn"]
        self.events.put_rule(
            Name="announcements",
            EventBusName=self.names.event_bus,
            EventPattern=json.dumps({"source": [EVENT_SOURCE]}),
        )
        self.events.put_targets(
            Rule="announcements",
            EventBusName=self.names.event_bus,
            Targets=[{"Id": "q", "Arn": arn}],
        )
        self._capture = url

    def parked(self) -> list[dict[str, Any]]:
        return self.received(self.names.registrations_dlq_url)

    def queue(self, body: str) -> None:
        """Put ``body`` on the registrations queue as the rule would, number for number."""
        self.sqs.send_message(QueueUrl=self.names.registrations_queue_url, MessageBody=body)


def event_text(detail: str) -> str:
    """A registration event as the rule delivers it, its detail the JSON text given.

    moto's bus parses the detail into floats on the way to the queue, so
    events whose numbers matter go on the queue as text.
    """
    envelope = json.dumps(
        {
            "version": "0",
            "id": "b2e1c0de-0000-4000-8000-000000000001",
            "detail-type": REGISTRATION_DETAIL_TYPE,
            "source": "com.example.orders",
            "account": "123456789012",
            "time": "2030-01-01T00:00:00Z",
            "region": "us-east-1",
            "resources": [],
        }
    )
    return f'{envelope[:-1]}, "detail": {detail}}}'


def levels(count: int, leaf: str = '"x"') -> str:
    """JSON text DynamoDB counts ``count`` levels deep: ``count - 1`` objects around ``leaf``."""
    return '{"a":' * (count - 1) + leaf + "}" * (count - 1)


@pytest.fixture
def bus(aws, monkeypatch) -> Bus:
    monkeypatch.setenv("STATUS_ALLOWED_HOSTS", "api.sume.example")
    return Bus(aws)


def item(aws, job_id: str) -> Job | None:
    return JobsTable(boto3.client("dynamodb"), aws.table, DUE_SHARDS).get(job_id)


def emitted(capsys) -> dict[str, Any]:
    """The metrics of the last invocation (Powertools EMF on stdout)."""
    return emitted_all(capsys)[-1]


def emitted_all(capsys) -> list[dict[str, Any]]:
    return [json.loads(line) for line in capsys.readouterr().out.splitlines() if "_aws" in line]


def test_an_event_on_the_bus_registers_the_job(aws, bus, capsys):
    bus.put({"job_id": "job_ev1", "status_url": URL + "job_ev1", "metadata": METADATA})

    assert bus.deliver() == {"batchItemFailures": []}

    stored = item(aws, "job_ev1")
    assert stored is not None
    assert (stored.state, stored.status_url) == (State.AWAITING, URL + "job_ev1")
    assert stored.metadata == METADATA
    assert bus.parked() == []
    assert emitted(capsys)["JobsRegistered"] == [1.0]


def test_registering_a_known_job_by_event_changes_nothing(aws, bus, capsys):
    bus.put({"job_id": "job_ev2", "status_url": URL + "job_ev2", "metadata": {"v": 1}})
    bus.deliver()
    bus.put({"job_id": "job_ev2", "status_url": URL + "other", "metadata": {"v": 2}})

    assert bus.deliver() == {"batchItemFailures": []}

    stored = item(aws, "job_ev2")
    assert stored is not None
    assert (stored.status_url, stored.metadata) == (URL + "job_ev2", {"v": 1})
    assert emitted(capsys)["RegistrationsOfKnownJobs"] == [1.0]


BAD = {
    "unknown field": (
        {"job_id": "job_b1", "status_url": URL + "b1", "metdata": METADATA},
        "unknown_field",
    ),
    "missing status_url": ({"job_id": "job_b2", "metadata": METADATA}, "missing_field"),
    "host off the allow-list": (
        {"job_id": "job_b3", "status_url": "https://evil.example/x", "metadata": METADATA},
        "refused_host",
    ),
    "not an absolute URL": (
        {"job_id": "job_b4", "status_url": "/v1/jobs/b4", "metadata": METADATA},
        "refused_scheme",
    ),
    "plain http, which the deployed poller refuses": (
        {"job_id": "job_b9", "status_url": "http://api.sume.example/v1/jobs/b9"},
        "refused_scheme",
    ),
    "empty job id": ({"job_id": "", "status_url": URL + "b5"}, "invalid_registration"),
    "job id not a string": ({"job_id": 7, "status_url": URL + "b6"}, "invalid_registration"),
    "metadata not an object": (
        {"job_id": "job_b7", "status_url": URL + "b7", "metadata": ["a"]},
        "invalid_registration",
    ),
    "metadata over 64 KiB": (
        {"job_id": "job_b8", "status_url": URL + "b8", "metadata": {"x": "y" * 70_000}},
        "invalid_registration",
    ),
}


@pytest.mark.parametrize(("detail", "reason"), BAD.values(), ids=BAD.keys())
def test_a_bad_event_is_parked_counted_and_logged_without_its_metadata(
    aws, bus, capsys, logs, detail, reason
):
    bus.put(detail)

    # Not a failure for SQS to retry: the event is already in the DLQ.
    assert bus.deliver() == {"batchItemFailures": []}

    (parked,) = bus.parked()
    event = json.loads(parked["Body"])
    assert (event["detail-type"], event["detail"]) == (REGISTRATION_DETAIL_TYPE, detail)
    attributes = {k: v["StringValue"] for k, v in parked["MessageAttributes"].items()}
    assert attributes["reason"] == reason
    assert attributes["message"]
    # The application hears of it on the bus, without its metadata.
    (announced,) = bus.announcements()
    refusal_schema().validate(announced)
    assert announced["detail-type"] == REGISTRATION_REFUSED_DETAIL_TYPE
    job_id = detail.get("job_id")
    assert announced["detail"] == {
        "version": 1,
        "reason": reason,
        "message": attributes["message"],
        "job_id": job_id if isinstance(job_id, str) else None,
        "registration_event_id": event["id"],
        "refused_at": announced["detail"]["refused_at"],
    }
    assert "c-1234" not in json.dumps(announced)
    assert emitted(capsys)["RegistrationsRejected"] == [1.0]
    (line,) = logs.lines("ERROR")
    assert line["reason"] == reason
    assert line["source"] == "com.example.orders"
    assert "someone@example.com" not in logs.text
    assert "c-1234" not in logs.text
    if isinstance(detail, dict) and isinstance(detail.get("job_id"), str) and detail["job_id"]:
        assert item(aws, detail["job_id"]) is None


def test_a_message_that_is_no_registration_is_parked_too(aws, bus, capsys):
    sqs = boto3.client("sqs")
    # EventBridge itself refuses a detail that is not an object; a message sent
    # to the queue by hand (or redriven after an edit) may be anything.
    bodies = [
        "not json",
        json.dumps({"detail-type": "Sume Job Completed", "detail": {}}),
        json.dumps({"detail-type": REGISTRATION_DETAIL_TYPE, "detail": "job_1"}),
    ]
    for body in bodies:
        sqs.send_message(QueueUrl=aws.registrations_queue_url, MessageBody=body)

    assert bus.deliver() == {"batchItemFailures": []}

    reasons = sorted(m["MessageAttributes"]["reason"]["StringValue"] for m in bus.parked())
    assert reasons == ["malformed_event", "malformed_event", "not_a_registration"]


def test_a_long_job_id_is_logged_cut(aws, bus, logs):
    job_id = "j" * 5000
    bus.put({"job_id": job_id, "status_url": URL + "x"})

    bus.deliver()

    (line,) = logs.lines("ERROR")
    assert line["job_id"] == job_id[:MAX_LOGGED_BYTES]


UNSTORABLE = {
    "nested 33 levels, the attribute the first": (levels(33), "nests deeper than DynamoDB's 32"),
    "an integer of 39 significant digits": (
        '{"n": 123456789012345678901234567890123456789}',
        "39 significant digits",
    ),
    "1e-200": ('{"n": 1e-200}', "magnitude 1E-200"),
    "1e126": ('{"n": 1e126}', "magnitude 1E\\+126"),
    "an empty key": ('{"": "x"}', "a key is empty"),
    "a lone surrogate": ('{"note": "\\ud800"}', "lone surrogate"),
}


@pytest.mark.parametrize(("metadata", "message"), UNSTORABLE.values(), ids=UNSTORABLE.keys())
def test_metadata_dynamodb_cannot_store_is_refused_at_once(
    aws, bus, capsys, logs, metadata, message
):
    body = event_text(
        f'{{"job_id": "job_u1", "status_url": "{URL}job_u1", "metadata": {metadata}}}'
    )
    bus.queue(body)

    # Not a failure for SQS to retry an hour long: parked now, saying why.
    assert bus.deliver() == {"batchItemFailures": []}

    (parked,) = bus.parked()
    assert parked["Body"] == body
    attributes = {k: v["StringValue"] for k, v in parked["MessageAttributes"].items()}
    assert attributes["reason"] == "invalid_registration"
    assert re.search(message, attributes["message"])
    (metrics,) = emitted_all(capsys)
    assert metrics["RegistrationsRejected"] == [1.0]
    assert "RegistrationRetries" not in metrics
    (line,) = logs.lines("ERROR")
    assert line["job_id"] == "job_u1"
    assert item(aws, "job_u1") is None


def test_metadata_numbers_are_stored_and_read_back_exactly(aws, bus):
    metadata = (
        '{"price": 12345678901234567.89, "id": 12345678901234567890123456789012345678, '
        '"deep": ' + levels(31, "-1E-130") + "}"
    )
    bus.queue(
        event_text(f'{{"job_id": "job_x1", "status_url": "{URL}job_x1", "metadata": {metadata}}}')
    )

    assert bus.deliver() == {"batchItemFailures": []}

    stored = item(aws, "job_x1")
    assert stored is not None and stored.metadata is not None
    price = stored.metadata["price"]
    assert (type(price), price) == (Decimal, Decimal("12345678901234567.89"))
    assert stored.metadata["id"] == 12345678901234567890123456789012345678
    deep = stored.metadata["deep"]
    for _ in range(30):
        deep = deep["a"]
    assert deep == Decimal("-1E-130")
    assert bus.parked() == []


def test_a_message_nested_past_any_parser_limit_is_parked_as_malformed(aws, bus):
    bus.queue(
        event_text(f'{{"job_id": "job_d1", "status_url": "{URL}d1", "metadata": {levels(50_000)}}}')
    )

    assert bus.deliver() == {"batchItemFailures": []}

    (parked,) = bus.parked()
    assert parked["MessageAttributes"]["reason"]["StringValue"] == "malformed_event"


class Refusing:
    """DynamoDB refusing the write as invalid, for a limit the checks do not know."""

    def __init__(self) -> None:
        self.exceptions = boto3.client("dynamodb").exceptions

    def update_item(self, **kwargs: Any) -> None:
        raise ClientError(
            {"Error": {"Code": "ValidationException", "Message": "Item size has exceeded"}},
            "UpdateItem",
        )


def test_a_registration_dynamodb_refuses_as_invalid_is_parked_not_retried(
    aws, bus, monkeypatch, capsys
):
    jobs = JobsTable(Refusing(), aws.table, DUE_SHARDS)
    dead_letters = DeadLetterQueue(boto3.client("sqs"), aws.registrations_dlq_url)
    refusing = Registrations(Registry(jobs, 900), dead_letters, EventBus(bus.events, aws.event_bus))
    monkeypatch.setattr(compose, "registrations_service", lambda: refusing)
    bus.put({"job_id": "job_v1", "status_url": URL + "v1", "metadata": METADATA})

    assert bus.deliver() == {"batchItemFailures": []}

    (parked,) = bus.parked()
    attributes = {k: v["StringValue"] for k, v in parked["MessageAttributes"].items()}
    assert attributes["reason"] == REFUSED_BY_DYNAMODB
    assert "Item size has exceeded" in attributes["message"]
    assert emitted(capsys)["RegistrationsRejected"] == [1.0]


class Unavailable:
    def update_item(self, **kwargs: Any) -> None:
        raise ClientError({"Error": {"Code": "ServiceUnavailable", "Message": "down"}}, "Update")


def test_a_registration_dynamodb_could_not_take_is_retried_by_sqs(aws, bus, monkeypatch, capsys):
    jobs = JobsTable(Unavailable(), aws.table, DUE_SHARDS)
    dead_letters = DeadLetterQueue(boto3.client("sqs"), aws.registrations_dlq_url)
    broken = Registrations(Registry(jobs, 900), dead_letters, EventBus(bus.events, aws.event_bus))
    monkeypatch.setattr(compose, "registrations_service", lambda: broken)
    bus.put({"job_id": "job_t1", "status_url": URL + "t1"})
    (message,) = bus.received()
    bus.sqs.change_message_visibility(
        QueueUrl=aws.registrations_queue_url,
        ReceiptHandle=message["ReceiptHandle"],
        VisibilityTimeout=0,
    )

    result = bus.deliver()

    assert [f["itemIdentifier"] for f in result["batchItemFailures"]] == [message["MessageId"]]
    assert bus.parked() == []
    assert emitted(capsys)["RegistrationRetries"] == [1.0]


def test_the_rule_takes_registrations_only(aws, bus):
    bus.put({"job_id": "job_x"}, detail_type="Sume Job Completed")
    assert bus.received() == []


def test_a_scheduled_event_still_starts_a_poller_round(aws, bus):
    result = poller.handler(scheduled_event(), LambdaContext(timeout_seconds=60))
    assert result["runs"] == DUE_SHARDS
    assert "batchItemFailures" not in result
    assert len(assignments()) == DUE_SHARDS
