"""The worker's time arithmetic: a copy that cannot end in the time left is not started.

An artifact that no invocation could copy at the planned rate is a permanent
processing error at once (no retries that would end in ``too_many_attempts``);
one that only lacks the time left in this invocation is retried, from the
artifacts already saved.
"""

import time

import boto3
import pytest

import receiver
import worker
from sume.store.jobs import JobsTable
from sume.working.artifacts import NotEnoughTime
from sume.working.compose import build_worker
from sume.working.results import Action
from sume.working.settings import WorkerSettings
from tests.builders import LambdaContext, delivery_event, job_body, sqs_event

MP4 = {"content-type": "video/mp4"}


def deliver(body):
    assert receiver.handler(delivery_event(body), LambdaContext())["statusCode"] == 200
    return body["job_id"]


def item(names, job_id):
    stored = JobsTable(boto3.client("dynamodb"), names.table, 16).get(job_id)
    assert stored is not None
    return stored


def objects(names, job_id):
    listing = boto3.client("s3").list_objects_v2(
        Bucket=names.artifacts_bucket, Prefix=f"jobs/{job_id}/"
    )
    return sorted(o["Key"] for o in listing.get("Contents", []))


def test_an_artifact_no_invocation_can_copy_is_a_processing_error_at_once(
    aws, server, local_urls, monkeypatch
):
    # 1 kB/s for at most 10 s: nothing over 10 kB can ever be copied.
    monkeypatch.setenv("ARTIFACT_PLANNED_BYTES_PER_SECOND", "1000")
    monkeypatch.setenv("HTTP_TOTAL_TIMEOUT_SECONDS", "10")
    url = server.route("/r/long.mp4", body=b"x" * 20_000, headers=MP4)
    job_id = deliver(job_body(artifacts=[url]))

    response = worker.handler(sqs_event([job_id]), LambdaContext())

    assert response["batchItemFailures"] == []
    stored = item(aws, job_id)
    assert stored.state == "processing_error"
    assert stored.processing_error is not None
    assert stored.processing_error["code"] == "too_large_for_invocation"
    assert stored.attempts == 1
    assert objects(aws, job_id) == []


def test_a_copy_without_the_time_it_needs_is_left_for_a_fresh_invocation(
    aws, server, local_urls, monkeypatch
):
    monkeypatch.setenv("ARTIFACT_PLANNED_BYTES_PER_SECOND", "1000")
    small = server.route("/r/0.mp4", body=b"small", headers=MP4)
    large = server.route("/r/1.mp4", body=b"x" * 50_000, headers=MP4)
    job_id = deliver(job_body(artifacts=[small, large]))
    settings = WorkerSettings.from_env()
    reserve = settings.time_reserve_seconds
    # Seconds left when claiming, before the first copy, before the second:
    # 20 s usable then, and the second needs 50 s at 1 kB/s.
    left = iter([100.0, 100.0, reserve + 20])

    with pytest.raises(NotEnoughTime):
        build_worker(settings).process(job_id, lambda: next(left))
    stored = item(aws, job_id)
    assert stored.last_error is not None
    assert (stored.state, stored.last_error["code"]) == ("processing", "not_enough_time")
    assert stored.lease_until is not None
    assert stored.lease_until < time.time()  # released: the retry need not wait
    assert [a["key"] for a in stored.artifacts or []] == [f"jobs/{job_id}/000-0.mp4"]
    assert objects(aws, job_id) == [f"jobs/{job_id}/000-0.mp4"]

    later = time.time() + 2
    retry = build_worker(settings, clock=lambda: later).process(job_id, lambda: 100.0)
    assert retry.action is Action.PROCESSED
    assert (retry.artifacts_copied, len(retry.artifacts)) == (1, 2)
    assert (server.hits["/r/0.mp4"], server.hits["/r/1.mp4"]) == (1, 2)
