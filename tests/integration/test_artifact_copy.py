"""ArtifactStore.copy against an origin that serves ranges as a CDN does: the pipelined,
ranged copy stores exactly what one stream stores, falls back to one stream when ranges
cannot be trusted, aborts on failure, stays within its parts and its deadline, and only
ever connects where the SSRF check allowed. No timing is asserted; speed lives in
``make bench``."""

import hashlib
import time
import tracemalloc

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws
from moto.core.models import botocore_stubber as moto_stubber

from bench.artifacts import FRAMING_PER_UPLOAD
from devstack import servers
from devstack.origin import Content, Fault, Origin
from sume.net.errors import PermanentFetchError, TransientFetchError
from sume.net.fetch import SafeHttp
from sume.net.policy import UrlPolicy
from sume.net.response import CHUNK_BYTES
from sume.working.artifacts import ArtifactStore, NotEnoughTime
from sume.working.transfer import S3Parts
from tests.httpserver import MiB
from tests.s3sink import READ_BYTES, S3Sink, part_digests

LOCAL = UrlPolicy(allow_http=True, allow_private_hosts=True, allowed_hosts=())
BUCKET = "sume-test-artifacts"
PART = 5 * MiB  # S3's smallest multipart part
SIZE = 3 * PART + 12345  # four parts, the last a short one


@pytest.fixture
def s3():
    with mock_aws():
        client = boto3.client("s3")
        client.create_bucket(Bucket=BUCKET)
        yield client


def store(s3, *, connections=4, uploads=2, rate=1e12, http=None, max_bytes=1024 * MiB):
    return ArtifactStore(
        s3,
        BUCKET,
        http or SafeHttp(LOCAL, 2.0, 5.0),
        max_bytes,
        PART,
        connections=connections,
        uploads=uploads,
        planned_bytes_per_second=rate,
    )


def body(s3, key):
    return s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()


def no_uploads_left(s3):
    return s3.list_multipart_uploads(Bucket=BUCKET).get("Uploads", []) == []


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def test_a_ranged_copy_stores_exactly_what_one_stream_stores(s3):
    with Origin(SIZE) as origin:
        ranged = store(s3).copy(origin.url, "ranged.bin")
        ranged_requests = list(origin.requests)
        single = store(s3, connections=1).copy(origin.url, "single.bin")
    content = origin.version.content.read()

    assert (ranged.size, ranged.sha256) == (single.size, single.sha256)
    assert (ranged.size, ranged.sha256) == (SIZE, sha256(content))
    assert body(s3, "ranged.bin") == body(s3, "single.bin") == content
    assert s3.head_object(Bucket=BUCKET, Key="ranged.bin")["ETag"].endswith('-4"')
    # The first answer gives part 1; each later part is a range of its own,
    # validated against the version the first answer named.
    first, *parts = ranged_requests
    assert (first.status, first.range) == (200, None)
    assert {seen.range for seen in parts} == {
        f"bytes={n * PART}-{min((n + 1) * PART, SIZE) - 1}" for n in (1, 2, 3)
    }
    assert {(seen.status, seen.if_range) for seen in parts} == {(206, origin.version.etag)}
    assert ranged.content_type == "application/octet-stream"


def test_an_origin_without_ranges_is_copied_as_one_stream(s3):
    with Origin(SIZE, ranges=False) as origin:
        stored = store(s3).copy(origin.url, "plain.bin")
    assert [(seen.status, seen.range) for seen in origin.requests] == [(200, None)]
    assert stored.sha256 == sha256(body(s3, "plain.bin"))
    assert body(s3, "plain.bin") == origin.version.content.read()


def test_a_small_body_is_one_put_even_when_ranges_are_offered(s3):
    with Origin(PART - 1) as origin:
        stored = store(s3).copy(origin.url, "small.bin")
    assert len(origin.requests) == 1
    assert "-" not in s3.head_object(Bucket=BUCKET, Key="small.bin")["ETag"]
    assert stored.sha256 == sha256(origin.version.content.read())


def test_an_object_changed_mid_copy_is_copied_again_whole(s3, logs):
    # Two connections: part 3 is only asked for once part 1 is read, by when
    # the object has changed, so its If-Range no longer matches.
    with Origin(SIZE, change_after=PART) as origin:
        stored = store(s3, connections=2).copy(origin.url, "changed.bin")
    second = origin.version
    assert second.etag != origin.requests[0].etag
    assert (origin.requests[-1].status, origin.requests[-1].range) == (200, None)
    assert 200 in [seen.status for seen in origin.requests[1:-1]]
    assert body(s3, "changed.bin") == second.content.read()
    assert stored.sha256 == second.content.sha256()
    assert no_uploads_left(s3)
    (restart,) = [line for line in logs.lines() if "restarted as one stream" in line["message"]]
    assert restart["level"] == "WARNING"
    assert "not 206" in restart["reason"]


@pytest.mark.parametrize(
    ("fault", "reason"),
    [
        (Fault.WHOLE, "answered 200, not 206"),
        (Fault.SHIFTED, "answered with another range"),
        (Fault.SHORT, "failed: connection_error"),
        (Fault.GZIP, "failed: unsupported_encoding"),
        (Fault.LENGTH, "failed: invalid_content_length"),
    ],
)
def test_a_range_not_answered_as_asked_restarts_the_copy_as_one_stream(s3, logs, fault, reason):
    with Origin(SIZE, fault=fault, fault_at=2) as origin:
        stored = store(s3).copy(origin.url, f"{fault.value}.bin")
    content = origin.version.content.read()
    assert body(s3, f"{fault.value}.bin") == content
    assert (stored.size, stored.sha256) == (SIZE, sha256(content))
    assert (origin.requests[-1].status, origin.requests[-1].range) == (200, None)
    assert no_uploads_left(s3)
    (restart,) = [line for line in logs.lines() if "restarted as one stream" in line["message"]]
    assert reason in restart["reason"]


@pytest.mark.parametrize("connections", [1, 4])
def test_a_failed_upload_aborts_the_multipart_upload(s3, connections):
    def fail_part_three(params, **_):
        if params["PartNumber"] == 3:
            raise ClientError({"Error": {"Code": "InternalError", "Message": "no"}}, "UploadPart")

    s3.meta.events.register("before-parameter-build.s3.UploadPart", fail_part_three)
    with Origin(SIZE) as origin, pytest.raises(ClientError):
        store(s3, connections=connections).copy(origin.url, "failed.bin")
    assert no_uploads_left(s3)
    assert s3.list_objects_v2(Bucket=BUCKET)["KeyCount"] == 0


LAGGED_SIZE = 16 * PART


@pytest.fixture(scope="module")
def remote_origin():
    """The origin in a process of its own: its memory is not the copy's. It keeps
    nothing between copies, so one serves every test of the module."""
    with servers.spawned("origin", "--size", str(LAGGED_SIZE), "--seed", "1") as url:
        yield url


@pytest.mark.parametrize("connections", [1, 4])
def test_memory_holds_at_most_the_stated_parts_when_uploads_lag(
    connections, remote_origin, monkeypatch
):
    # Reading is far faster than this S3 (every part waits), so a pipeline
    # without a bound would hold most of the object.
    size, uploads = LAGGED_SIZE, 2
    sink = S3Sink()

    def slow_sink(request, **kw):
        if "partNumber" in request.url:
            time.sleep(0.05)
        return sink(request, **kw)

    # An upload's thread may be descheduled as soon as it frees its part's slot,
    # still holding the part (as the pool's work item does until it is done): the
    # reader, woken by that slot, must not have two parts in it.
    send = S3Parts._send

    def send_then_stall(self, number, part):
        send(self, number, part)
        time.sleep(0.05)

    monkeypatch.setattr(S3Parts, "_send", send_then_stall)

    client = boto3.session.Session().client("s3")
    client.meta.events.unregister("before-send", moto_stubber)
    client.meta.events.register("before-send.s3", slow_sink)
    copier = store(client, connections=connections, uploads=uploads)
    content = Content(size, seed=1)
    tracemalloc.start()
    try:
        stored = copier.copy(remote_origin, "big.bin")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (stored.size, stored.sha256) == (size, content.sha256())
    assert sink.parts == part_digests(content.chunks(), PART)
    # The stated bound: the parts of the connections and of the uploads, and for
    # each upload botocore's checksum framing; here also the sink's own reading (a
    # piece, and the one before it) and the reader's chunk of the origin's answer.
    framing = FRAMING_PER_UPLOAD + 2 * READ_BYTES
    bound = (connections + uploads) * PART + uploads * framing + CHUNK_BYTES
    assert peak < bound, f"peak {peak / MiB:.1f} MiB, bound {bound / MiB:.0f} MiB"


class Rebinding:
    """A resolver whose first answer passes the SSRF check and every later one would not."""

    def __init__(self):
        self.calls = []

    def __call__(self, host, port):
        self.calls.append(host)
        return ["127.0.0.1"] if len(self.calls) == 1 else ["169.254.169.254"]


def test_every_range_goes_to_the_address_checked_once(s3):
    resolver = Rebinding()
    http = SafeHttp(LOCAL, 2.0, 5.0, resolver=resolver)
    with Origin(SIZE) as origin:
        url = origin.url.replace("127.0.0.1", "artifacts.test")
        stored = store(s3, http=http).copy(url, "named.bin")
    assert resolver.calls == ["artifacts.test"]
    assert [seen.status for seen in origin.requests] == [200, 206, 206, 206]
    port = url.split(":")[2].split("/")[0]
    assert {seen.host for seen in origin.requests} == {f"artifacts.test:{port}"}
    assert stored.sha256 == origin.version.content.sha256()


def test_a_trickling_range_ends_at_the_deadline(s3):
    # 200 kB/s per connection: the copy would take a minute and a half.
    with Origin(SIZE, rate=200_000) as origin:
        with pytest.raises(TransientFetchError) as info:
            store(s3).copy(origin.url, "slow.bin", deadline=time.monotonic() + 0.5)
        assert info.value.code == "deadline"
        assert origin.served < SIZE  # cut, not timed out after the whole
        # The deadline is no reason to try again as one stream.
        assert [seen.range is None for seen in origin.requests].count(True) == 1
    assert no_uploads_left(s3)
    assert s3.list_objects_v2(Bucket=BUCKET)["KeyCount"] == 0


def test_a_copy_that_cannot_end_in_the_time_left_is_not_started(s3):
    # 1 MB/s planned: the 15.7 MB body needs 16 s, and only 5 are left.
    with Origin(SIZE) as origin:
        with pytest.raises(NotEnoughTime) as info:
            store(s3, rate=1e6).copy(origin.url, "late.bin", deadline=time.monotonic() + 5)
        assert [seen.status for seen in origin.requests] == [200]
    assert info.value.code == "not_enough_time"
    assert no_uploads_left(s3)
    assert s3.list_objects_v2(Bucket=BUCKET)["KeyCount"] == 0


def test_a_copy_no_invocation_can_finish_is_refused_for_good(s3):
    http = SafeHttp(LOCAL, 2.0, 5.0, total_timeout=10.0)
    with Origin(SIZE) as origin, pytest.raises(PermanentFetchError) as info:
        # 10 s at 1 MB/s: 10 MB at most, whatever time is left.
        store(s3, rate=1e6, http=http).copy(origin.url, "huge.bin")
    assert info.value.code == "too_large_for_invocation"
    assert s3.list_objects_v2(Bucket=BUCKET)["KeyCount"] == 0
