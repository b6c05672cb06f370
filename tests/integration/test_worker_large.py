"""Large artifacts: streamed to S3 in parts, never whole in memory."""

import hashlib
import tracemalloc

import boto3
import pytest
from moto.core.models import botocore_stubber as moto_stubber

import receiver
import worker
from sume.core import aws as sume_aws
from sume.store.jobs import JobsTable
from sume.working import compose as worker_compose
from sume.working.compose import build_worker
from sume.working.settings import WorkerSettings
from tests.builders import LambdaContext, delivery_event, job_body, sqs_event
from tests.httpserver import MiB, repeat_chunks
from tests.s3sink import S3Sink, part_digests

PART = 5 * MiB  # S3's smallest multipart part


@pytest.fixture
def local_urls(local_urls, monkeypatch):
    monkeypatch.setenv("ARTIFACT_PART_BYTES", str(PART))


def stored(names, job_id):
    item = JobsTable(boto3.client("dynamodb"), names.table, 16).get(job_id)
    assert item is not None
    return item


def deliver(body):
    assert receiver.handler(delivery_event(body), LambdaContext())["statusCode"] == 200
    return body["job_id"]


def test_a_large_artifact_is_streamed_with_bounded_memory(aws, server, local_urls, monkeypatch):
    total = 50 * MiB
    url = server.route("/big.mov", body=lambda: repeat_chunks(total), length=total)
    expected = hashlib.sha256()
    for chunk in repeat_chunks(total):
        expected.update(chunk)
    job_id = deliver(job_body(artifacts=[url]))
    sink = S3Sink()

    def clients(service, patient=False):
        client = sume_aws.client(service, patient)
        if service == "s3":
            client = boto3.session.Session().client("s3")
            # The sink answers instead of moto, which would store the bytes too.
            client.meta.events.unregister("before-send", moto_stubber)
            client.meta.events.register("before-send.s3", sink)
        return client

    # Built before measuring, as a warm container would have it.
    settings = WorkerSettings.from_env()
    processor = build_worker(settings, clients)
    monkeypatch.setattr(worker_compose, "worker_service", lambda: processor)

    tracemalloc.start()
    try:
        response = worker.handler(sqs_event([job_id]), LambdaContext())
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert response["batchItemFailures"] == []
    assert sink.completed
    assert sink.parts == part_digests(repeat_chunks(total), PART)
    assert len(sink.parts) == 10
    record = stored(aws, job_id).artifacts[0]
    assert (record["size"], record["sha256"]) == (total, expected.hexdigest())
    # One stream (this server offers no ranges): the part being read and the
    # parts being uploaded, whatever the artifact's size.
    bound = (1 + settings.artifact_uploads) * PART
    assert peak < bound + MiB, f"peak {peak / MiB:.1f} MiB for a {total // MiB} MiB artifact"


def test_a_multipart_artifact_lands_intact_in_s3(aws, server, local_urls):
    data = bytes(range(256)) * (12 * MiB // 256 + 17)  # 2 full parts and a short last one
    url = server.route("/multi.bin", body=data)
    job_id = deliver(job_body(artifacts=[url]))

    response = worker.handler(sqs_event([job_id]), LambdaContext())

    assert response["batchItemFailures"] == []
    record = stored(aws, job_id).artifacts[0]
    obj = boto3.client("s3").get_object(Bucket=aws.artifacts_bucket, Key=record["key"])
    assert obj["ETag"].endswith('-3"')  # a three-part upload, not one PutObject
    assert hashlib.sha256(obj["Body"].read()).hexdigest() == record["sha256"]
    assert record["sha256"] == hashlib.sha256(data).hexdigest()
    assert record["size"] == len(data)


def test_an_artifact_over_the_cap_is_a_processing_error(aws, server, local_urls, monkeypatch):
    monkeypatch.setenv("MAX_ARTIFACT_BYTES", str(6 * MiB))
    url = server.route("/huge.bin", body=lambda: repeat_chunks(20 * MiB))  # length undeclared
    job_id = deliver(job_body(artifacts=[url]))

    response = worker.handler(sqs_event([job_id]), LambdaContext())

    assert response["batchItemFailures"] == []
    item = stored(aws, job_id)
    assert item.processing_error["code"] == "too_large"
    s3 = boto3.client("s3")
    assert s3.list_multipart_uploads(Bucket=aws.artifacts_bucket).get("Uploads", []) == []
    assert s3.list_objects_v2(Bucket=aws.artifacts_bucket).get("KeyCount") == 0
