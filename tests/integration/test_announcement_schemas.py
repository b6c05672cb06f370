"""Every announcement the worker emits, in every outcome, against the published schemas.

Jobs go through the real receiver and worker on moto; the announcements are
read as a subscriber gets them (a rule on the bus with a queue target), so
the envelope EventBridge adds is validated too.
"""

import time

import boto3
import pytest
from jsonschema import Draft4Validator

from infra.schemas.files import bundled, file_name
from infra.spec import SCHEMAS_DIR
from sume.core.names import DETAIL_TYPES
from sume.working.compose import build_worker
from sume.working.settings import WorkerSettings
from tests.builders import job_body
from tests.integration.test_worker import World, deliver, run
from tests.integration.test_worker_bounds import (  # noqa: F401 - a fixture
    long_path,
    replacing_counts_once,
)


def validator(detail_type):
    schema = bundled(SCHEMAS_DIR / file_name(detail_type))
    return Draft4Validator(schema, format_checker=Draft4Validator.FORMAT_CHECKER)


def completed_with_artifacts(world, server):
    urls = [server.route(f"/a/{i}.mp4", body=bytes([i]) * 10) for i in range(3)]
    return deliver(job_body(artifacts=[urls[0], {"url": urls[1], "kind": "x"}, urls[2]]))


def completed_with_none(world, server):
    return deliver(job_body(artifacts=[]))


def failed(world, server):
    return deliver(job_body(event="job.failed"))


def canceled(world, server):
    return deliver(job_body(event="job.canceled", error=None))


def processing_error(world, server):
    ok = server.route("/ok.mp4", body=b"ok")
    return deliver(job_body(artifacts=[ok, server.route("/gone.mp4", status=404)]))


def unreadable_event(world, server):
    job_id = deliver(job_body())
    boto3.client("dynamodb").update_item(
        TableName=world.names.table,
        Key={"job_id": {"S": job_id}},
        UpdateExpression="SET body = :b",
        ExpressionAttributeValues={":b": {"S": "not json"}},
    )
    return job_id


def truncated_error(world, server):
    return deliver(job_body(event="job.failed", error={"code": "HUGE", "message": "m" * 200_000}))


def truncated_artifacts(world, server):
    urls = [server.route(long_path(i), body=bytes([i])) for i in range(130)]
    return deliver(job_body(artifacts=urls))


CASES = {
    "completed with artifacts": (completed_with_artifacts, "completed"),
    "completed with none": (completed_with_none, "completed"),
    "failed": (failed, "failed"),
    "canceled": (canceled, "canceled"),
    "processing error": (processing_error, "processing_error"),
    "unreadable stored event": (unreadable_event, "processing_error"),
    "truncated error": (truncated_error, "failed"),
    "truncated artifacts": (truncated_artifacts, "completed"),
}


@pytest.mark.usefixtures("replacing_counts_once")
@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_each_outcome_is_announced_as_its_schema_says(aws, server, local_urls, case):
    world = World(aws)
    make, result = case
    job_id = make(world, server)

    assert run(job_id)[1] == []

    (event,) = world.announcements()
    assert (event["detail-type"], event["detail"]["job_id"]) == (DETAIL_TYPES[result], job_id)
    validator(event["detail-type"]).validate(event)


def test_giving_up_is_announced_as_its_schema_says(aws, monkeypatch):
    world = World(aws)
    monkeypatch.setenv("MAX_ATTEMPTS", "1")
    job_id = deliver(job_body(event="job.failed"))
    now = int(time.time())
    claimed = world.table.claim(job_id, now, lease_seconds=900)
    failure = {"code": "http_503", "message": "m"}
    assert world.table.release(job_id, str(claimed.claim_id), now, failure, due_at=now)

    later = now + 1000
    result = build_worker(WorkerSettings.from_env(), clock=lambda: later).process(job_id)

    assert result.reason == "too_many_attempts"
    (event,) = world.announcements()
    assert event["detail"]["processing_error"]["code"] == "too_many_attempts"
    validator(event["detail-type"]).validate(event)


def test_a_replay_is_announced_as_its_schema_says(aws, server, local_urls):
    world = World(aws)
    job_id = deliver(job_body(artifacts=[server.route("/r.mp4", body=b"r")]))
    assert run(job_id)[1] == []
    assert world.table.request_replay(job_id, int(time.time()), int(time.time()) + 120)

    assert run(job_id)[1] == []

    first, again = world.announcements()
    assert again["detail"]["replay"] is True
    # A replay is a new announcement of the job, not a copy of the first.
    assert (first["detail"]["sequence"], again["detail"]["sequence"]) == (1, 2)
    for event in (first, again):
        validator(event["detail-type"]).validate(event)


def test_the_schemas_refuse_what_no_announcement_may_carry(aws, server, local_urls):
    world = World(aws)
    job_id = completed_with_artifacts(world, server)
    assert run(job_id)[1] == []
    (event,) = world.announcements()
    check = validator(event["detail-type"])
    detail = event["detail"]

    wrong = [
        {**event, "detail-type": DETAIL_TYPES["failed"]},
        {**event, "resources": ["s3://bucket/key"]},
        {**event, "detail": {**detail, "outcome": "failed"}},
        {**event, "detail": {**detail, "error": {"code": "X"}}},
        {**event, "detail": {**detail, "processed_at": "2026-11-29 12:00"}},
        {**event, "detail": {**detail, "artifacts": [{**detail["artifacts"][0], "size": -1}]}},
        {**event, "detail": {k: v for k, v in detail.items() if k != "artifact_count"}},
    ]
    for candidate in wrong:
        assert not check.is_valid(candidate), candidate
