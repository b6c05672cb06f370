"""The poller capacity harness in miniature: real runs, counted calls, no timing asserted."""

import urllib.request

import boto3
from moto import mock_aws

from bench import capacity
from devstack.resources import create_resources
from sume.core.names import DUE_INDEX


def test_seeded_jobs_cover_every_shard_and_only_the_due_ones_are_due():
    with mock_aws(), capacity.StatusServer(0.0) as server:
        session = boto3.session.Session()
        names = create_resources(session, prefix="cap-test")
        ddb = session.client("dynamodb")
        capacity.seed(ddb, names.table, server, due=400, not_due=100, now=1_000_000)
        items = ddb.scan(TableName=names.table)["Items"]
        indexed = ddb.scan(TableName=names.table, IndexName=DUE_INDEX)["Items"]
    assert len(items) == 500
    assert {int(i["due_shard"]["N"]) for i in indexed} == set(range(16))
    due = [i for i in indexed if int(i["due_at"]["N"]) <= 1_000_000]
    assert len(due) == 400
    assert {i["state"]["S"] for i in due} == {"awaiting"}
    # Half the others are finished (out of the index), half due in an hour.
    assert len(indexed) == 450


def test_the_status_server_says_running_for_the_job_asked():
    with capacity.StatusServer(0.0) as server, urllib.request.urlopen(server.url("job_7")) as r:
        assert r.read() == b'{"job_id": "job_7", "state": "running"}'


def test_a_round_in_parallel_processes_polls_each_due_job_once_and_counts_its_calls():
    from bench.servers import spawned

    with spawned("moto") as endpoint_url:
        row = capacity.measure_row(endpoint_url, runs=4, due=40, window=10.0, delay=0.0)
    assert row.polled == 40
    assert sorted(s for run in row.each for s in run.shards) == list(range(16))
    # Each shard claimed and released once; an update per poll, a page per shard.
    assert row.calls["dynamodb.PutItem"] == 16
    assert row.calls["dynamodb.UpdateItem"] == 40 + 16
    assert row.calls["dynamodb.Query"] == 16
    assert row.lease_calls == 32
    assert set(row.calls) == {"dynamodb.PutItem", "dynamodb.Query", "dynamodb.UpdateItem"}
