"""The ops story of a job item as the worker now writes it down."""

from sume.store.job import Job, State
from sume_cli.story import as_json, render


def test_a_cut_error_and_a_cut_artifact_list_say_so():
    job = Job(
        job_id="job_1",
        state=State.PROCESSED,
        outcome="failed",
        error='{"code":"HUGE","message":"mmm',
        error_truncated=True,
        artifacts=[{"uri": "s3://b/jobs/job_1/000-a.mp4", "size": 3}],
        artifact_count=40,
        artifacts_truncated=True,
    )

    lines = render(job).splitlines()

    assert 'error      {"code":"HUGE","message":"mmm... (cut at 29 characters)' in lines
    assert "artifacts  40 stored; the item lists the first 1" in lines
    assert not any(line.startswith(("error_truncated", "artifact_count")) for line in lines)


def test_an_error_with_a_lone_surrogate_prints_as_stored():
    job = Job(job_id="j", state=State.PROCESSED, error='{"code":"BAD\\ud800"}')

    out = render(job)

    out.encode("utf-8")
    assert '{"code":"BAD\\ud800"}' in out


def test_a_finish_without_its_details_is_flagged():
    job = Job(
        job_id="j",
        state=State.PROCESSING_ERROR,
        details_dropped=True,
        processing_error={"code": "http_404"},
    )

    out = render(job)

    assert "not recorded: DynamoDB refused the finish" in out
    assert "details_dropped" not in out


def test_a_polls_last_error_and_unknown_attributes_are_shown():
    job = Job(
        job_id="j",
        state=State.AWAITING,
        poll_attempts=3,
        last_poll_error="refused_host",
        other={"state": "paused", "colour": "red", "checked_at": 0},
    )

    lines = render(job).splitlines()

    assert "last poll error  refused_host" in lines
    assert "colour           red" in lines
    assert "checked_at       1970-01-01T00:00:00Z" in lines
    assert "state            paused" in lines


def test_json_is_the_item_as_stored_with_iso_times():
    job = Job(job_id="j", state=State.PROCESSED, processed_at=0, other={"colour": "red"})

    assert as_json(job) == {
        "colour": "red",
        "job_id": "j",
        "processed_at": "1970-01-01T00:00:00Z",
        "state": "processed",
    }
