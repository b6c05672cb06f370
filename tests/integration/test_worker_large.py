"""Large artifacts: streamed to S3 in parts, never whole in memory."""

import hashlib
import io
import tracemalloc
import uuid
import xml.sax.saxutils
from urllib.parse import parse_qs, urlsplit

import boto3
import pytest
from botocore.awsrequest import AWSResponse
from moto.core.models import botocore_stubber as moto_stubber

import receiver
import worker
from sume import aws as sume_aws
from sume import services
from sume.jobs import JobsTable
from sume.settings import WorkerSettings
from tests.builders import LambdaContext, delivery_event, job_body, sqs_event
from tests.httpserver import MiB, repeat_chunks

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


class _Raw:
    def __init__(self, body: bytes):
        self._body = body

    def stream(self, **_):
        yield self._body


class S3Sink:
    """S3 behind botocore's ``before-send`` hook: hashes what it receives, keeps nothing.

    moto keeps every object (and, on completing a multipart upload, two more
    copies of it) in this process's memory, which would swamp a measurement of
    the worker's own memory. The sink answers the same API calls after reading
    each request body the way the network would, in chunks, so everything up
    to the wire (worker, urllib3, botocore) is what gets measured.
    """

    def __init__(self):
        self.digest = hashlib.sha256()
        self.parts: list[int] = []
        self.completed = False

    def _consume(self, request) -> int:
        body = request.body
        if isinstance(body, bytes | bytearray):
            body = io.BytesIO(body)
        encoding = request.headers.get("content-encoding") or b""
        if b"aws-chunked" in (encoding.encode() if isinstance(encoding, str) else encoding):
            return self._consume_chunked(body)
        return self._feed(body, None)

    def _feed(self, body, length) -> int:
        seen = 0
        while length is None or seen < length:
            want = 256 * 1024 if length is None else min(256 * 1024, length - seen)
            chunk = body.read(want)
            if not chunk:
                break
            self.digest.update(chunk)
            seen += len(chunk)
        return seen

    def _consume_chunked(self, body) -> int:
        """aws-chunked framing: ``<hex size>\\r\\n<data>\\r\\n`` ... ``0\\r\\n<trailers>``."""
        seen = 0
        while True:
            line = b""
            while not line.endswith(b"\r\n"):
                line += body.read(1)
            size = int(line.split(b";")[0].strip(), 16)
            if size == 0:
                return seen
            seen += self._feed(body, size)
            assert body.read(2) == b"\r\n"

    def __call__(self, request, **_):
        query = parse_qs(urlsplit(request.url).query, keep_blank_values=True)
        method = request.method
        headers = {"etag": f'"{uuid.uuid4().hex}"'}
        body = b""
        if method == "POST" and "uploads" in query:
            body = (
                b"<InitiateMultipartUploadResult><Bucket>b</Bucket><Key>k</Key>"
                b"<UploadId>upload-1</UploadId></InitiateMultipartUploadResult>"
            )
        elif method == "PUT" and "partNumber" in query:
            self.parts.append(self._consume(request))
        elif method == "POST" and "uploadId" in query:
            self.completed = True
            etag = xml.sax.saxutils.escape(headers["etag"])
            body = f"<CompleteMultipartUploadResult><ETag>{etag}</ETag>".encode()
            body += b"</CompleteMultipartUploadResult>"
        elif method == "PUT":
            self._consume(request)
        else:
            raise AssertionError(f"unexpected S3 call {method} {request.url}")
        return AWSResponse(request.url, 200, headers, _Raw(body))


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
    processor = services.build_worker(WorkerSettings.from_env(), clients)
    monkeypatch.setattr(services, "worker_service", lambda: processor)

    tracemalloc.start()
    try:
        response = worker.handler(sqs_event([job_id]), LambdaContext())
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert response["batchItemFailures"] == []
    assert sink.completed
    assert sum(sink.parts) == total
    assert all(size >= PART for size in sink.parts[:-1])
    assert len(sink.parts) == 10
    assert sink.digest.hexdigest() == expected.hexdigest()
    record = stored(aws, job_id).artifacts[0]
    assert (record["size"], record["sha256"]) == (total, expected.hexdigest())
    assert peak < 10 * MiB, f"peak {peak / MiB:.1f} MiB for a {total // MiB} MiB artifact"


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
