"""sume.working.transfer's pieces: parts cut exactly, one PutObject for one part, the conditions
for a ranged copy, and part bodies botocore can read again on a retry."""

import hashlib
import threading
from types import SimpleNamespace

import pytest

from sume.working.transfer import S3Parts, copy_parts, range_plan, stream_parts

PART = 10


class FakeS3:
    """Records calls; ``fail_part`` makes that part's upload raise."""

    def __init__(self, fail_part=None):
        self.calls = []
        self.bodies = {}
        self.fail_part = fail_part
        self._lock = threading.Lock()

    def _record(self, name, **kw):
        with self._lock:
            self.calls.append((name, kw.get("PartNumber")))

    def put_object(self, Body, **kw):
        self._record("put_object")
        self.bodies[0] = Body.read()

    def create_multipart_upload(self, **kw):
        self._record("create_multipart_upload")
        return {"UploadId": "u-1"}

    def upload_part(self, Body, PartNumber, **kw):
        self._record("upload_part", PartNumber=PartNumber)
        if PartNumber == self.fail_part:
            raise RuntimeError("part refused")
        self.bodies[PartNumber] = Body.read()
        return {"ETag": f'"e{PartNumber}"', "ChecksumCRC32": f"c{PartNumber}"}

    def complete_multipart_upload(self, MultipartUpload, **kw):
        self._record("complete_multipart_upload")
        self.completed = MultipartUpload["Parts"]

    def abort_multipart_upload(self, **kw):
        self._record("abort_multipart_upload")

    def names(self):
        return [name for name, _ in self.calls]


def sink(s3, uploads=2, in_memory=3):
    return S3Parts(s3, "b", "k", "video/mp4", uploads=uploads, in_memory=in_memory)


def chunked(data, size):
    return [data[i : i + size] for i in range(0, len(data), size)]


@pytest.mark.parametrize("length", [0, 1, PART - 1, PART, PART + 1, 3 * PART, 3 * PART + 7])
@pytest.mark.parametrize("chunk", [1, 3, PART, 4 * PART])
def test_a_stream_is_cut_into_exact_parts(length, chunk):
    data = bytes(range(256)) * 2
    data = data[:length]
    taken: list[bool] = []

    def room(wait: bool) -> bool:
        taken.append(wait)
        return True

    parts = [p.getvalue() for p in stream_parts(chunked(data, chunk), PART, None, room)]
    assert b"".join(parts) == data
    assert all(len(p) == PART for p in parts[:-1])
    assert 0 < len(parts[-1]) <= PART if parts else length == 0
    assert len(taken) == len(parts)


def test_a_declared_short_body_gets_a_buffer_of_its_own_size():
    (part,) = stream_parts([b"abc"], PART, 3, lambda wait: True)
    assert len(part.getbuffer()) == 3 and part.getvalue() == b"abc"


@pytest.mark.parametrize("data", [b"", b"one part"])
def test_a_body_of_one_part_is_a_single_put(data):
    s3 = FakeS3()
    copied = copy_parts(stream_parts([data], PART, None, lambda wait: True), sink(s3))
    assert s3.names() == ["put_object"]
    assert s3.bodies[0] == data
    assert (copied.size, copied.sha256) == (len(data), hashlib.sha256(data).hexdigest())


def test_a_larger_body_is_a_multipart_upload_completed_in_part_order():
    s3 = FakeS3()
    data = bytes(range(95))
    parts = sink(s3)
    copied = copy_parts(stream_parts(chunked(data, 7), PART, None, parts.room), parts)
    assert s3.names()[0] == "create_multipart_upload"
    assert s3.names()[-1] == "complete_multipart_upload"
    assert [p["PartNumber"] for p in s3.completed] == list(range(1, 11))
    # Each part's checksum, for S3 to check the parts against when completing.
    assert [p["ChecksumCRC32"] for p in s3.completed] == [f"c{n}" for n in range(1, 11)]
    assert b"".join(s3.bodies[n] for n in range(1, 11)) == data
    assert copied.sha256 == hashlib.sha256(data).hexdigest()


def test_a_failed_part_aborts_the_upload_and_raises_its_error():
    s3 = FakeS3(fail_part=2)
    parts = sink(s3)
    with pytest.raises(RuntimeError, match="part refused"):
        copy_parts(stream_parts(chunked(bytes(60), 5), PART, None, parts.room), parts)
    assert s3.names()[-1] == "abort_multipart_upload"
    assert "complete_multipart_upload" not in s3.names()


def test_a_failed_read_aborts_the_upload():
    s3 = FakeS3()
    parts = sink(s3)

    def broken():
        yield bytes(3 * PART)
        raise OSError("connection reset")

    with pytest.raises(OSError):
        copy_parts(stream_parts(broken(), PART, None, parts.room), parts)
    assert s3.names()[-1] == "abort_multipart_upload"


def test_a_copy_needs_room_for_two_parts():
    with pytest.raises(ValueError):
        sink(FakeS3(), in_memory=1)


def answer(length=100, **headers):
    base = {"accept-ranges": "bytes", "etag": '"v1"', "last-modified": "Tue, 14 Nov 2023"}
    base.update({k.replace("_", "-"): v for k, v in headers.items() if v is not None})
    for name in [k.replace("_", "-") for k, v in headers.items() if v is None]:
        base.pop(name, None)
    return SimpleNamespace(headers=base, content_length=length)


def test_a_ranged_copy_needs_ranges_a_length_over_one_part_and_a_validator():
    plan = range_plan(answer(), PART)
    assert plan is not None
    assert (plan.size, plan.if_range) == (100, '"v1"')
    assert plan.validators == {"etag": '"v1"', "last-modified": "Tue, 14 Nov 2023"}
    assert range_plan(answer(accept_ranges=None), PART) is None
    assert range_plan(answer(accept_ranges="none"), PART) is None
    assert range_plan(answer(length=None), PART) is None
    assert range_plan(answer(length=PART), PART) is None
    assert range_plan(answer(etag=None, last_modified=None), PART) is None


def test_a_weak_etag_is_never_sent_in_if_range():
    plan = range_plan(answer(etag='W/"v1"'), PART)
    assert plan is not None and plan.if_range == "Tue, 14 Nov 2023"
    assert range_plan(answer(etag='W/"v1"', last_modified=None), PART) is None
    only_date = range_plan(answer(etag=None), PART)
    assert only_date is not None and only_date.if_range == "Tue, 14 Nov 2023"
