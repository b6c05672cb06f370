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


def test_a_run_polls_every_due_job_and_its_calls_follow_due_work():
    alone = capacity.run_once(0.0, due=60, not_due=0, window=30)
    crowded = capacity.run_once(0.0, due=60, not_due=120, window=30)
    for run in (alone, crowded):
        assert run.complete
        assert run.polled == 60
        assert run.calls["dynamodb.UpdateItem"] == 60
        # One page per shard: no shard holds 50 of 60 jobs.
        assert run.calls["dynamodb.Query"] == 16
        assert set(run.calls) == {"dynamodb.Query", "dynamodb.UpdateItem"}
    assert crowded.in_table == 180
    assert crowded.calls_per_polled_job == alone.calls_per_polled_job
