"""Pure parts of the worker's domain: artifact entries, object keys, the announcement."""

import pytest

from sume.announce import Announcement
from sume.artifacts import InvalidArtifacts, artifact_urls, object_key
from sume.schema import DETAIL_TYPES


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
    )
    assert announcement.detail_type == DETAIL_TYPES["completed"] == "Sume Job Completed"
    detail = announcement.detail()
    assert detail == {
        "version": 1,
        "job_id": "j",
        "outcome": "completed",
        "event": "job.completed",
        "status": "OK",
        "error": None,
        "processing_error": None,
        "artifacts": [{k: v for k, v in artifact.items() if k != "stored_at"}],
        "processed_at": "2027-01-15T08:00:00Z",
        "replay": False,
    }


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
    assert announcement.detail()["processing_error"]["code"] == "http_404"
