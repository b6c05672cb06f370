"""Registering submitted jobs for status polling (``sume.polling.registry``)."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

import receiver
from sume.core import aws as clients
from sume.core.errors import ConfigurationError
from sume.core.names import DUE_SHARDS, due_shard
from sume.net.errors import RefusedUrl
from sume.net.policy import HTTPS_ONLY, UrlPolicy, check_url
from sume.polling import registry
from sume.polling.registering import INVALID_REGISTRATION, InvalidRegistration, Registry
from sume.store.job import Job, State
from sume.store.jobs import JobsTable
from tests.builders import LambdaContext, delivery_event, job_body
from tests.integration.conftest import CONFORMANCE

pytestmark = CONFORMANCE

T0 = 1_900_000_000
URL = "https://api.sume.example/v1/jobs/"


def table(aws) -> JobsTable:
    return JobsTable(clients.client("dynamodb"), aws.table, DUE_SHARDS)


def queued(aws) -> list[str]:
    sqs = clients.client("sqs")
    bodies: list[str] = []
    while messages := sqs.receive_message(QueueUrl=aws.queue_url, MaxNumberOfMessages=10).get(
        "Messages", []
    ):
        bodies.extend(m["Body"] for m in messages)
    return bodies


def test_expect_creates_an_awaiting_item_due_for_its_first_poll(aws):
    reg = Registry(table(aws), first_poll_after=900, clock=lambda: T0 + 0.7)
    assert reg.expect("job_1", URL + "job_1", {"user": "u-7", "ratio": 0.5, "tags": ["a"]})
    item = table(aws).get("job_1")
    raw = clients.client("dynamodb").get_item(TableName=aws.table, Key={"job_id": {"S": "job_1"}})
    assert Decimal(raw["Item"]["metadata"]["M"]["ratio"]["N"]) == Decimal("0.5")
    assert item == Job(
        job_id="job_1",
        state=State.AWAITING,
        status_url=URL + "job_1",
        metadata={"user": "u-7", "ratio": 0.5, "tags": ["a"]},
        registered_at=T0,
        poll_attempts=0,
        due_shard=due_shard("job_1", DUE_SHARDS),
        due_at=T0 + 900,
    )


def test_metadata_numbers_keep_every_digit_on_the_item(aws):
    metadata = {
        "price": Decimal("12345678901234567.89"),
        "id": 12345678901234567890123456789012345678,
        "ratio": 0.1,
        "huge": Decimal("9.9999999999999999999999999999999999999E+125"),
        "tags": ("a", "b"),
    }
    assert Registry(table(aws), 900).expect("job_n", URL + "job_n", metadata)
    item = table(aws).get("job_n")
    assert item is not None and item.metadata is not None
    assert item.metadata == {**metadata, "ratio": Decimal("0.1"), "tags": ["a", "b"]}
    assert type(item.metadata["price"]) is Decimal
    raw = clients.client("dynamodb").get_item(TableName=aws.table, Key={"job_id": {"S": "job_n"}})
    assert raw["Item"]["metadata"]["M"]["price"] == {"N": "12345678901234567.89"}


def test_expect_is_a_no_op_for_a_known_job(aws):
    reg = Registry(table(aws), first_poll_after=900, clock=lambda: T0)
    assert reg.expect("job_1", URL + "job_1", {"v": 1})
    later = Registry(table(aws), first_poll_after=900, clock=lambda: T0 + 50)
    assert not later.expect("job_1", URL + "other", {"v": 2})
    item = table(aws).get("job_1")
    assert item is not None
    assert (item.status_url, item.metadata, item.due_at) == (
        URL + "job_1",
        {"v": 1},
        T0 + 900,
    )


def test_registering_an_already_received_job_changes_nothing(aws):
    assert receiver.handler(delivery_event(job_body("job_2")), LambdaContext())["statusCode"] == 200
    before = table(aws).get("job_2")
    assert not Registry(table(aws), 900).expect("job_2", URL + "job_2", {"late": True})
    assert table(aws).get("job_2") == before
    assert queued(aws) == ["job_2"]


def test_a_webhook_for_a_registered_job_is_accepted_once_and_keeps_the_metadata(aws):
    assert Registry(table(aws), 900).expect("job_3", URL + "job_3", {"order": "o-3"})
    body = job_body("job_3", artifacts=["https://cdn.example/3.mp4"])
    answers = [receiver.handler(delivery_event(body), LambdaContext()) for _ in range(3)]
    assert [json.loads(a["body"])["result"] for a in answers] == ["new", "duplicate", "duplicate"]
    item = table(aws).get("job_3")
    assert item is not None
    assert item.state == State.RECEIVED
    assert item.source == "webhook"
    assert item.deliveries == 3
    assert item.metadata == {"order": "o-3"}
    assert item.status_url == URL + "job_3"
    assert json.loads(str(item.body)) == body
    assert queued(aws) == ["job_3"]


def test_module_level_expect_reads_its_table_from_the_environment_or_arguments(aws, monkeypatch):
    monkeypatch.setenv("POLL_INITIAL_SECONDS", "60")
    assert registry.expect("job_4", URL + "job_4")
    assert not registry.expect("job_4", URL + "job_4")
    item = table(aws).get("job_4")
    assert item is not None
    assert (item.due_at, item.metadata) == ((item.registered_at or 0) + 60, None)

    monkeypatch.delenv("JOBS_TABLE_NAME")
    with pytest.raises(ConfigurationError, match="JOBS_TABLE_NAME"):
        registry.expect("job_5", URL + "job_5")
    client = clients.client("dynamodb")
    assert registry.expect("job_5", URL + "job_5", {"n": 1}, table_name=aws.table, dynamodb=client)
    item = table(aws).get("job_5")
    assert item is not None
    assert item.metadata == {"n": 1}


def nested(maps: int) -> dict:
    """``maps`` objects around a scalar: DynamoDB counts one level more."""
    value: dict = {"leaf": 1}
    for _ in range(maps - 1):
        value = {"a": value}
    return value


class NoTable:
    """Stands in for the table where nothing may be written."""

    def register(self, *args, **kwargs):
        raise AssertionError("an invalid registration reached the table")


@pytest.mark.parametrize(
    ("job_id", "url", "metadata", "message"),
    [
        ("", URL + "x", None, "job_id"),
        ("   ", URL + "x", None, "job_id"),
        ("j" * 1025, URL + "x", None, "job_id"),
        (" job ", URL + "x", None, "job_id must not start or end with whitespace"),
        ("job\n", URL + "x", None, "job_id must not contain U\\+000A, a control character"),
        ("job_\ud800", URL + "x", None, "job_id must not contain U\\+D800, a surrogate"),
        ("é" * 129, URL + "x", None, "job_id must be at most 256 UTF-8 bytes"),
        (42, URL + "x", None, "job_id must be a string"),
        ("job", URL + "x" * 3000, None, "status_url"),
        ("job", URL + "x", ["not", "an", "object"], "metadata"),
        ("job", URL + "x", {"when": object()}, "metadata"),
        ("job", URL + "x", {"nan": float("nan")}, "metadata"),
        ("job", URL + "x", {"big": "x" * 70_000}, "metadata"),
        ("job", URL + "x", {"n": 10**38 + 1}, "39 significant digits"),
        ("job", URL + "x", {"n": Decimal("1e-200")}, "magnitude 1E-200"),
        ("job", URL + "x", {"n": 1e126}, r"magnitude 1E\+126"),
        ("job", URL + "x", nested(32), "nests deeper than DynamoDB's 32 levels"),
        ("job", URL + "x", nested(100_000), "nests deeper than DynamoDB's 32 levels"),
        ("job", URL + "x", {"": 1}, "a key is empty"),
        ("job", URL + "x\ud800", None, "status_url: a lone surrogate"),
    ],
)
def test_invalid_registrations_are_refused_before_any_write(job_id, url, metadata, message):
    with pytest.raises(InvalidRegistration, match=message) as refused:
        Registry(NoTable(), 900).expect(job_id, url, metadata)  # type: ignore[arg-type]
    assert refused.value.reason == INVALID_REGISTRATION


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("ftp://sume.example/x", "refused_scheme"),
        ("/v1/jobs/x", "refused_scheme"),
        ("http://api.sume.example/v1/jobs/x", "refused_scheme"),
        ("https://", "invalid_url"),
        ("https://[::1/x", "invalid_url"),
        ("https://user:pw@api.sume.example/v1/jobs/x", "invalid_url"),
    ],
)
def test_a_status_url_the_poller_would_refuse_is_refused_with_its_code(url, reason):
    # The poller's own rule and codes (sume.net.policy.check_url), before any write.
    with pytest.raises(InvalidRegistration, match="status_url") as refused:
        Registry(NoTable(), 900).expect("job", url)  # type: ignore[arg-type]
    assert refused.value.reason == reason
    with pytest.raises(RefusedUrl) as polled:
        check_url(url, HTTPS_ONLY)
    assert polled.value.code == reason


def test_plain_http_is_registered_only_where_the_poller_fetches_it(aws):
    url = "http://127.0.0.1:8080/v1/jobs/job_h"
    local = UrlPolicy(allow_http=True, allow_private_hosts=True, allowed_hosts=("127.0.0.1",))
    assert Registry(table(aws), 900, url_policy=local).expect("job_h", url)
    with pytest.raises(InvalidRegistration) as refused:
        Registry(table(aws), 900).expect("job_h2", url)
    assert refused.value.reason == "refused_scheme"


@pytest.mark.parametrize(
    "url",
    [
        "https://evil.example/v1/jobs/x",
        "https://api.sume.example.evil.example/v1/jobs/x",
        "https://sume.example/v1/jobs/x",
    ],
)
def test_a_status_url_off_the_allow_list_is_refused_before_any_write(url):
    allowed = ("api.sume.example", "*.eu.sume.example")
    policy = UrlPolicy(False, False, allowed)
    refusing = Registry(NoTable(), 900, url_policy=policy)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="STATUS_ALLOWED_HOSTS"):
        refusing.expect("job", url)


def test_module_level_expect_refuses_hosts_off_status_allowed_hosts(aws, monkeypatch):
    monkeypatch.setenv("STATUS_ALLOWED_HOSTS", "*.sume.example")
    assert registry.expect("job_6", URL + "job_6")
    with pytest.raises(ValueError, match="not on STATUS_ALLOWED_HOSTS"):
        registry.expect("job_7", "https://status.elsewhere.example/job_7")
    assert table(aws).get("job_7") is None
    # An empty list refuses no host: the poller then never sends the token.
    monkeypatch.setenv("STATUS_ALLOWED_HOSTS", "")
    assert registry.expect("job_7", "https://status.elsewhere.example/job_7")
