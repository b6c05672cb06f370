import json

import pytest

from sume.envelope import JobEvent, MalformedEvent, Ping, UnknownEvent, parse


@pytest.mark.parametrize(
    ("event", "outcome"),
    [("job.completed", "completed"), ("job.failed", "failed"), ("job.canceled", "canceled")],
)
def test_terminal_events(event, outcome):
    raw = json.dumps({"event": event, "job_id": "j1", "status": "OK", "extra": {"kept": 1}})
    parsed = parse(raw.encode())
    assert isinstance(parsed, JobEvent)
    assert (parsed.job_id, parsed.event, parsed.outcome) == ("j1", event, outcome)
    assert parsed.raw == raw  # the body exactly as received, unknown fields included


def test_raw_text_is_kept_byte_for_byte():
    raw = '{"event":"job.failed",  "job_id":"j\\u00e9","status":"ERROR","error":{"m":"café ✓"}}\n'
    parsed = parse(raw.encode())
    assert isinstance(parsed, JobEvent)
    assert parsed.raw == raw
    assert parsed.job_id == "jé"


def test_webhook_test_has_no_job():
    assert parse(b'{"event":"webhook.test","request_id":"req_1"}') == Ping("req_1")


@pytest.mark.parametrize("event", ["job.progress", "invoice.paid", None, 7])
def test_unknown_events_are_not_jobs(event):
    parsed = parse(json.dumps({"event": event, "job_id": "j"}).encode())
    assert isinstance(parsed, UnknownEvent)


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"", "body_not_json"),
        (b"not json", "body_not_json"),
        (b"\xff\xfe{}", "body_not_json"),
        (b"[1,2]", "body_not_object"),
        (b'"job.completed"', "body_not_object"),
        (b'{"event":"job.completed"}', "missing_job_id"),
        (b'{"event":"job.completed","job_id":""}', "missing_job_id"),
        (b'{"event":"job.completed","job_id":"   "}', "missing_job_id"),
        (b'{"event":"job.failed","job_id":42}', "missing_job_id"),
        (b'{"event":"job.canceled","job_id":null}', "missing_job_id"),
        (json.dumps({"event": "job.failed", "job_id": "x" * 1025}).encode(), "job_id_too_long"),
    ],
)
def test_malformed(raw, reason):
    with pytest.raises(MalformedEvent) as err:
        parse(raw)
    assert err.value.reason == reason
