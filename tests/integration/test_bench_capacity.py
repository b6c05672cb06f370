"""The poller capacity harness in miniature: real runs, counted calls, no timing asserted."""

import subprocess
import sys

import boto3
import pytest
from moto import mock_aws

from bench import capacity
from devstack.resources import create_resources
from devstack.simulator import Sume
from sume.core.names import DUE_INDEX


def test_a_run_that_prints_nothing_is_an_error_that_says_why_not_an_index_error():
    # The bench once died of an IndexError when a poller run's process printed nothing.
    crash = "import sys; print('boom: the moto server went away', file=sys.stderr); sys.exit(3)"
    process = subprocess.Popen(
        [sys.executable, "-c", crash], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    with pytest.raises(RuntimeError, match="ended with code 3 and no result") as error:
        capacity._finish(process, timeout=30)
    assert "boom: the moto server went away" in str(error.value)


def test_seeded_jobs_cover_every_shard_and_only_the_due_ones_are_due():
    with mock_aws(), Sume("http://127.0.0.1:9/unused", ["unused"]) as sume:
        session = boto3.session.Session()
        names = create_resources(session, prefix="cap-test")
        table = session.resource("dynamodb").Table(names.table)
        # 64 due jobs' ids already fall in all 16 shards; the bench seeds thousands.
        capacity.seed(table, sume, due=64, now=1_000_000, delay=0.0)
        indexed = session.client("dynamodb").scan(TableName=names.table, IndexName=DUE_INDEX)
    indexed = indexed["Items"]
    due = [i for i in indexed if int(i["due_at"]["N"]) <= 1_000_000]
    assert {int(i["due_shard"]["N"]) for i in due} == set(range(16))
    assert len(due) == len(indexed) == 64
    assert {i["state"]["S"] for i in due} == {"awaiting"}


def test_a_round_in_parallel_processes_polls_each_due_job_once_and_counts_its_calls(moto_server):
    # Two processes of 8 shards share the round as 16 of 1 do in the bench; the
    # moto they call is this process's (the bench gives moto a process of its own).
    # A window no run reaches: each run ends when its shards are drained, however slow
    # the machine (a 10 s one polled 23 of 40 beside two busy loops).
    row = capacity.measure_row(moto_server, runs=2, due=40, window=3600.0, delay=0.0)
    assert row.polled == 40
    assert row.shards == list(range(16))
    # Each shard claimed and released once; an update per poll, a page per shard.
    assert row.calls["dynamodb.PutItem"] == 16
    assert row.calls["dynamodb.UpdateItem"] == 40 + 16
    assert row.calls["dynamodb.Query"] == 16
    assert row.lease_calls == 32
    assert set(row.calls) == {"dynamodb.PutItem", "dynamodb.Query", "dynamodb.UpdateItem"}
