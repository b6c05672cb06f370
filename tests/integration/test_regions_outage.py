"""Two regions on one MRSC table (devstack.moto_mrsc): what one region's outage must
not hold back. A large event's body in both regions' payloads buckets before Sume is
answered; one shard lease per shard and round across both regions' pollers; the
daily expiry of ended jobs that the MRSC table's missing TTL leaves behind."""

from __future__ import annotations

import functools
import json
import os
import time
from collections.abc import Iterator
from typing import Any

import boto3
import pytest

import poller
import receiver
import worker
from devstack import moto_mrsc, switches
from devstack.moto_mrsc import Replication
from devstack.resources import create_resources, environment, subscribe_queue
from devstack.switches import create_switches
from infra.spec import ResourceNames
from sume.contract.envelope import JobEvent, parse, stored_event
from sume.core import runtime
from sume.core.names import EXPIRY_EVENT, Env
from sume.core.settings import DAY_SECONDS
from sume.polling.compose import build_expiry, build_fanout, build_poller, build_shard_run
from sume.polling.registry import Registry
from sume.polling.settings import ExpirySettings, FanOutSettings, PollerSettings
from sume.store.expiry import JobExpiry
from sume.store.job import Source, State
from sume.store.jobs import JobsTable
from sume.store.payloads import INLINE_BODY_LIMIT
from sume.working import compose as worker_compose
from sume.working.compose import build_worker
from sume.working.settings import WorkerSettings
from tests.builders import LambdaContext, delivery_event, job_body, raw_of, sqs_event
from tests.httpserver import LoopbackServer
from tests.integration.conftest import SHARDS

HOME, OTHER = "us-east-1", "us-east-2"


class _Region:
    """What ``create_resources`` needs of a session, for one region."""

    def __init__(self, region: str) -> None:
        self._session = boto3.session.Session(region_name=region)

    def client(self, service: str, **kw: Any) -> Any:
        return self._session.client(service, **kw)


def clients_of(region: str, **regions: str) -> Any:
    """Clients of ``region``, or of the region ``regions`` names for a service."""

    def clients(service: str, patient: bool = False) -> Any:
        return boto3.client(service, region_name=regions.get(service, region))

    return clients


@pytest.fixture
def replication(aws: ResourceNames) -> Iterator[Replication]:
    replicated = Replication(home=HOME, regions=frozenset({HOME, OTHER}))
    moto_mrsc.install(replicated)
    runtime.reset()
    try:
        yield replicated
    finally:
        moto_mrsc.uninstall()


@pytest.fixture
def other(aws: ResourceNames, replication: Replication) -> ResourceNames:
    """The other region's stack: its own queue, buckets and bus, on the one jobs table."""
    return create_resources(_Region(OTHER), prefix="other", jobs_table=aws.table)


def large_body(job_id: str, artifacts: list[str]) -> dict[str, Any]:
    return job_body(job_id, artifacts=artifacts, padding="x" * (INLINE_BODY_LIMIT + 1024))


def objects(region: str, bucket: str) -> list[str]:
    listed = boto3.client("s3", region_name=region).list_objects_v2(Bucket=bucket)
    return [o["Key"] for o in listed.get("Contents", [])]


def take_down_payloads(region: str, bucket: str) -> None:
    """The region's S3 gone: its payloads bucket answers nothing any more."""
    s3 = boto3.client("s3", region_name=region)
    for key in objects(region, bucket):
        s3.delete_object(Bucket=bucket, Key=key)
    s3.delete_bucket(Bucket=bucket)


def work_in(region: str, names: ResourceNames, job_ids: list[str], monkeypatch) -> Any:
    env = {**os.environ, **environment(names), Env.JOBS_TABLE_NAME: names.table}
    processor = build_worker(WorkerSettings.from_env(env), clients_of(region))
    monkeypatch.setattr(worker_compose, "worker_service", lambda: processor)
    return worker.handler(sqs_event(job_ids), LambdaContext())


def test_a_large_event_recorded_in_one_region_is_worked_by_the_other_while_the_first_is_down(
    aws, other, server: LoopbackServer, local_urls, monkeypatch
):
    monkeypatch.setenv(Env.PEER_REGION, OTHER)
    monkeypatch.setenv(Env.PEER_PAYLOADS_BUCKET_NAME, other.payloads_bucket)
    runtime.reset()
    url = server.route("/render.mov", body=b"frames" * 100)
    bus = subscribe_queue(
        boto3.client("sqs", region_name=OTHER),
        boto3.client("events", region_name=OTHER),
        "other-consumer",
        other.event_bus,
    )

    # Acknowledged by the home region: the body is in both buckets, under one key.
    response = receiver.handler(delivery_event(large_body("job_big", [url])), LambdaContext())
    assert response["statusCode"] == 200
    keys = objects(HOME, aws.payloads_bucket)
    assert len(keys) == 1
    assert objects(OTHER, other.payloads_bucket) == keys

    # The home region is down, its S3 with it; its message never gets worked.
    take_down_payloads(HOME, aws.payloads_bucket)
    assert work_in(OTHER, other, ["job_big"], monkeypatch)["batchItemFailures"] == []

    job = JobsTable(boto3.client("dynamodb", region_name=OTHER), aws.table, 16).get("job_big")
    assert job is not None and job.state == State.PROCESSED
    assert job.body_ref == f"s3://{aws.payloads_bucket}/{keys[0]}"
    assert [a["bucket"] for a in job.artifacts or []] == [other.artifacts_bucket]
    assert server.hits["/render.mov"] == 1
    announced = boto3.client("sqs", region_name=OTHER).receive_message(
        QueueUrl=bus, MaxNumberOfMessages=10
    )["Messages"]
    assert [json.loads(m["Body"])["detail"]["job_id"] for m in announced] == ["job_big"]


def test_with_the_other_region_down_a_large_event_is_kept_here_counted_and_worked_here(
    aws, other, local_urls, monkeypatch, capsys
):
    monkeypatch.setenv(Env.PEER_REGION, OTHER)
    monkeypatch.setenv(Env.PEER_PAYLOADS_BUCKET_NAME, other.payloads_bucket)
    runtime.reset()
    take_down_payloads(OTHER, other.payloads_bucket)

    # Refusing would only bring Sume's retry back here, the region serving.
    response = receiver.handler(delivery_event(large_body("job_alone", [])), LambdaContext())
    assert response["statusCode"] == 200
    assert len(objects(HOME, aws.payloads_bucket)) == 1
    emitted = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [e.get("PayloadsInOneRegion") for e in emitted if "PayloadsInOneRegion" in e] == [[1.0]]

    assert work_in(HOME, aws, ["job_alone"], monkeypatch)["batchItemFailures"] == []
    job = JobsTable(boto3.client("dynamodb"), aws.table, 16).get("job_alone")
    assert job is not None and job.state == State.PROCESSED


def test_a_body_only_the_recording_region_holds_is_read_from_there(
    aws, other, local_urls, monkeypatch
):
    # Recorded while the other region's bucket was down (as above), worked by
    # the other region once it is back: its own bucket lacks the key.
    monkeypatch.setenv(Env.PEER_REGION, OTHER)
    monkeypatch.setenv(Env.PEER_PAYLOADS_BUCKET_NAME, "other-bucket-that-is-down")
    runtime.reset()
    response = receiver.handler(delivery_event(large_body("job_late", [])), LambdaContext())
    assert response["statusCode"] == 200
    assert objects(OTHER, other.payloads_bucket) == []

    assert work_in(OTHER, other, ["job_late"], monkeypatch)["batchItemFailures"] == []
    job = JobsTable(boto3.client("dynamodb"), aws.table, 16).get("job_late")
    assert job is not None and job.state == State.PROCESSED


PERIOD = 300


def test_both_regions_ticks_of_one_period_ask_sume_once_per_job(
    aws, replication, local_urls, monkeypatch
):
    monkeypatch.setenv("DUE_SHARDS", "4")
    monkeypatch.setenv("STATUS_ALLOWED_HOSTS", "127.0.0.1")
    monkeypatch.setenv("SUME_API_TOKEN", "sume-api-token")
    # A job polled at a round is due again 10 s later (2 x the initial 5 s).
    monkeypatch.setenv("POLL_INITIAL_SECONDS", "5")
    # What the two-region stacks set: the schedule's period (infra/stack.py).
    monkeypatch.setenv(Env.POLL_ROUND_SECONDS, str(PERIOD))
    start = (int(time.time()) // PERIOD - 1) * PERIOD
    with LoopbackServer() as sume:
        jobs = JobsTable(boto3.client("dynamodb"), aws.table, 4)
        registry = Registry(
            jobs,
            first_poll_after=1,
            clock=lambda: start - 100,
            url_policy=PollerSettings.from_env().url_policy,
        )
        job_ids = [f"job_{n}" for n in range(8)]
        for job_id in job_ids:
            path = f"/v1/jobs/{job_id}"
            sume.route(path, headers={"content-type": "application/json"}, body=b"{}")
            assert registry.expect(job_id, sume.url(path))

        # Each region's schedule ticks once in the period, at its own second:
        # the home region's first, its run done before the other's tick.
        runs = {}
        for region, tick in ((HOME, start + 5), (OTHER, start + 250)):
            # Its own DynamoDB client; the one shards queue stands for both
            # regions' own (a region's runs take its own tick's assignments).
            clients = clients_of(region, sqs=HOME)
            fanout_settings = FanOutSettings.from_env()
            clock = functools.partial(float, tick)
            round_ = build_fanout(fanout_settings, clients, clock).start()["round"]
            sqs = boto3.client("sqs")
            sent = sqs.receive_message(QueueUrl=aws.shards_queue_url, MaxNumberOfMessages=10).get(
                "Messages", []
            )
            for message in sent:
                sqs.delete_message(
                    QueueUrl=aws.shards_queue_url, ReceiptHandle=message["ReceiptHandle"]
                )
            run = build_shard_run(PollerSettings.from_env(), fanout_settings, clients, clock)
            runs[region] = (
                round_,
                [run.work(run.parse(m["Body"]), lambda: 60.0) for m in sent],
            )

        # Sume is asked once per job, whichever region's round asks.
        assert [sume.hits[f"/v1/jobs/{job_id}"] for job_id in job_ids] == [1] * 8
        assert sum(summary.polled for summary in runs[HOME][1]) == 8
        # The other region's runs find every shard claimed for the round.
        assert sum(summary.polled for summary in runs[OTHER][1]) == 0
        assert sorted(s for summary in runs[OTHER][1] for s in summary.taken) == [0, 1, 2, 3]
        assert runs[HOME][0] == runs[OTHER][0] == start


RETENTION_DAYS = 35
# The days of report partitions an expiry run reads before its cutoff: enough for
# every job here (ended at most 15 days past its retention), and each day costs 16
# queries, so not the 90 of the default.
LOOKBACK_DAYS = 20


def ended_job(jobs: JobsTable, job_id: str, days_ago: int) -> None:
    """A job whose webhook came, and whose work finished, ``days_ago`` days ago."""
    at = int(time.time()) - days_ago * DAY_SECONDS
    raw = json.dumps(job_body(job_id))
    jobs.record(stored_event(raw, job_id), Source.WEBHOOK, at, sweep_at=at + 60)
    claimed = jobs.claim(job_id, at, 900)
    assert claimed.claim_id is not None
    expires_at = at + RETENTION_DAYS * DAY_SECONDS
    # As the worker does: the job enters the report at its registration, else its record.
    window_at = claimed.unreported_at()
    assert jobs.finish(
        job_id, claimed.claim_id, State.PROCESSED, at, expires_at, {}, window_at=window_at
    )


def expire() -> dict[str, Any]:
    result: dict[str, Any] = poller.handler({EXPIRY_EVENT: True}, LambdaContext())
    return result


def test_the_expiry_deletes_ended_jobs_past_their_retention_and_keeps_the_rest(
    aws, replication, monkeypatch
):
    monkeypatch.setenv(Env.RETENTION_DAYS, str(RETENTION_DAYS))
    monkeypatch.setenv(Env.EXPIRY_LOOKBACK_DAYS, str(LOOKBACK_DAYS))
    jobs = JobsTable(boto3.client("dynamodb"), aws.table, 16)
    ended_job(jobs, "job_old", 40)
    ended_job(jobs, "job_older", 50)
    ended_job(jobs, "job_recent", 10)
    # Entered the window long ago, ended only now: its retention has just begun.
    Registry(jobs, first_poll_after=1, clock=lambda: time.time() - 45 * DAY_SECONDS).expect(
        "job_slow", "https://api.sume.example/jobs/job_slow"
    )
    ended_job(jobs, "job_slow", 0)
    # Recorded 40 days ago and never worked: not ended, never expired.
    at = int(time.time()) - 40 * DAY_SECONDS
    raw = json.dumps(job_body("job_owed"))
    jobs.record(stored_event(raw, "job_owed"), Source.WEBHOOK, at, sweep_at=at + 60)

    assert expire() == {"read": 3, "deleted": 2, "kept": 1, "complete": True}
    assert {job_id for job_id in ("job_old", "job_older") if jobs.get(job_id)} == set()
    for job_id in ("job_recent", "job_slow", "job_owed"):
        assert jobs.get(job_id) is not None, job_id

    # The other region's run, half a day later, finds nothing more to delete.
    settings = ExpirySettings.from_env()
    again = build_expiry(settings, clients_of(OTHER)).run(lambda: 60.0)
    assert (again.read, again.deleted) == (1, 0)


def test_a_job_replayed_between_the_read_and_the_delete_is_kept(aws, monkeypatch):
    monkeypatch.setenv(Env.RETENTION_DAYS, str(RETENTION_DAYS))
    monkeypatch.setenv(Env.EXPIRY_LOOKBACK_DAYS, str(LOOKBACK_DAYS))
    jobs = JobsTable(boto3.client("dynamodb"), aws.table, 16)
    ended_job(jobs, "job_replayed", 40)
    read = JobExpiry.expired

    def replayed_meanwhile(self: JobExpiry, job_ids: list[str], now: int) -> list[str]:
        found = read(self, job_ids, now)
        assert found == ["job_replayed"]
        assert jobs.request_replay("job_replayed", now, now + 60, "operator")
        return found

    monkeypatch.setattr(JobExpiry, "expired", replayed_meanwhile)
    assert expire() == {"read": 1, "deleted": 0, "kept": 1, "complete": True}
    job = jobs.get("job_replayed")
    assert job is not None and job.state == State.RECEIVED


def test_a_pause_of_both_regions_keeps_the_other_regions_sweeper_off_the_owed_jobs(
    aws, other, monkeypatch
):
    # The two regions' workers, each its mapping; `pause worker` turns both off
    # (tests/integration/test_cli_pause_regions.py), each sweep asks its own.
    switches.install()
    home_switch = create_switches(clients_of(HOME), aws, "home").worker
    other_switch = create_switches(clients_of(OTHER), other, "other").worker
    now = int(time.time())
    event = parse(raw_of(job_body("job_owed_home")))
    assert isinstance(event, JobEvent)
    jobs = JobsTable(boto3.client("dynamodb", region_name=HOME), aws.table, SHARDS)
    # Recorded in the home region, its message waiting in the home region's queue.
    assert jobs.record(event, Source.WEBHOOK, now - 600, sweep_at=now - 300).new

    def other_round() -> Any:
        env = {
            **os.environ,
            **environment(other),
            Env.JOBS_TABLE_NAME: aws.table,
            Env.WORKER_EVENT_SOURCE_MAPPING: other_switch,
        }
        sweeper = build_poller(PollerSettings.from_env(env), clients_of(OTHER))
        return sweeper.run(lambda: 10_000.0, now, range(SHARDS))

    def queued_in_other() -> list[str]:
        sqs = boto3.client("sqs", region_name=OTHER)
        got = sqs.receive_message(QueueUrl=other.queue_url, MaxNumberOfMessages=10)
        return [m["Body"] for m in got.get("Messages", [])]

    lambda_of = {region: boto3.client("lambda", region_name=region) for region in (HOME, OTHER)}
    lambda_of[HOME].update_event_source_mapping(UUID=home_switch, Enabled=False)
    lambda_of[OTHER].update_event_source_mapping(UUID=other_switch, Enabled=False)
    summary = other_round()
    assert (summary.swept, summary.held) == (0, 1)
    assert queued_in_other() == []

    # Paused in the home region alone (as before): the other region's sweeper takes
    # the home region's owed job to its own worker.
    lambda_of[OTHER].update_event_source_mapping(UUID=other_switch, Enabled=True)
    assert other_round().swept == 1
    assert queued_in_other() == ["job_owed_home"]
