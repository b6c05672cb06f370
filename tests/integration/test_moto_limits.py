"""AWS limits that moto does not enforce by itself, as devstack.moto_limits adds them.

Each limit is checked in-process (``mock_aws``) and through moto's threaded
server, the two ways tests and the local stack reach moto.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from devstack.moto_limits import put_events_size, too_deep
from sume.store.sizing import item_size

Client = Callable[[str], Any]


@pytest.fixture(params=["in_process", "server"])
def client(request: pytest.FixtureRequest) -> Iterator[Client]:
    if request.param == "server":
        url = request.getfixturevalue("moto_server")
        yield lambda service: boto3.client(service, endpoint_url=url)
        return
    with mock_aws():
        yield boto3.client


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def refused(call: Callable[[], Any], code: str, message: str = "") -> None:
    with pytest.raises(ClientError) as error:
        call()
    assert error.value.response["Error"]["Code"] == code
    assert message in error.value.response["Error"]["Message"]


def nested(levels: int, kind: str = "M") -> dict[str, Any]:
    """A string under ``levels - 1`` maps (or lists): ``levels`` levels in all."""
    value: dict[str, Any] = {"S": "leaf"}
    for _ in range(levels - 1):
        value = {"M": {"a": value}} if kind == "M" else {"L": [value]}
    return value


# -- DynamoDB ------------------------------------------------------------------


class Table:
    def __init__(self, client: Client) -> None:
        self.ddb = client("dynamodb")
        self.name = unique("limits")
        self.ddb.create_table(
            TableName=self.name,
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )

    def put(self, item: dict[str, Any], **kwargs: Any) -> None:
        self.ddb.put_item(TableName=self.name, Item=item, **kwargs)

    def update(self, key: str, expression: str, **values: dict[str, Any]) -> None:
        self.ddb.update_item(
            TableName=self.name,
            Key={"pk": {"S": key}},
            UpdateExpression=expression,
            ExpressionAttributeValues={f":{k}": v for k, v in values.items()},
        )

    def get(self, key: str) -> dict[str, Any] | None:
        response = self.ddb.get_item(
            TableName=self.name, Key={"pk": {"S": key}}, ConsistentRead=True
        )
        return response.get("Item")


@pytest.fixture
def table(client: Client) -> Table:
    return Table(client)


TOO_BIG = "Item size has exceeded the maximum allowed size"
TOO_BIG_UPDATE = "Item size to update has exceeded the maximum allowed size"
TOO_DEEP = "Nesting Levels have exceeded supported limits"


def test_item_over_400_kb_is_refused(table: Table) -> None:
    # 400 KB of text under a 2-byte key and two names: over by the names alone.
    item = {"pk": {"S": "k1"}, "v": {"S": "x" * 400 * 1024}}
    refused(lambda: table.put(item), "ValidationException", TOO_BIG)
    assert table.get("k1") is None


def test_item_size_counts_what_containers_cost(table: Table) -> None:
    # Text alone is under the limit. A list of 3,000 empty maps costs
    # 3 + 3,000 x (1 + 3) bytes in DynamoDB's count and nothing in moto's.
    maps: dict[str, Any] = {"L": [{"M": {}}] * 3000}
    item = {"pk": {"S": "k1"}, "v": {"S": "x" * 401_000}, "maps": maps}
    assert item_size(item) == 2 + 2 + 1 + 401_000 + 4 + 3 + 3000 * 4
    refused(lambda: table.put(item), "ValidationException", TOO_BIG)


def test_item_under_the_limit_is_stored(table: Table) -> None:
    item = {"pk": {"S": "k1"}, "v": {"S": "é" * 200_000}}
    table.put(item)
    assert table.get("k1") == item


@pytest.mark.parametrize("kind", ["M", "L"])
def test_nesting_deeper_than_32_levels_is_refused(table: Table, kind: str) -> None:
    table.put({"pk": {"S": "ok"}, "v": nested(32, kind)})
    assert table.get("ok") == {"pk": {"S": "ok"}, "v": nested(32, kind)}
    refused(
        lambda: table.put({"pk": {"S": "deep"}, "v": nested(33, kind)}),
        "ValidationException",
        TOO_DEEP,
    )
    assert table.get("deep") is None


def test_deep_value_in_a_condition_is_refused_up_front(table: Table) -> None:
    refused(
        lambda: table.put(
            {"pk": {"S": "k1"}},
            ConditionExpression="attribute_not_exists(v) OR v = :deep",
            ExpressionAttributeValues={":deep": nested(33)},
        ),
        "ValidationException",
        TOO_DEEP,
    )


STORED = {"pk": {"S": "k1"}, "a": {"S": "before"}, "n": {"N": "1"}, "big": {"S": "y" * 300_000}}


@pytest.mark.parametrize(
    ("expression", "values", "message"),
    [
        # moto alone applies the first action, then refuses the second.
        ("SET a = :a, b = :b", {"a": {"S": "after"}, "b": {"S": "z" * 420_000}}, TOO_BIG_UPDATE),
        # Each value is small enough; the item they make is not.
        (
            "SET a = :a, b = :b ADD n :one",
            {"a": {"S": "after"}, "b": {"S": "z" * 150_000}, "one": {"N": "1"}},
            TOO_BIG_UPDATE,
        ),
        ("SET a = :a, b = :b", {"a": {"S": "after"}, "b": nested(33)}, TOO_DEEP),
    ],
    ids=["one_huge_value", "grows_past_the_limit", "too_deep"],
)
def test_refused_update_leaves_the_item_exactly_as_it_was(
    table: Table, expression: str, values: dict[str, Any], message: str
) -> None:
    table.put(STORED)
    refused(lambda: table.update("k1", expression, **values), "ValidationException", message)
    assert table.get("k1") == STORED


def test_refused_update_of_a_missing_item_creates_nothing(table: Table) -> None:
    refused(
        lambda: table.update("k2", "SET a = :a", a={"S": "z" * 420_000}),
        "ValidationException",
        TOO_BIG_UPDATE,
    )
    assert table.get("k2") is None


def test_transaction_with_an_oversize_item_writes_nothing(table: Table) -> None:
    with pytest.raises(ClientError):
        table.ddb.transact_write_items(
            TransactItems=[
                {"Put": {"TableName": table.name, "Item": {"pk": {"S": "small"}}}},
                {
                    "Update": {
                        "TableName": table.name,
                        "Key": {"pk": {"S": "huge"}},
                        "UpdateExpression": "SET v = :v",
                        "ExpressionAttributeValues": {":v": {"S": "z" * 420_000}},
                    }
                },
            ]
        )
    assert table.get("small") is None
    assert table.get("huge") is None


def test_depth_counts_levels_and_stops_at_the_limit() -> None:
    assert not too_deep(nested(32))
    assert too_deep(nested(33))
    assert too_deep({"L": [{"S": "x"}, nested(32)]}, levels=32)
    assert not too_deep({"M": {}}, levels=1)


# -- EventBridge ---------------------------------------------------------------


def entry(detail_bytes: int, **extra: Any) -> dict[str, Any]:
    """A PutEvents entry whose counted size is 28 + ``detail_bytes`` bytes."""
    return {
        "Source": "src",  # 3 bytes
        "DetailType": "dt",  # 2
        "Detail": json.dumps({"a": "x" * (detail_bytes - 8)}, separators=(",", ":")),
        "Time": 0,  # 14
        "Resources": ["arn:x:y:z"],  # 9
        **extra,
    }


def test_put_events_size_follows_the_aws_rule() -> None:
    assert put_events_size([entry(100)]) == 128
    assert put_events_size([entry(100, Time=None, Resources=[])]) == 105


def test_put_events_of_1_mb_or_more_is_refused_whole(client: Client) -> None:
    events = client("events")
    limit = 1_000_000
    refused(
        lambda: events.put_events(Entries=[entry(limit - 28)]),
        "ValidationException",
        "Total size of the entries in the request is over the limit",
    )
    # Two entries under the limit each, over it together.
    refused(
        lambda: events.put_events(Entries=[entry(limit // 2), entry(limit // 2)]),
        "ValidationException",
    )
    assert events.put_events(Entries=[entry(limit - 29)])["FailedEntryCount"] == 0


def test_an_sqs_message_takes_1_mib_as_aws_now_does(client: Client) -> None:
    """SQS's limit is 1 MiB since 2025-08 (moto's own check): the local stack follows it."""
    sqs = client("sqs")
    url = sqs.create_queue(QueueName=unique("big"))["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="x" * 1024 * 1024)
    refused(
        lambda: sqs.send_message(QueueUrl=url, MessageBody="x" * (1024 * 1024 + 1)),
        "InvalidParameterValue",
    )


def test_events_reach_a_queue_target_whole_with_their_account(client: Client) -> None:
    events, sqs = client("events"), client("sqs")
    bus = events.create_event_bus(Name=unique("bus"))["EventBusArn"].rsplit("/", 1)[1]
    url = sqs.create_queue(QueueName=unique("target"))["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]
    events.put_rule(Name="all", EventBusName=bus, EventPattern=json.dumps({"source": ["src"]}))
    events.put_targets(Rule="all", EventBusName=bus, Targets=[{"Id": "q", "Arn": arn["QueueArn"]}])

    events.put_events(Entries=[{**entry(100), "EventBusName": bus}])

    (message,) = sqs.receive_message(QueueUrl=url)["Messages"]
    event = json.loads(message["Body"])
    assert set(event) >= {"version", "id", "detail-type", "source", "account", "time"}
    assert event["account"] == arn["QueueArn"].split(":")[4]


# -- SQS -----------------------------------------------------------------------


@pytest.fixture
def queue(client: Client) -> tuple[Any, str]:
    sqs = client("sqs")
    return sqs, sqs.create_queue(QueueName=unique("limits"))["QueueUrl"]


def received(sqs: Any, url: str) -> list[str]:
    messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
    return [m["Body"] for m in messages]


@pytest.mark.parametrize(
    "body",
    ["a\x00", "\x01", "\x08", "\x0b", "\x0c", "\x1f", "\ud800", "x\udfffy", "\ufffe", "\uffff"],
)
def test_message_with_a_character_sqs_refuses(queue: tuple[Any, str], body: str) -> None:
    sqs, url = queue
    refused(lambda: sqs.send_message(QueueUrl=url, MessageBody=body), "InvalidMessageContents")
    assert received(sqs, url) == []


def test_message_with_allowed_characters_arrives_unchanged(queue: tuple[Any, str]) -> None:
    sqs, url = queue
    body = "\t\n\r \ud7ff\ue000\ufffd\U00010000\U0010ffffjob_é✓😀"
    sqs.send_message(QueueUrl=url, MessageBody=body)
    assert received(sqs, url) == [body]


def test_batch_with_one_refused_message_sends_none(queue: tuple[Any, str]) -> None:
    sqs, url = queue
    entries = [{"Id": "ok", "MessageBody": "fine"}, {"Id": "bad", "MessageBody": "\x01"}]
    refused(lambda: sqs.send_message_batch(QueueUrl=url, Entries=entries), "InvalidMessageContents")
    assert received(sqs, url) == []


# -- S3 ------------------------------------------------------------------------

LONGEST_KEY = "é" * 512  # 1,024 UTF-8 bytes
TOO_LONG_KEY = LONGEST_KEY + "a"


@pytest.fixture
def bucket(client: Client) -> tuple[Any, str]:
    s3 = client("s3")
    name = unique("limits")
    s3.create_bucket(Bucket=name)
    return s3, name


def test_key_of_1024_bytes_is_stored(bucket: tuple[Any, str]) -> None:
    s3, name = bucket
    s3.put_object(Bucket=name, Key=LONGEST_KEY, Body=b"x")
    assert s3.get_object(Bucket=name, Key=LONGEST_KEY)["Body"].read() == b"x"


@pytest.mark.parametrize("operation", ["put_object", "create_multipart_upload", "copy_object"])
def test_key_over_1024_bytes_is_refused(bucket: tuple[Any, str], operation: str) -> None:
    s3, name = bucket
    s3.put_object(Bucket=name, Key="source", Body=b"x")
    calls = {
        "put_object": lambda: s3.put_object(Bucket=name, Key=TOO_LONG_KEY, Body=b"x"),
        "create_multipart_upload": lambda: s3.create_multipart_upload(
            Bucket=name, Key=TOO_LONG_KEY
        ),
        "copy_object": lambda: s3.copy_object(
            Bucket=name, Key=TOO_LONG_KEY, CopySource={"Bucket": name, "Key": "source"}
        ),
    }
    refused(calls[operation], "KeyTooLongError", "Your key is too long")
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=name).get("Contents", [])]
    assert keys == ["source"]
    assert s3.list_multipart_uploads(Bucket=name).get("Uploads", []) == []


# -- EventBridge: what the local stack's timer stands in for -------------------


def test_a_schedule_rule_with_a_lambda_target_breaks_put_events_on_the_default_bus_only() -> None:
    # docs/local-stack.md says why the local stack ticks the poller on a timer:
    # moto never fires a ScheduleExpression, and a schedule rule (it has no
    # pattern, so it matches every event on the default bus) with a Lambda target
    # makes moto's PutEvents on that bus fail. A custom bus is not touched.
    with mock_aws():
        events = boto3.client("events", region_name="us-east-1")
        events.create_event_bus(Name="own-bus")
        events.put_rule(Name="tick", ScheduleExpression="rate(1 minute)")
        poller = "arn:aws:lambda:us-east-1:123456789012:function:poller"
        events.put_targets(Rule="tick", Targets=[{"Id": "poller", "Arn": poller}])
        entry = {"Source": "x", "DetailType": "d", "Detail": "{}"}

        own = events.put_events(Entries=[{**entry, "EventBusName": "own-bus"}])
        assert own["FailedEntryCount"] == 0
        with pytest.raises(NotImplementedError):
            events.put_events(Entries=[entry])
        refused(
            lambda: events.put_rule(
                Name="tick", EventBusName="own-bus", ScheduleExpression="rate(1 minute)"
            ),
            "ValidationException",
            "only on the default event bus",
        )


def test_an_events_numbers_reach_its_targets_as_they_were_written(client: Client) -> None:
    # devstack/moto_numbers.py: moto alone parses Detail into floats and writes
    # the event from them (12345678901234568); a numeric pattern still matches.
    sqs, events = client("sqs"), client("events")
    bus, name = unique("digits"), unique("digits")
    events.create_event_bus(Name=bus)
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]
    pattern = {"detail": {"amount": [{"numeric": [">", 1e16]}]}}
    events.put_rule(Name=name, EventBusName=bus, EventPattern=json.dumps(pattern))
    events.put_targets(Rule=name, EventBusName=bus, Targets=[{"Id": "q", "Arn": arn["QueueArn"]}])
    written = '{"amount": 12345678901234567.89, "rate": 1.50, "big": 1e400}'
    for detail in (written, '{"amount": 1.5}'):
        entry = {"EventBusName": bus, "Source": "x", "DetailType": "d", "Detail": detail}
        assert events.put_events(Entries=[entry])["FailedEntryCount"] == 0

    (message,) = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    assert f'"detail": {written}' in message["Body"]


def test_an_index_is_read_for_only_what_it_projects(client: Client) -> None:
    from infra import spec
    from sume.core.names import DUE_INDEX

    ddb = client("dynamodb")
    name = unique("projected")
    ddb.create_table(**spec.table_definition(name))
    owed = {"job_id": {"S": "job_1"}, "due_shard": {"N": "3"}, "due_at": {"N": "10"}}
    ddb.put_item(TableName=name, Item={**owed, "state": {"S": "received"}, "body": {"S": "{}"}})
    query = {
        "TableName": name,
        "IndexName": DUE_INDEX,
        "KeyConditionExpression": "due_shard = :s",
        "ExpressionAttributeValues": {":s": {"N": "3"}},
    }
    # AWS's refusal: the index holds no body, and a Query of it cannot read the table.
    refused(
        lambda: ddb.query(**query, ProjectionExpression="job_id, body"),
        "ValidationException",
        f"Global secondary index {DUE_INDEX} does not project [body]",
    )
    refused(
        lambda: ddb.query(
            **query,
            FilterExpression="attribute_exists(#b)",
            ExpressionAttributeNames={"#b": "body"},
        ),
        "ValidationException",
        "does not project [body]",
    )
    items = ddb.query(
        **query, ProjectionExpression="job_id, #s", ExpressionAttributeNames={"#s": "state"}
    )
    assert items["Items"] == [{"job_id": {"S": "job_1"}, "state": {"S": "received"}}]
    # Without a ProjectionExpression, the entry: its keys and what it projects.
    assert ddb.query(**query)["Items"] == [{**owed, "state": {"S": "received"}}]
