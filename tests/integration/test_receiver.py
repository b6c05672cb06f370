"""The receiver against the contract, on in-process moto."""

import itertools
import json
import logging
import time
from typing import Any

import boto3
import pytest

import receiver
from devstack.counting import CallCounter
from sume.contract.envelope import MAX_STATUS_BYTES, JobEvent, parse
from sume.contract.signature import SCHEME, SIGNATURE_HEADER
from sume.core import runtime
from sume.receiving.settings import ReceiverSettings
from sume.store.compose import build_intake, build_jobs
from sume.store.intake import Outcome
from sume.store.job import RECENT_DELIVERIES, Source
from tests.awscalls import hooking_new_clients
from tests.builders import (
    SECRET,
    LambdaContext,
    apigw_event,
    delivery_event,
    job_body,
    raw_of,
    signed_headers,
)
from tests.integration.conftest import CONFORMANCE

pytestmark = CONFORMANCE


def call(event):
    response = receiver.handler(event, LambdaContext())
    return response["statusCode"], json.loads(response["body"])


def item(names, job_id):
    return (
        boto3.client("dynamodb")
        .get_item(TableName=names.table, Key={"job_id": {"S": job_id}}, ConsistentRead=True)
        .get("Item")
    )


def queued(names):
    sqs = boto3.client("sqs")
    bodies: list[str] = []
    while True:
        got = sqs.receive_message(QueueUrl=names.queue_url, MaxNumberOfMessages=10)
        if not got.get("Messages"):
            return sorted(bodies)
        bodies += [m["Body"] for m in got["Messages"]]


@pytest.fixture
def aws_calls(aws):
    with CallCounter().installed() as counter:
        runtime.reset()
        yield counter


def test_new_job_is_stored_whole_and_queued(aws):
    raw = (
        b'{"event":"job.completed","job_id":"job_new","status":"OK",'
        b'"payload":{"artifacts":[]},"future_field":[1,{"x":null}]}'
    )
    status, body = call(apigw_event(raw, signed_headers(raw)))
    assert (status, body) == (200, {"result": "new", "job_id": "job_new"})
    stored = item(aws, "job_new")
    assert stored["body"]["S"] == raw.decode()  # exactly as received, unknown fields kept
    assert stored["state"]["S"] == "received"
    assert stored["source"]["S"] == "webhook"
    assert stored["event"]["S"] == "job.completed"
    assert stored["status"]["S"] == "OK"
    assert stored["deliveries"]["N"] == "1"
    assert {"first_seen", "received_at", "due_shard", "due_at"} <= stored.keys()
    assert queued(aws) == ["job_new"]


@pytest.mark.parametrize("event", ["job.failed", "job.canceled"])
def test_failed_and_canceled_are_jobs_too(aws, event):
    status, body = call(delivery_event(job_body("job_err", event=event)))
    assert (status, body["result"]) == (200, "new")
    assert item(aws, "job_err")["status"]["S"] == "ERROR"


def test_base64_body_is_decoded_before_verification(aws):
    raw = json.dumps(job_body("job_b64", note="café ✓")).encode()
    status, body = call(apigw_event(raw, signed_headers(raw), base64_encoded=True))
    assert (status, body["result"]) == (200, "new")
    assert item(aws, "job_b64")["body"]["S"] == raw.decode()


def test_unicode_body_and_trailing_newline_verify_on_raw_bytes(aws):
    raw = '{"event":"job.failed","job_id":"job_ü","status":"ERROR","error":{"message":"café ✓"}}\n'
    status, body = call(apigw_event(raw.encode(), signed_headers(raw.encode())))
    assert (status, body) == (200, {"result": "new", "job_id": "job_ü"})
    assert item(aws, "job_ü")["body"]["S"] == raw


def test_rotation_header_and_eleventh_entry(aws):
    raw = raw_of(job_body("job_rot"))
    headers = signed_headers(raw, secrets=["whsec_retired", SECRET])
    bogus = ",".join(f"{SCHEME}{i:064x}" for i in range(10))
    headers[SIGNATURE_HEADER] = f"{bogus} , {headers[SIGNATURE_HEADER]}"
    status, _ = call(apigw_event(raw, headers))
    assert status == 200


@pytest.mark.parametrize(("skew", "expected"), [(-290, 200), (290, 200), (-310, 401), (310, 401)])
def test_timestamp_window(aws, skew, expected):
    raw = raw_of(job_body())
    status, _ = call(apigw_event(raw, signed_headers(raw, timestamp=int(time.time()) + skew)))
    assert status == expected


def test_duplicate_counts_and_never_overwrites(aws):
    first = job_body("job_dup", note="first")
    call(delivery_event(first))
    for _ in range(3):
        status, body = call(delivery_event(job_body("job_dup", note="redelivered")))
        assert (status, body["result"]) == (200, "duplicate")
    stored = item(aws, "job_dup")
    assert json.loads(stored["body"]["S"])["note"] == "first"
    assert stored["deliveries"]["N"] == "4"
    assert "last_delivery_at" in stored
    assert "conflicts" not in stored
    assert queued(aws) == ["job_dup"]


def retry_the_landed_write(attempts: int, response: Any, **_: Any) -> float | None:
    # As when the answer to a write that landed is lost: botocore retries it.
    return 0 if attempts == 1 and response is not None else None


def test_a_retried_write_that_had_landed_is_still_a_new_job(aws):
    with hooking_new_clients(
        lambda client: client.meta.events.register(
            "needs-retry.dynamodb.UpdateItem", retry_the_landed_write
        )
    ):
        runtime.reset()
        status, body = call(delivery_event(job_body("job_landed")))
    runtime.reset()
    # Its retry met its own write: new, and queued now rather than at the sweep.
    assert (status, body["result"]) == (200, "new")
    assert queued(aws) == ["job_landed"]
    stored = item(aws, "job_landed")
    assert stored["deliveries"]["N"] == "1"
    # Another delivery is a duplicate as ever.
    assert call(delivery_event(job_body("job_landed")))[1]["result"] == "duplicate"


def test_a_retried_count_that_had_landed_counts_the_delivery_once(aws):
    call(delivery_event(job_body("job_counted")))
    with hooking_new_clients(
        lambda client: client.meta.events.register(
            "needs-retry.dynamodb.UpdateItem", retry_the_landed_write
        )
    ):
        runtime.reset()
        status, body = call(delivery_event(job_body("job_counted")))
    runtime.reset()
    # The count's answer was lost and botocore sent it again: one delivery, counted once.
    assert (status, body["result"]) == (200, "duplicate")
    assert item(aws, "job_counted")["deliveries"]["N"] == "2"
    assert call(delivery_event(job_body("job_counted")))[1]["result"] == "duplicate"
    assert item(aws, "job_counted")["deliveries"]["N"] == "3"


def ring(names, job_id):
    return [slot["S"] for slot in item(names, job_id)["delivery_ids"]["L"]]


def test_a_resent_count_is_counted_once_though_other_deliveries_counted_first(aws):
    body = job_body("job_interleaved")
    call(delivery_event(body))
    event = parse(raw_of(body))
    assert isinstance(event, JobEvent)
    # Twins of the delivery, counted on clients of their own (made before the hook).
    plain = {service: boto3.client(service) for service in ("dynamodb", "sqs", "s3")}
    twins = build_intake(ReceiverSettings.from_env(), lambda service, patient=False: plain[service])
    newer = RECENT_DELIVERIES - 1
    interleaved: list[Outcome] = []

    def twins_count_before_the_resend(attempts: int, response: Any, request_dict: Any, **_: Any):
        # The count landed and its answer is lost; while botocore waits to send it
        # again, other deliveries of the job are counted (a storm, a busy server).
        update = json.loads(request_dict["body"]).get("UpdateExpression", "")
        if attempts == 1 and response is not None and "ADD deliveries" in update:
            now = int(time.time())
            interleaved.extend(
                twins.accept(event, Source.WEBHOOK, now).outcome for n in range(newer)
            )
            return 0
        return None

    with hooking_new_clients(
        lambda client: client.meta.events.register(
            "needs-retry.dynamodb.UpdateItem", twins_count_before_the_resend
        )
    ):
        runtime.reset()
        status, answer = call(delivery_event(body))
    runtime.reset()
    assert (status, answer["result"]) == (200, "duplicate")
    assert interleaved == [Outcome.DUPLICATE] * newer
    # The resend met its own count, the oldest in the ring under the newer ones.
    assert item(aws, "job_interleaved")["deliveries"]["N"] == str(2 + newer)
    counted = ring(aws, "job_interleaved")
    assert len(set(counted)) == RECENT_DELIVERIES and "" not in counted


def test_the_ring_of_counted_deliveries_keeps_the_latest_ones_only(aws):
    body = job_body("job_many")
    call(delivery_event(body))
    event = parse(raw_of(body))
    assert isinstance(event, JobEvent)
    intake = build_intake(ReceiverSettings.from_env())
    rings = []
    for _ in range(RECENT_DELIVERIES + 4):
        intake.accept(event, Source.WEBHOOK, int(time.time()))
        rings.append(ring(aws, "job_many"))
    # Each count shifts its id in at the front and, once full, the oldest out.
    assert rings[0][1:] == [""] * (RECENT_DELIVERIES - 1)
    for before, after in itertools.pairwise(rings):
        assert after[1:] == before[:-1] and after[0] not in before
    assert item(aws, "job_many")["deliveries"]["N"] == str(RECENT_DELIVERIES + 5)


def test_the_first_counts_of_a_job_racing_each_other_both_count(aws):
    call(delivery_event(job_body("job_race")))
    jobs = build_jobs(ReceiverSettings.from_env().table, boto3.client("dynamodb"))
    # Both refused records showed no ring: the second count's fresh ring is
    # refused, and it shifts itself into the first one's instead.
    jobs.count_delivery("job_race", int(time.time()), conflict=False, seen=None)
    jobs.count_delivery("job_race", int(time.time()), conflict=True, seen=None)
    stored = item(aws, "job_race")
    assert (stored["deliveries"]["N"], stored["conflicts"]["N"]) == ("3", "1")
    assert ring(aws, "job_race")[2:] == [""] * (RECENT_DELIVERIES - 2)
    assert "" not in ring(aws, "job_race")[:2]


@pytest.mark.parametrize(
    "earlier",
    [
        {"delivery_id": {"S": "0" * 32}},  # counted before the ring existed
        {"delivery_ids": {"L": [{"S": "0" * 32}] * 4}},  # a ring of another size
    ],
)
def test_a_count_on_an_item_without_a_fitting_ring_starts_a_fresh_one(aws, earlier):
    body = job_body("job_earlier")
    call(delivery_event(body))
    boto3.client("dynamodb").update_item(
        TableName=aws.table,
        Key={"job_id": {"S": "job_earlier"}},
        UpdateExpression=f"SET {', '.join(f'{name} = :{name}' for name in earlier)}",
        ExpressionAttributeValues={f":{name}": value for name, value in earlier.items()},
    )
    assert call(delivery_event(body))[1]["result"] == "duplicate"
    assert call(delivery_event(body))[1]["result"] == "duplicate"
    stored = item(aws, "job_earlier")
    assert "delivery_id" not in stored
    assert stored["deliveries"]["N"] == "3"
    counted = ring(aws, "job_earlier")
    assert len(counted) == RECENT_DELIVERIES and counted[2:] == [""] * (RECENT_DELIVERIES - 2)


def test_conflicting_duplicate_is_kept_out_and_counted(aws):
    call(delivery_event(job_body("job_cf", event="job.completed")))
    status, body = call(delivery_event(job_body("job_cf", event="job.failed")))
    assert (status, body["result"]) == (200, "conflict")
    stored = item(aws, "job_cf")
    assert stored["event"]["S"] == "job.completed"
    assert stored["conflicts"]["N"] == "1"


def test_large_event_goes_to_s3_and_item_points_to_it(aws):
    body = job_body("job_big", blob="x" * 300_000)
    status, _ = call(delivery_event(body))
    assert status == 200
    stored = item(aws, "job_big")
    assert "body" not in stored
    ref = stored["body_ref"]["S"]
    bucket, _, key = ref.removeprefix("s3://").partition("/")
    assert bucket == aws.payloads_bucket
    data = boto3.client("s3").get_object(Bucket=bucket, Key=key)["Body"].read()
    assert data == raw_of(body)


def test_a_huge_status_is_stored_bounded_and_the_body_kept_whole(aws):
    body = job_body("job_loud", event="job.failed", status="E" * 600_000)
    assert call(delivery_event(body)) == (200, {"result": "new", "job_id": "job_loud"})
    stored = item(aws, "job_loud")
    assert stored["status"]["S"] == "E" * MAX_STATUS_BYTES
    bucket, _, key = stored["body_ref"]["S"].removeprefix("s3://").partition("/")
    kept = boto3.client("s3").get_object(Bucket=bucket, Key=key)["Body"].read()
    assert json.loads(kept)["status"] == body["status"]


def test_dynamodb_failure_is_503_and_nothing_queued(aws):
    boto3.client("dynamodb").delete_table(TableName=aws.table)
    status, body = call(delivery_event(job_body("job_503")))
    assert (status, body) == (503, {"error": "storage_unavailable"})
    assert queued(aws) == []


def test_crash_gap_sqs_down_then_retry_after_grace(aws):
    """SQS fails after the write: 503, the item says work is owed, Sume's retry enqueues."""
    sqs = boto3.client("sqs")
    attributes = sqs.get_queue_attributes(QueueUrl=aws.queue_url, AttributeNames=["All"])
    sqs.delete_queue(QueueUrl=aws.queue_url)

    body = job_body("job_gap")
    status, _ = call(delivery_event(body))
    assert status == 503
    stored = item(aws, "job_gap")
    assert stored["state"]["S"] == "received"  # owed, and visible to the sweeper
    assert {"due_shard", "due_at"} <= stored.keys()
    first = int(stored["received_at"]["N"])

    sqs.create_queue(
        QueueName=aws.queue_url.rsplit("/", 1)[1],
        Attributes={"RedrivePolicy": attributes["Attributes"]["RedrivePolicy"]},
    )
    # Sume's retries, at chosen times: the handler's clock is the wall clock,
    # so the rest goes through the same intake with an explicit "now".
    intake = build_intake(ReceiverSettings.from_env())
    event = parse(raw_of(body))
    assert isinstance(event, JobEvent)
    soon = intake.accept(event, Source.WEBHOOK, first + 5)  # twin of a fresh delivery
    assert (soon.outcome, soon.enqueued) == (Outcome.DUPLICATE, False)
    assert queued(aws) == []

    later = intake.accept(event, Source.WEBHOOK, first + 16)  # past the 15 s grace
    assert (later.outcome, later.enqueued) == (Outcome.DUPLICATE, True)
    assert queued(aws) == ["job_gap"]
    assert item(aws, "job_gap")["deliveries"]["N"] == "3"


def test_secret_from_secrets_manager_with_rotation_list(aws, monkeypatch):
    arn = boto3.client("secretsmanager").create_secret(
        Name="sume-signing", SecretString=json.dumps(["whsec_next", SECRET])
    )["ARN"]
    monkeypatch.delenv("SUME_COM_WEBHOOK_SIGNING_SECRET")
    monkeypatch.setenv("SIGNING_SECRET_ARN", arn)
    runtime.reset()
    raw = raw_of(job_body("job_sm"))
    assert call(apigw_event(raw, signed_headers(raw, secrets=["whsec_next"])))[0] == 200
    raw = raw_of(job_body("job_sm2"))
    assert call(apigw_event(raw, signed_headers(raw)))[0] == 200


def use_secrets_manager_value(monkeypatch, value: str) -> None:
    arn = boto3.client("secretsmanager").create_secret(Name="sume-signing", SecretString=value)[
        "ARN"
    ]
    monkeypatch.delenv("SUME_COM_WEBHOOK_SIGNING_SECRET")
    monkeypatch.setenv("SIGNING_SECRET_ARN", arn)
    runtime.reset()


@pytest.mark.parametrize(
    ("name", "value"),
    [("SIGNATURE_TOLERANCE_SECONDS", "0"), ("MAX_BODY_BYTES", "0"), ("DUE_SHARDS", "1001")],
)
def test_a_setting_out_of_its_range_is_a_500_configuration_error(aws, monkeypatch, name, value):
    monkeypatch.setenv(name, value)
    runtime.reset()
    raw = raw_of(job_body("job_range"))
    assert call(apigw_event(raw, signed_headers(raw))) == (500, {"error": "configuration_error"})
    assert item(aws, "job_range") is None


@pytest.mark.parametrize(
    "value", [" ", json.dumps({"key": SECRET}), "12345", json.dumps([SECRET, 7])]
)
def test_a_misconfigured_secret_is_a_500_logged_and_counted_never_a_401(
    aws, monkeypatch, capsys, caplog, value
):
    # Sume retries a 5xx (a 401 ten times over would lose the job's webhook)
    # while ops fix the secret; the signature itself is fine.
    use_secrets_manager_value(monkeypatch, value)
    raw = raw_of(job_body("job_cfg"))
    headers = signed_headers(raw)
    assert call(apigw_event(raw, headers)) == (500, {"error": "configuration_error"})
    assert item(aws, "job_cfg") is None
    assert queued(aws) == []

    (error,) = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert error.getMessage() == "receiver misconfigured"
    assert "signing secret" in error.reason
    logged = json.dumps([vars(r) for r in caplog.records], default=str)
    assert SECRET not in logged
    assert headers[SIGNATURE_HEADER].removeprefix(SCHEME) not in logged
    assert "job_cfg" not in logged
    lines = capsys.readouterr().out.splitlines()
    (emitted,) = [json.loads(line) for line in lines if "_aws" in line]
    assert emitted["ConfigurationErrors"] == [1.0]
    assert "SignatureRejections" not in emitted


def test_unreadable_secret_is_503(aws, monkeypatch):
    monkeypatch.delenv("SUME_COM_WEBHOOK_SIGNING_SECRET")
    monkeypatch.setenv(
        "SIGNING_SECRET_ARN", "arn:aws:secretsmanager:us-east-1:123456789012:secret:missing-AbCdEf"
    )
    runtime.reset()
    assert call(delivery_event(job_body())) == (503, {"error": "storage_unavailable"})


def test_aws_calls_per_delivery(aws, aws_calls):
    body = job_body("job_calls")
    call(delivery_event(body))
    assert aws_calls.take() == ["dynamodb.UpdateItem", "sqs.SendMessage"]

    call(delivery_event(body))
    assert aws_calls.take() == ["dynamodb.UpdateItem"] * 2  # failed write + counter

    raw = raw_of(body)
    call(apigw_event(raw, signed_headers(raw, secrets=["forged"])))
    call(apigw_event(raw, signed_headers(raw, timestamp=1)))
    call(delivery_event({"event": "webhook.test", "request_id": "r"}))
    assert aws_calls.calls == []


def test_duplicate_of_owed_job_costs_three_calls(aws, aws_calls, monkeypatch):
    monkeypatch.setenv("REDELIVER_GRACE_SECONDS", "0")
    runtime.reset()
    body = job_body("job_owed")
    call(delivery_event(body))
    aws_calls.take()
    call(delivery_event(body))
    assert aws_calls.take() == ["dynamodb.UpdateItem", "dynamodb.UpdateItem", "sqs.SendMessage"]


def test_only_what_sume_signed_counts_as_a_verified_delivery(aws, capsys):
    # DeliverySilence pages on no VerifiedDeliveries while jobs await;
    # PollRecoveryShare weighs NewJobs against the poller's recoveries.
    runtime.reset()
    body = job_body("job_verified")
    assert call(delivery_event(body)) == (200, {"result": "new", "job_id": "job_verified"})
    assert call(delivery_event(body)) == (200, {"result": "duplicate", "job_id": "job_verified"})
    raw = raw_of(job_body("job_forged"))
    status, _ = call(apigw_event(raw, signed_headers(raw, secrets=("whsec_not_sumes",))))
    assert status == 401

    lines = capsys.readouterr().out.splitlines()
    new, duplicate, forged = [json.loads(line) for line in lines if "_aws" in line]
    assert (new["VerifiedDeliveries"], new["NewJobs"]) == ([1.0], [1.0])
    assert (duplicate["VerifiedDeliveries"], "NewJobs" in duplicate) == ([1.0], False)
    assert "VerifiedDeliveries" not in forged
    assert forged["Deliveries"] == [1.0]
