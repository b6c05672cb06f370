"""The receiver's handler on what it refuses or only acknowledges: the answer, and no AWS.

The handler runs as Lambda runs it, on a composition root whose clients are
recorded (``Clients``): a refused request, a ping or an event that is not a
job must ask for no client at all, so nothing of it can be stored, queued or
fetched. What the receiver stores is tested on moto (tests/integration).
"""

import base64
import json
import re
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import receiver
from sume.contract.signature import SCHEME, SIGNATURE_HEADER, TIMESTAMP_HEADER
from sume.receiving import compose
from sume.receiving.compose import build_receiver
from sume.receiving.settings import ReceiverSettings
from tests.builders import (
    LambdaContext,
    apigw_event,
    delivery_event,
    job_body,
    raw_of,
    signed_headers,
)
from tests.unit.test_services import ENV, Clients


@pytest.fixture
def clients():
    return Clients()


@pytest.fixture
def call(clients, monkeypatch):
    """The handler's (status, body) for an event, with the given settings over ENV."""

    def call(event, **env):
        built = build_receiver(ReceiverSettings.from_env({**ENV, **env}), clients)
        monkeypatch.setattr(compose, "receiver_service", lambda: built)
        response = receiver.handler(event, LambdaContext())
        return response["statusCode"], json.loads(response["body"])

    return call


def test_webhook_test_is_acknowledged_and_not_stored(call, clients):
    status, body = call(delivery_event({"event": "webhook.test", "request_id": "req_1"}))
    assert (status, body) == (200, {"result": "test"})
    assert clients.made == []


def test_unknown_signed_event_is_acknowledged_not_stored(call, clients):
    status, body = call(delivery_event({"event": "job.progress", "job_id": "job_p"}))
    assert (status, body) == (200, {"result": "ignored"})
    assert clients.made == []


def test_an_event_that_is_not_a_string_is_ignored(call, clients):
    body = raw_of({"event": ["job.completed"], "job_id": "job_odd"})
    assert call(apigw_event(body, signed_headers(body))) == (200, {"result": "ignored"})
    assert clients.made == []


def test_reserialised_body_does_not_verify(call, clients):
    raw = b'{"event": "job.completed", "job_id": "job_rs", "status": "OK"}'
    reserialised = json.dumps(json.loads(raw), separators=(",", ":")).encode()
    status, body = call(apigw_event(reserialised, signed_headers(raw)))
    assert (status, body) == (401, {"error": "signature_mismatch"})
    assert clients.made == []


def test_wrong_secret_is_401(call, clients):
    raw = raw_of(job_body("job_forged"))
    assert call(apigw_event(raw, signed_headers(raw, secrets=["guess"]))) == (
        401,
        {"error": "signature_mismatch"},
    )
    assert clients.made == []


def test_oversized_body_is_413(call, clients):
    status, body = call(delivery_event(job_body(blob="x" * 1000)), MAX_BODY_BYTES="1000")
    assert (status, body) == (413, {"error": "body_too_large"})
    huge = b"x" * 5000
    status, _ = call(
        apigw_event(huge, signed_headers(huge), base64_encoded=True), MAX_BODY_BYTES="1000"
    )
    assert status == 413
    assert clients.made == []


@pytest.mark.parametrize(
    ("mutate", "status", "reason"),
    [
        (lambda e: e.update(body="%%%", isBase64Encoded=True), 400, "invalid_base64"),
        (lambda e: e["headers"].pop(SIGNATURE_HEADER), 401, "missing_signature"),
        (lambda e: e["headers"].pop(TIMESTAMP_HEADER), 401, "missing_timestamp"),
        (lambda e: e["headers"].update({TIMESTAMP_HEADER: "soon"}), 401, "invalid_timestamp"),
        (lambda e: e["headers"].update({SIGNATURE_HEADER: "v2=abc"}), 401, "malformed_signature"),
        (lambda e: e["requestContext"]["http"].update(method="GET"), 405, "method_not_allowed"),
        (lambda e: e["requestContext"]["http"].update(path="/other"), 404, "not_found"),
    ],
)
def test_rejections(call, clients, mutate, status, reason):
    event = delivery_event(job_body("job_rej"))
    mutate(event)
    assert call(event) == (status, {"error": reason})
    assert clients.made == []


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"not json", "body_not_json"),
        (b"[]", "body_not_object"),
        (b'{"event":"job.completed","status":"OK"}', "invalid_job_id"),
        (b'{"event":"job.completed","job_id":" job "}', "invalid_job_id"),
        (b'{"event":"job.completed","job_id":"job\\u0007"}', "invalid_job_id"),
        (b'{"event":"job.completed","job_id":"job_\\ud800"}', "invalid_job_id"),
        (b'{"event":"job.failed","job_id":7}', "invalid_job_id"),
        (json.dumps({"event": "job.completed", "job_id": "é" * 400}).encode(), "invalid_job_id"),
        (
            b'{"event":"job.failed","job_id":"j","e":' + b"[" * 5000 + b"]" * 5000 + b"}",
            "body_too_deep",
        ),
    ],
)
def test_signed_but_malformed_is_400_and_costs_no_aws_call(call, clients, body, reason):
    assert call(apigw_event(body, signed_headers(body))) == (400, {"error": reason})
    assert clients.made == []


def test_base64_of_invalid_utf8_is_400_not_500(call, clients):
    raw = b"\xff\xfe\x00garbage"
    event = apigw_event(raw.decode("latin-1").encode(), signed_headers(raw))
    event["body"] = base64.b64encode(raw).decode()
    event["isBase64Encoded"] = True
    assert call(event) == (400, {"error": "body_not_json"})
    assert clients.made == []


header_text = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=200)
bodies = st.one_of(
    st.binary(max_size=512),
    st.builds(
        lambda d: json.dumps(d).encode(), st.dictionaries(st.text(max_size=8), st.text(max_size=8))
    ),
    st.just(raw_of(job_body("job_prop"))),
)
signatures = st.one_of(
    st.none(),
    header_text,
    st.lists(st.from_regex(re.escape(SCHEME) + "[0-9a-f]{0,70}", fullmatch=True), max_size=12).map(
        ",".join
    ),
)
timestamps = st.one_of(
    st.none(),
    header_text,
    st.integers(-(10**12), 10**13).map(str),
    # Near now, where only the signature can refuse it.
    st.integers(-600, 600).map(lambda skew: str(int(time.time()) + skew)),
)


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    body=bodies,
    signature=signatures,
    timestamp=timestamps,
    method=st.sampled_from(["POST", "POST", "GET", "PUT", "DELETE"]),
    base64_encoded=st.booleans(),
)
def test_forged_requests_get_4xx_and_cost_nothing(
    call, clients, body, signature, timestamp, method, base64_encoded
):
    headers = {}
    if signature is not None:
        headers[SIGNATURE_HEADER] = signature
    if timestamp is not None:
        headers[TIMESTAMP_HEADER] = timestamp
    event = apigw_event(
        body if base64_encoded else body.decode("utf-8", "replace").encode(),
        headers,
        method=method,
        base64_encoded=base64_encoded,
    )
    status, _ = call(event)
    assert 400 <= status < 500
    assert clients.made == []
