import json

import pytest

from sume.contract.envelope import (
    MAX_DEPTH,
    MAX_STATUS_BYTES,
    JobEvent,
    MalformedEvent,
    Ping,
    UnknownEvent,
    parse,
    stored_event,
)


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


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"", "body_not_json"),
        (b"not json", "body_not_json"),
        (b"\xff\xfe{}", "body_not_json"),
        (b'{"event":"job.completed","job_id":"j","n":NaN}', "body_not_json"),
        (b'{"event":"job.completed","job_id":"j","n":-Infinity}', "body_not_json"),
        (b"[1,2]", "body_not_object"),
        (b'"job.completed"', "body_not_object"),
        (b'{"event":"job.completed"}', "invalid_job_id"),
        (b'{"event":"job.completed","job_id":""}', "invalid_job_id"),
        (b'{"event":"job.completed","job_id":"   "}', "invalid_job_id"),
        (b'{"event":"job.completed","job_id":" job "}', "invalid_job_id"),
        (b'{"event":"job.completed","job_id":"job\\u0001"}', "invalid_job_id"),
        (b'{"event":"job.completed","job_id":"job_\\ud800"}', "invalid_job_id"),
        (b'{"event":"job.failed","job_id":42}', "invalid_job_id"),
        (b'{"event":"job.failed","job_id":["j"]}', "invalid_job_id"),
        (b'{"event":"job.canceled","job_id":null}', "invalid_job_id"),
        (json.dumps({"event": "job.failed", "job_id": "x" * 257}).encode(), "invalid_job_id"),
        (json.dumps({"event": "job.failed", "job_id": "é" * 400}).encode(), "invalid_job_id"),
        (f'{{"event":"job.completed","job_id":"j","e":{nested(5000)}}}'.encode(), "body_too_deep"),
        (nested(5000).encode(), "body_too_deep"),
        (f'{{"a":{nested(MAX_DEPTH)}}}'.encode(), "body_too_deep"),
    ],
)
def test_malformed(raw, reason):
    with pytest.raises(MalformedEvent) as err:
        parse(raw)
    assert err.value.reason == reason


def test_nesting_up_to_the_limit_is_accepted_and_brackets_in_strings_do_not_count():
    deepest = f'{{"event":"job.failed","job_id":"j","error":{nested(MAX_DEPTH - 1)}}}'
    assert isinstance(parse(deepest.encode()), JobEvent)
    quoted = json.dumps({"event": "job.failed", "job_id": "j", "error": "[{" * 5000 + '\\"['})
    assert isinstance(parse(quoted.encode()), JobEvent)


@pytest.mark.parametrize("event", [["job.completed"], {"job.completed": 1}, 1.5, True])
def test_an_event_that_is_not_a_string_is_ignored(event):
    assert parse(json.dumps({"event": event, "job_id": "j"}).encode()) == UnknownEvent(None)


def test_the_stored_status_is_bounded_and_the_body_kept_whole():
    raw = json.dumps({"event": "job.failed", "job_id": "j", "status": "E" * 500_000 + "\ud800"})
    parsed = parse(raw.encode())
    assert isinstance(parsed, JobEvent)
    assert parsed.status == "E" * MAX_STATUS_BYTES
    assert parsed.raw == raw
    surrogate = parse(b'{"event":"job.failed","job_id":"j","status":"ERR\\udc00"}')
    assert isinstance(surrogate, JobEvent)
    assert surrogate.status == "ERR\ufffd"
    unknown = parse(json.dumps({"event": "x" * 100_000}).encode())
    assert unknown == UnknownEvent("x" * MAX_STATUS_BYTES)


def test_a_stored_event_is_read_back_as_the_items_job_without_the_intake_rules():
    raw = json.dumps({"event": "job.canceled", "job_id": "not the rule's", "status": "E" * 100})
    event = stored_event(raw, "job_1")
    assert (event.job_id, event.event, event.outcome) == ("job_1", "job.canceled", "canceled")
    assert event.status == "E" * MAX_STATUS_BYTES
    assert event.raw == raw
    assert event.data == json.loads(raw)


@pytest.mark.parametrize(
    ("raw", "error"),
    [
        ("{", ValueError),
        ("[" * 100_000 + "]" * 100_000, RecursionError),
        ('["job.completed"]', MalformedEvent),
        ('{"event":"job.progress"}', MalformedEvent),
        ('{"event":["job.completed"]}', MalformedEvent),
        ('{"job_id":"job_1"}', MalformedEvent),
    ],
)
def test_a_stored_event_the_worker_cannot_read_raises(raw, error):
    with pytest.raises(error):
        stored_event(raw, "job_1")
