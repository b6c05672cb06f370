"""The ops story of a job item as the worker now writes it down."""

from sume_cli.story import render


def test_a_cut_error_and_a_cut_artifact_list_say_so():
    item = {
        "job_id": "job_1",
        "state": "processed",
        "outcome": "failed",
        "error": '{"code":"HUGE","message":"mmm',
        "error_truncated": True,
        "artifacts": [{"uri": "s3://b/jobs/job_1/000-a.mp4", "size": 3}],
        "artifact_count": 40,
        "artifacts_truncated": True,
    }

    lines = render(item).splitlines()

    assert 'error      {"code":"HUGE","message":"mmm... (cut at 29 characters)' in lines
    assert "artifacts  40 stored; the item lists the first 1" in lines
    assert not any(line.startswith(("error_truncated", "artifact_count")) for line in lines)


def test_an_error_with_a_lone_surrogate_prints_as_stored():
    item = {"job_id": "j", "state": "processed", "error": '{"code":"BAD\\ud800"}'}

    out = render(item)

    out.encode("utf-8")
    assert '{"code":"BAD\\ud800"}' in out


def test_a_finish_without_its_details_is_flagged():
    item = {
        "job_id": "j",
        "state": "processing_error",
        "details_dropped": True,
        "processing_error": {"code": "http_404"},
    }

    out = render(item)

    assert "not recorded: DynamoDB refused the finish" in out
    assert "details_dropped" not in out
