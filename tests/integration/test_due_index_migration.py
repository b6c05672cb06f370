"""A live table moved to a new due-work index, as docs/operations.md ("Changing an
index's projection") says, with the poller finding the due work at every step.

DynamoDB cannot change what an index projects: the new projection comes as a new
index beside the old one (step ``add``), the readers move to it once it is built
(``switch``), and the old one goes (the setting unset), one index change an update.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.exceptions import ClientError

from infra import spec
from sume.contract.envelope import parse
from sume.core import aws as clients
from sume.core.names import DUE_INDEX, DUE_INDEX_BEFORE, Env
from sume.polling.compose import build_poller
from sume.polling.settings import PollerSettings
from sume.store.job import Source
from sume.store.jobs import JobsTable
from tests.builders import job_body

T0 = 1_900_000_000
FOREVER = 10_000.0
SHARDS = 16
TABLE = "jobs-live"


def table_as_it_was() -> dict[str, Any]:
    """The jobs table before: its due-work index projecting ALL, under its old name."""
    definition = spec.table_definition(TABLE)
    indexes = definition["GlobalSecondaryIndexes"]
    definition["GlobalSecondaryIndexes"] = [
        spec.DUE_INDEX_BEFORE_DEFINITION if index["IndexName"] == DUE_INDEX else index
        for index in indexes
    ]
    return definition


def new_index() -> dict[str, Any]:
    return next(
        index
        for index in spec.table_definition(TABLE)["GlobalSecondaryIndexes"]
        if index["IndexName"] == DUE_INDEX
    )


def crash_left(job_id: str, now: int) -> None:
    """A job the receiver recorded and never queued: the sweeper's to find."""
    jobs = JobsTable(clients.client("dynamodb"), TABLE, SHARDS)
    event = parse(json.dumps(job_body(job_id)).encode())
    assert jobs.record(event, Source.WEBHOOK, now, sweep_at=now).new  # type: ignore[arg-type]


def round_sweeps(now: int) -> list[str]:
    """One poller run over every shard at ``now``, as deployed; the job ids it queued."""
    poller = build_poller(PollerSettings.from_env())
    assert poller.run(lambda: FOREVER, now, range(SHARDS)).errors == 0
    sqs = clients.client("sqs")
    url = PollerSettings.from_env().table.jobs_queue_url
    found: list[str] = []
    while messages := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages"):
        for message in messages:
            found.append(message["Body"])
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    return sorted(found)


def index_names() -> list[str]:
    described = clients.client("dynamodb").describe_table(TableName=TABLE)["Table"]
    return sorted(index["IndexName"] for index in described["GlobalSecondaryIndexes"])


def test_the_poller_finds_due_work_before_during_and_after_the_move(aws, monkeypatch):
    ddb = clients.client("dynamodb")
    ddb.create_table(**table_as_it_was())
    monkeypatch.setenv(Env.JOBS_TABLE_NAME, TABLE)
    monkeypatch.setenv(Env.DUE_SHARDS, str(SHARDS))
    # Before: the stack as it was reads its index of the old name.
    monkeypatch.setenv(Env.DUE_INDEX_NAME, DUE_INDEX_BEFORE)
    crash_left("job_before", T0)
    assert round_sweeps(T0 + 1) == ["job_before"]

    # Step "add": UpdateTable creates the new index (DynamoDB backfills it from
    # the items, the old ones too); the poller still reads the old one.
    ddb.update_table(
        TableName=TABLE,
        AttributeDefinitions=table_as_it_was()["AttributeDefinitions"],
        GlobalSecondaryIndexUpdates=[{"Create": new_index()}],
    )
    assert index_names() == sorted([DUE_INDEX, DUE_INDEX_BEFORE, "report-window"])
    crash_left("job_adding", T0 + 2)
    assert round_sweeps(T0 + 1000) == ["job_adding", "job_before"]

    # Step "switch": the new index is ACTIVE; the poller reads it and finds the
    # same work, the items written before it existed included.
    status = {
        index["IndexName"]: index["IndexStatus"]
        for index in ddb.describe_table(TableName=TABLE)["Table"]["GlobalSecondaryIndexes"]
    }
    assert status[DUE_INDEX] == "ACTIVE"
    monkeypatch.setenv(Env.DUE_INDEX_NAME, DUE_INDEX)
    crash_left("job_switched", T0 + 3)
    assert round_sweeps(T0 + 5000) == ["job_adding", "job_before", "job_switched"]

    # The setting unset: the old index goes; the poller reads the new one still.
    ddb.update_table(
        TableName=TABLE, GlobalSecondaryIndexUpdates=[{"Delete": {"IndexName": DUE_INDEX_BEFORE}}]
    )
    monkeypatch.delenv(Env.DUE_INDEX_NAME)
    assert index_names() == sorted([DUE_INDEX, "report-window"])
    crash_left("job_after", T0 + 4)
    assert round_sweeps(T0 + 20000) == ["job_adding", "job_after", "job_before", "job_switched"]
    # A reader left on the old name would now fail, as it would in AWS.
    with pytest.raises(ClientError):
        JobsTable(ddb, TABLE, SHARDS, DUE_INDEX_BEFORE).due(0, T0)


def test_a_due_index_of_another_name_is_a_configuration_error(monkeypatch):
    from sume.core.errors import ConfigurationError
    from sume.core.settings import due_index

    assert due_index({}) == DUE_INDEX
    with pytest.raises(ConfigurationError, match="DUE_INDEX_NAME must be"):
        due_index({Env.DUE_INDEX_NAME: "due-work-v3"})
