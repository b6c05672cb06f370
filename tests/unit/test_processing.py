"""Pure parts of the worker's domain: artifact entries, object keys, the announcement."""

import hashlib
import json
from decimal import Decimal

import pytest

from sume.core.names import DETAIL_TYPES
from sume.net.errors import TransientFetchError
from sume.net.urls import redact_url
from sume.polling.registering import MAX_METADATA_BYTES, InvalidRegistration, _checked_metadata
from sume.store.job import Job
from sume.store.sizing import MAX_ITEM_BYTES
from sume.store.sizing import plain_item_size as item_size
from sume.store.sizing import plain_size as attribute_size
from sume.working.announce import (
    MAX_ENTRY_BYTES,
    Announcement,
    Announcer,
    LostAnnouncement,
    to_json,
)
from sume.working.artifacts import (
    InvalidArtifacts,
    StoredArtifact,
    artifact_urls,
    content_type,
    object_key,
    source_digest,
)
from sume.working.failures import failure_details
from sume.working.progress import FINISH_RESERVE_BYTES, Progress, room_for_records


def test_artifact_entries_are_urls_or_objects_with_a_url():
    payload = {"artifacts": ["https://a/x.mp4", {"url": " https://a/y.jpg ", "kind": "thumb"}]}
    assert artifact_urls(payload) == ["https://a/x.mp4", "https://a/y.jpg"]
    assert artifact_urls({}) == []
    assert artifact_urls(None) == []
    assert artifact_urls({"artifacts": None}) == []


@pytest.mark.parametrize(
    "artifacts", ["https://a/x", [42], [{"href": "https://a/x"}], [""], [{"url": None}]]
)
def test_anything_else_is_refused_as_a_whole(artifacts):
    with pytest.raises(InvalidArtifacts):
        artifact_urls({"artifacts": artifacts})


def test_object_keys_are_stable_and_stay_under_the_job_prefix():
    assert object_key("job_1", 0, "https://cdn/out/render.mp4?sig=abc") == (
        "jobs/job_1/000-render.mp4"
    )
    assert object_key("job_1", 0, "https://cdn/out/render.mp4") == object_key(
        "job_1", 0, "https://cdn/out/render.mp4"
    )
    assert object_key("a/../b", 3, "https://cdn/") == "jobs/a%2F..%2Fb/003-artifact"
    assert object_key("j", 1, "https://cdn/x/..%2F..%2Fetc%2Fpasswd") == "jobs/j/001-passwd"
    assert object_key("j", 2, "https://cdn/a%20b%C3%A9.mov") == "jobs/j/002-a_b_.mov"


def test_the_announcement_detail_is_the_documented_shape():
    artifact = {
        "bucket": "b",
        "key": "jobs/j/000-x.mp4",
        "uri": "s3://b/jobs/j/000-x.mp4",
        "size": 3,
        "sha256": "ab",
        "content_type": "video/mp4",
        "source_url": "https://cdn/x.mp4",
        "stored_at": 5,
    }
    announcement = Announcement(
        job_id="j",
        result="completed",
        outcome="completed",
        event="job.completed",
        status="OK",
        processed_at=1_800_000_000,
        artifacts=[artifact],
        sequence=3,
        metadata={"order": "o-1", "price": Decimal("9.99")},
        lost_at=1_799_999_000,
    )
    assert announcement.detail_type == DETAIL_TYPES["completed"] == "Sume Job Completed"
    detail = announcement.contents()[0]
    assert detail == {
        "version": 1,
        "job_id": "j",
        "outcome": "completed",
        "event": "job.completed",
        "status": "OK",
        "error": None,
        "error_truncated": False,
        "processing_error": None,
        "artifacts": [{k: v for k, v in artifact.items() if k != "stored_at"}],
        "artifact_count": 1,
        "artifacts_truncated": False,
        "processed_at": "2027-01-15T08:00:00Z",
        "replay": False,
        "sequence": 3,
        "metadata": {"order": "o-1", "price": Decimal("9.99")},
        "lost_at": "2027-01-15T07:43:20Z",
    }
    # The fraction goes out with every digit it was registered with.
    assert '"price":9.99' in to_json(detail)


def test_a_processing_error_has_its_own_detail_type():
    announcement = Announcement(
        job_id="j",
        result="processing_error",
        outcome="completed",
        event="job.completed",
        status="OK",
        processed_at=0,
        processing_error={"code": "http_404", "message": "m", "url": "u"},
    )
    assert announcement.detail_type == "Sume Job Processing Error"
    assert announcement.contents()[0]["processing_error"]["code"] == "http_404"


def record(i, path="x" * 200):
    return {
        "bucket": "b",
        "key": f"jobs/j/{i:03d}-x.mp4",
        "uri": f"s3://b/jobs/j/{i:03d}-x.mp4",
        "size": 3,
        "sha256": "ab" * 32,
        "content_type": "video/mp4",
        "source_url": f"https://cdn/{path}/{i}.mp4",
        "source_digest": "cd" * 32,
        "stored_at": 5,
    }


def completed(**fields):
    """A completed job's announcement, with ``fields`` instead of the defaults."""
    defaults = {
        "job_id": "j",
        "result": "completed",
        "outcome": "completed",
        "event": "job.completed",
        "status": "OK",
        "processed_at": 0,
    }
    return Announcement(**{**defaults, **fields})


def test_an_artifact_list_too_long_to_announce_keeps_its_first_records():
    records = [record(i) for i in range(5000)]
    announcement = completed(
        status="OK" * 100_000, error={"message": "m" * 500_000}, artifacts=records
    )

    detail, resources = announcement.contents()

    def size(detail, resources):
        return len(to_json(detail)) + sum(len(arn) for arn in resources)

    assert size(detail, resources) <= MAX_ENTRY_BYTES
    assert (detail["artifact_count"], detail["artifacts_truncated"]) == (5000, True)
    kept = detail["artifacts"]
    assert 100 < len(kept) < 5000
    assert [a["key"] for a in kept] == [r["key"] for r in records[: len(kept)]]
    # A record and its ARN are cut together, and one more pair would not have fit.
    assert resources == [f"arn:aws:s3:::b/{a['key']}" for a in kept]
    one_more = ({**detail, "artifacts": [*kept, kept[0]]}, [*resources, resources[0]])
    assert size(*one_more) > MAX_ENTRY_BYTES
    assert len(detail["status"]) == 256
    assert detail["error_truncated"] is True


class RecordingEvents:
    def __init__(self):
        self.entries = []

    def put_events(self, Entries):
        self.entries.extend(Entries)
        return {"FailedEntryCount": 0, "Entries": [{"EventId": "1"}]}


def test_the_announcement_names_each_listed_artifact_by_its_s3_arn():
    announcement = completed(artifacts=[record(0), record(1)])
    events = RecordingEvents()

    Announcer(events, "bus", "aws-cn").announce(announcement)

    (entry,) = events.entries
    assert entry["Resources"] == [
        "arn:aws-cn:s3:::b/jobs/j/000-x.mp4",
        "arn:aws-cn:s3:::b/jobs/j/001-x.mp4",
    ]
    assert json.loads(entry["Detail"]) == announcement.contents()[0]


PRESIGNED = "https://cdn.example/out/a.mp4?X-Amz-Credential=AKIA&X-Amz-Signature=5ecre7"


def test_failure_details_name_urls_without_their_query():
    fetch = TransientFetchError("http_503", f"HTTP 503 from {PRESIGNED}", PRESIGNED, 503)
    other = RuntimeError(f"boom while reading {PRESIGNED} " + "x" * 5000)

    for details in (failure_details(fetch), failure_details(other)):
        assert "5ecre7" not in json.dumps(details)
        assert "https://cdn.example/out/a.mp4" in details["message"]
        assert len(details["message"].encode("utf-8")) <= 1024
    assert failure_details(fetch) == {
        "code": "http_503",
        "message": "HTTP 503 from https://cdn.example/out/a.mp4",
        "url": "https://cdn.example/out/a.mp4",
    }
    assert failure_details(other)["code"] == "RuntimeError"


def test_a_stored_artifact_records_the_url_without_its_query():
    artifact = StoredArtifact(
        source_url=redact_url(PRESIGNED),
        source_digest=source_digest(PRESIGNED),
        bucket="b",
        key="k",
        size=1,
        sha256="s",
        content_type="video/mp4",
    )

    record_ = artifact.as_record()

    assert record_["source_url"] == "https://cdn.example/out/a.mp4"
    assert record_["source_digest"] == hashlib.sha256(PRESIGNED.encode()).hexdigest()
    assert "5ecre7" not in json.dumps(record_)


@pytest.mark.parametrize(
    ("header", "stored"),
    [
        ("video/mp4", "video/mp4"),
        ("  text/plain; charset=utf-8 ", "text/plain; charset=utf-8"),
        (None, "application/octet-stream"),
        ("", "application/octet-stream"),
        ("a/" + "b" * 300, "application/octet-stream"),
        ("vidéo/mp4", "application/octet-stream"),
        ("video/mp4\x00", "application/octet-stream"),
    ],
)
def test_the_remote_content_type_is_kept_only_when_plausible(header, stored):
    assert content_type(header) == stored


def test_artifact_records_on_the_item_stop_at_its_room():
    item = {"job_id": "j", "body": "b" * 300_000, "artifacts": [record(0)] * 500}
    room = room_for_records(Job(job_id="j", body="b" * 300_000, artifacts=[record(0)] * 500))
    assert room == MAX_ITEM_BYTES - FINISH_RESERVE_BYTES - item_size(
        {"job_id": "j", "body": "b" * 300_000}
    )
    progress = Progress(room=room, artifacts=[record(i) for i in range(500)])

    kept = progress.on_item()

    assert 0 < len(kept) < 500
    assert kept == progress.artifacts[: len(kept)]
    assert attribute_size(kept) <= room < attribute_size(progress.artifacts[: len(kept) + 1])
    assert item_size({**item, "artifacts": kept}) <= MAX_ITEM_BYTES - FINISH_RESERVE_BYTES


def test_dynamodb_item_sizes_follow_its_documented_rules():
    assert attribute_size("héllo") == 6
    assert attribute_size(True) == attribute_size(None) == 1
    assert attribute_size(12345) == 4  # 1 byte per two digits, plus 1 (rounded up)
    assert attribute_size([]) == attribute_size({}) == 3
    assert attribute_size(["ab", 1]) == 3 + (1 + 2) + (1 + 2)
    assert attribute_size({"k": "v"}) == 3 + 1 + 1 + 1
    assert item_size({"job_id": "j1", "n": 7}) == 6 + 2 + 1 + 2


def largest_metadata() -> dict:
    """Metadata registration just takes: 64 KiB of JSON, every character escaped."""
    metadata = {"k": "\u00e9" * ((MAX_METADATA_BYTES - 8) // 6)}
    assert _checked_metadata(metadata) == metadata
    with pytest.raises(InvalidRegistration):
        _checked_metadata({"k": metadata["k"] + "\u00e9"})
    return metadata


def test_the_largest_metadata_leaves_the_entry_within_eventbridges_bound():
    metadata = largest_metadata()
    records = [record(i) for i in range(2000)]
    processed = completed(
        status="OK" * 100_000,
        error={"message": "m" * 500_000},
        artifacts=records,
        metadata=metadata,
        lost_at=1,
    )
    lost = LostAnnouncement("j", 1, 0, 10**6, "e" * 10_000, metadata=metadata)

    for announcement in (processed, lost):
        detail, resources = announcement.contents()
        assert detail["metadata"] == metadata
        assert len(to_json(detail)) + sum(len(arn) for arn in resources) <= MAX_ENTRY_BYTES
    # The artifacts make room for it, and still say how many there were.
    assert processed.contents()[0]["artifact_count"] == 2000
    assert lost.contents()[0]["last_poll_error"] == "e" * 256
