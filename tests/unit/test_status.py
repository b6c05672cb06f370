import json

import pytest

from sume.contract.envelope import MAX_STATUS_BYTES
from sume.core.errors import ConfigurationError
from sume.net.errors import RefusedUrl
from sume.net.policy import host_listed
from sume.polling.status import StatusClient, Verdict, bearer_headers, interpret, token_source
from tests.builders import job_body


def answer(data, status=200):
    return status, json.dumps(data)


def test_terminal_envelope_is_used_as_is():
    body = job_body("job_1", artifacts=["https://cdn.example/a.mp4"], extra_field={"kept": 1})
    text = json.dumps(body, indent=2)
    result = interpret("job_1", 200, text)
    assert result.verdict is Verdict.TERMINAL
    assert result.reason == "envelope"
    assert result.event is not None
    assert result.event.raw == text
    assert (result.event.event, result.event.status) == ("job.completed", "OK")


@pytest.mark.parametrize("event", ["job.failed", "job.canceled"])
def test_error_envelopes_are_used_as_is(event):
    text = json.dumps(job_body("job_1", event=event))
    result = interpret("job_1", 200, text)
    assert result.event is not None
    assert (result.event.event, result.event.status, result.event.raw) == (event, "ERROR", text)


ARTIFACTS = ["https://cdn.example/job_2.mp4"]


@pytest.mark.parametrize(
    ("job_id", "data"),
    [
        # Envelopes.
        ("job_1", job_body("job_2", artifacts=ARTIFACTS)),
        ("job_1", job_body("job_2", event="job.failed")),
        ("job_1", {"event": "job.completed", "id": "job_2", "payload": {"artifacts": ARTIFACTS}}),
        ("job_1", job_body("job_1", id="job_2")),
        ("job_1", job_body("job_2", id="job_1")),
        # Status or state answers.
        ("job_1", {"job_id": "job_2", "status": "completed", "artifacts": ARTIFACTS}),
        ("job_1", {"id": "job_2", "state": "failed", "error": "codec"}),
        ("job_1", {"job_id": "job_1", "id": "job_2", "status": "completed"}),
        ("job_1", {"id": "job_1", "job_id": "job_2", "status": "completed"}),
        ("job_1", {"job_id": "JOB_1", "status": "completed"}),
        ("job_1", {"id": "", "status": "completed"}),
        # A name that is not a string is never this job's, even when it reads the same.
        ("42", {"id": 42, "status": "completed"}),
        ("job_1", {"id": {"job_id": "job_1"}, "status": "completed"}),
        ("job_1", {"job_id": ["job_1"], "status": "completed"}),
        ("job_1", {"id": False, "status": "completed"}),
        # Another job's answer says nothing about this one, terminal or not.
        ("job_1", {"job_id": "job_2", "status": "running"}),
        ("job_1", {"event": "job.progress", "job_id": "job_2"}),
    ],
)
def test_an_answer_naming_another_job_is_never_recorded(job_id, data):
    result = interpret(job_id, *answer(data))
    assert (result.verdict, result.reason, result.event) == (
        Verdict.OTHER_JOB,
        "job_id_mismatch",
        None,
    )


@pytest.mark.parametrize(
    "data",
    [
        {"status": "completed"},
        {"job_id": None, "id": None, "status": "completed"},
        {"id": "job_1", "status": "completed"},
        {"job_id": "job_1", "id": "job_1", "status": "completed"},
        {"job_id": "job_1", "id": None, "status": "completed"},
        # Only the top level names a job.
        {"status": "completed", "payload": {"job_id": "job_2"}, "job": {"id": "job_2"}},
        {"event": "job.completed", "id": None},
    ],
)
def test_an_answer_naming_this_job_or_none_is_read(data):
    result = interpret("job_1", *answer(data))
    assert result.verdict is Verdict.TERMINAL
    assert result.event is not None
    assert (result.event.job_id, result.event.event) == ("job_1", "job.completed")
    assert json.loads(result.event.raw)["job_id"] == "job_1"


def test_envelope_without_job_id_is_wrapped_for_this_job():
    data = {"event": "job.failed", "error": {"code": "X"}}
    result = interpret("job_1", *answer(data))
    assert result.verdict is Verdict.TERMINAL
    assert result.event is not None
    stored = json.loads(result.event.raw)
    assert stored["job_id"] == "job_1"
    assert stored["event"] == "job.failed"
    assert stored["status"] == "ERROR"
    assert stored["error"] == {"code": "X"}
    assert stored["status_response"] == data


@pytest.mark.parametrize(
    ("word", "event", "status"),
    [
        ("completed", "job.completed", "OK"),
        ("Succeeded", "job.completed", "OK"),
        (" DONE ", "job.completed", "OK"),
        ("failed", "job.failed", "ERROR"),
        ("error", "job.failed", "ERROR"),
        ("canceled", "job.canceled", "ERROR"),
        ("cancelled", "job.canceled", "ERROR"),
    ],
)
def test_terminal_status_words(word, event, status):
    data = {"id": "job_1", "status": word, "progress": 100}
    result = interpret("job_1", *answer(data))
    assert result.verdict is Verdict.TERMINAL
    assert result.reason == "status_field"
    assert result.event is not None
    assert (result.event.job_id, result.event.event, result.event.status) == (
        "job_1",
        event,
        status,
    )
    stored = json.loads(result.event.raw)
    assert stored["status_response"] == data
    assert result.event.data == stored


def test_state_field_is_read_when_status_is_not_terminal():
    result = interpret("job_1", *answer({"status": "OK", "state": "completed"}))
    assert result.event is not None
    assert result.event.event == "job.completed"


def test_completed_carries_artifacts_from_top_level_or_payload():
    top = interpret("j", *answer({"status": "completed", "artifacts": ["https://a/1"]}))
    nested = interpret("j", *answer({"state": "done", "payload": {"artifacts": ["https://a/2"]}}))
    none = interpret("j", *answer({"status": "completed"}))
    assert top.event is not None
    assert nested.event is not None
    assert none.event is not None
    assert json.loads(top.event.raw)["payload"] == {"artifacts": ["https://a/1"]}
    assert json.loads(nested.event.raw)["payload"] == {"artifacts": ["https://a/2"]}
    assert json.loads(none.event.raw)["payload"] == {"artifacts": []}


def test_failed_carries_error_object_or_message_or_a_default():
    obj = interpret("j", *answer({"status": "failed", "error": {"code": "E1"}}))
    text = interpret("j", *answer({"status": "failed", "error": "disk full"}))
    default = interpret("j", *answer({"status": "cancelled"}))
    assert obj.event is not None
    assert text.event is not None
    assert default.event is not None
    assert json.loads(obj.event.raw)["error"] == {"code": "E1"}
    assert json.loads(text.event.raw)["error"] == {"message": "disk full"}
    assert json.loads(default.event.raw)["error"]["code"] == "JOB_CANCELED"


@pytest.mark.parametrize(
    ("status", "text", "reason"),
    [
        (200, json.dumps({"status": "running"}), "not_terminal"),
        (200, json.dumps({"status": "queued", "state": "pending"}), "not_terminal"),
        (200, json.dumps({"status": 3}), "not_terminal"),
        (200, json.dumps({"event": "job.progress", "job_id": "job_1"}), "not_terminal"),
        (200, json.dumps({"event": "webhook.test", "request_id": "r"}), "not_terminal"),
        (200, json.dumps(["completed"]), "body_not_object"),
        (200, "<html>completed</html>", "body_not_json"),
        (200, '{"status":"completed","progress":NaN}', "body_not_json"),
        (200, '{"status":"completed","x":' + "[" * 5000 + "]" * 5000 + "}", "body_too_deep"),
        (404, "", "http_404"),
        (410, "", "http_410"),
    ],
)
def test_anything_else_is_not_yet(status, text, reason):
    result = interpret("job_1", status, text)
    assert (result.verdict, result.reason, result.event) == (Verdict.PENDING, reason, None)


@pytest.mark.parametrize(
    "data",
    [
        {"status": "completed"},
        {"event": "job.completed"},
        job_body(" job_1 "),
    ],
)
def test_a_job_registered_under_an_invalid_id_is_never_recorded(data):
    # Only a job registered before the id rule can have one.
    result = interpret(" job_1 ", *answer(data))
    assert (result.verdict, result.reason, result.event) == (
        Verdict.UNREACHABLE,
        "invalid_job_id",
        None,
    )
    assert result.permanent


@pytest.mark.parametrize(
    "data",
    [
        {"status": "failed", "detail": "x\ud800", "note": "E" * 100_000},
        {"event": "job.failed", "status": "E" * 100_000 + "\ud800"},
        job_body("job_1", event="job.failed", status="E" * 100_000),
    ],
)
def test_what_a_poll_stores_is_bounded_and_valid_utf8(data):
    result = interpret("job_1", *answer(data))
    assert result.event is not None
    assert len(result.event.status) <= MAX_STATUS_BYTES
    result.event.raw.encode("utf-8")
    assert json.loads(result.event.raw)["job_id"] == "job_1"


@pytest.mark.parametrize(
    ("status", "permanent"),
    [(500, False), (503, False), (429, False), (401, True), (403, True), (302, True)],
)
def test_error_answers_are_unreachable(status, permanent):
    result = interpret("job_1", status, json.dumps({"status": "completed"}))
    assert result.verdict is Verdict.UNREACHABLE
    assert result.permanent is permanent
    assert result.event is None


def test_client_sends_the_token_and_maps_the_answer():
    seen = []

    def get(url, headers, deadline):
        seen.append((url, dict(headers), deadline))
        return answer({"status": "completed"})

    client = StatusClient(get, lambda: "tok", ("sume.example",))
    result = client.check("job_1", "https://sume.example/jobs/job_1", 1234.5)
    assert result.verdict is Verdict.TERMINAL
    assert seen == [
        (
            "https://sume.example/jobs/job_1",
            {"accept": "application/json", "authorization": "Bearer tok"},
            1234.5,
        )
    ]


def test_client_without_token_sends_no_authorization():
    assert "authorization" not in bearer_headers(None)
    assert "authorization" not in bearer_headers("")


def test_client_turns_fetch_failures_into_unreachable():
    def get(url, headers, deadline):
        raise RefusedUrl("refused_host", "not on the policy", url)

    result = StatusClient(get, lambda: None, ()).check("job_1", "https://x/y")
    assert (result.verdict, result.reason, result.permanent) == (
        Verdict.UNREACHABLE,
        "refused_host",
        True,
    )


def recording_get(seen):
    def get(url, headers, deadline=None):
        seen.append((url, dict(headers)))
        return answer({"status": "running"})

    return get


def token_never_read():
    raise AssertionError("the token was read for a host it may not go to")


def test_without_an_allow_list_the_token_is_never_sent_or_read():
    seen: list = []
    client = StatusClient(recording_get(seen), token_never_read, ())
    result = client.check("job_1", "https://anyone.example/jobs/job_1")
    assert result.verdict is Verdict.PENDING
    assert seen == [("https://anyone.example/jobs/job_1", {"accept": "application/json"})]


@pytest.mark.parametrize(
    "url",
    [
        "https://evil.example/jobs/job_1",
        "https://api.sume.example.evil.example/jobs/job_1",
        "https://sume.example/jobs/job_1",
        "not a url",
        "https://[::1/x",
    ],
)
def test_a_status_url_off_the_list_is_refused_unread_and_tokenless(url):
    seen: list = []
    client = StatusClient(recording_get(seen), token_never_read, ("api.sume.example",))
    result = client.check("job_1", url)
    assert (result.verdict, result.reason, result.permanent) == (
        Verdict.UNREACHABLE,
        "refused_host",
        True,
    )
    assert seen == []


@pytest.mark.parametrize(
    ("url", "allowed", "listed"),
    [
        ("https://api.sume.example/x", ("api.sume.example",), True),
        ("https://API.Sume.Example./x?sig=1", ("api.sume.example",), True),
        ("https://eu.api.sume.example/x", ("*.api.sume.example",), True),
        ("https://api.sume.example/x", ("*.api.sume.example",), False),
        ("https://xn--bcher-kva.example/x", ("xn--bcher-kva.example",), True),
        ("https://bücher.example/x", ("xn--bcher-kva.example",), True),
        ("http://127.0.0.1:8080/x", ("127.0.0.1",), True),
        ("https://user@api.sume.example/x", ("api.sume.example",), True),
        ("https://api.sume.example/x", (), False),
        ("/relative/only", ("api.sume.example",), False),
    ],
)
def test_host_listed_compares_hosts_as_the_fetch_does(url, allowed, listed):
    assert host_listed(url, allowed) is listed


def test_listed_host_gets_the_token_checked_at_use():
    seen: list = []
    client = StatusClient(recording_get(seen), token_source(lambda: "tok"), ("api.sume.example",))
    client.check("job_1", "https://api.sume.example/jobs/job_1")
    assert seen[0][1]["authorization"] == "Bearer tok"

    bad = StatusClient(
        recording_get(seen), token_source(lambda: '{"token": "tok"}'), ("api.sume.example",)
    )
    with pytest.raises(ConfigurationError):
        bad.check("job_1", "https://api.sume.example/jobs/job_1")
    assert token_source(None)() is None
