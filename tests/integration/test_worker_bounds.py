"""Outside data the worker writes down: bounded, redacted, and every job still ends once.

moto enforces neither DynamoDB's 32 nesting levels nor EventBridge's 256 KB
entries, so these tests measure what was written themselves: the stored item
(size, depth, UTF-8) and every PutEvents entry as the worker sent it.
"""

import json
import time
from typing import Any

import boto3
import botocore.session
import pytest
from botocore.exceptions import ClientError
from moto.dynamodb.models.dynamo_type import LimitedSizeDict

from sume.core import runtime
from sume.core.names import DETAIL_TYPES
from sume.net.errors import TransientFetchError
from sume.working import compose as worker_compose
from sume.working.compose import build_worker
from sume.working.settings import WorkerSettings
from tests.builders import job_body
from tests.consumers import assert_consumers_agree
from tests.integration.test_worker import World, deliver, run

ITEM_LIMIT = 400 * 1024
ENTRY_LIMIT = 1_000_000
NESTING_LIMIT = 32
SECRET = "X-Amz-Signature=5ecre7"


@pytest.fixture
def put_events(aws, monkeypatch):
    """The Entries of every PutEvents call, as the worker sent them (one list per call)."""
    calls = []
    original = botocore.session.Session.create_client

    def create_client(self, *args, **kwargs):
        client = original(self, *args, **kwargs)
        client.meta.events.register(
            "provide-client-params.events.PutEvents",
            lambda params, **_: calls.append(params["Entries"]),
        )
        return client

    monkeypatch.setattr(botocore.session.Session, "create_client", create_client)
    runtime.reset()  # the worker's clients are made anew, with the hook
    return calls


@pytest.fixture
def world(aws, put_events):
    world = World(aws)
    yield world
    assert_consumers_agree(world.announcements(), world.item)


def item_bytes(item):
    """An upper bound of DynamoDB's size of the item: its JSON text as UTF-8.

    JSON spends more than DynamoDB on every name and string (quotes, escapes);
    it raises, as DynamoDB refuses, on text that is not valid UTF-8.
    """
    return len(json.dumps(item, ensure_ascii=False).encode("utf-8"))


def depth(value):
    """Nesting levels of maps and lists, counted as DynamoDB does (a top-level map is 1)."""
    if isinstance(value, dict):
        return 1 + max((depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((depth(v) for v in value), default=0)
    return 0


def entry_bytes(entry):
    """EventBridge's size of a PutEvents entry: Time (14) + Source + DetailType + Detail."""
    texts = [entry["Source"], entry["DetailType"], entry["Detail"], *entry.get("Resources", [])]
    return 14 + sum(len(text.encode("utf-8")) for text in texts)


def assert_writable(item, put_events):
    assert item_bytes(item) < ITEM_LIMIT
    assert max(depth(v) for v in item.values()) <= NESTING_LIMIT
    for entries in put_events:
        for entry in entries:
            assert entry_bytes(entry) < ENTRY_LIMIT


def nested(levels):
    error: dict[str, Any] = {"code": "DEEP"}
    for _ in range(levels):
        error = {"cause": error}
    return error


ODD_ERRORS: dict[str, Any] = {
    "decimal": {"code": "TIMEOUT", "message": "render timed out", "elapsed_s": 12.5},
    "nested_40_levels": nested(40),
    "200_kb": {"code": "HUGE", "message": "m" * 200_000},
    "lone_surrogate": {"code": "BAD\ud800", "message": "half a pair: \udc00"},
}


@pytest.mark.parametrize("error", ODD_ERRORS.values(), ids=ODD_ERRORS.keys())
def test_a_failed_job_with_any_error_ends_announced_once(world, put_events, error):
    # json.dumps escapes the lone surrogates, as a sender's JSON encoder would.
    job_id = deliver(job_body(event="job.failed", error=error))

    for _ in range(5):  # the first run and four redeliveries or sweeps
        assert run(job_id)[1] == []

    stored = world.item(job_id)
    assert (stored.state, stored.outcome) == ("processed", "failed")
    assert len(put_events) == 1
    assert_writable(stored.as_item(), put_events)
    (event,) = world.announcements()
    assert event["detail-type"] == DETAIL_TYPES["failed"]
    assert isinstance(stored.error, str) and stored.error.isascii()


def test_an_exact_error_is_kept_whole_on_the_item_and_in_the_announcement(world):
    error = ODD_ERRORS["decimal"]
    job_id = deliver(job_body(event="job.failed", error=error))

    assert run(job_id)[1] == []

    stored = world.item(job_id)
    assert json.loads(stored.error) == error
    assert stored.error_truncated is None
    (event,) = world.announcements()
    assert event["detail"]["error"] == error
    assert event["detail"]["error_truncated"] is False


def test_an_oversized_error_is_cut_by_the_documented_rule(world):
    job_id = deliver(job_body(event="job.failed", error=ODD_ERRORS["200_kb"]))

    assert run(job_id)[1] == []

    stored = world.item(job_id)
    assert stored.error_truncated is True
    assert len(stored.error) == 16 * 1024
    assert stored.error.startswith('{"code":"HUGE","message":"mmm')
    (event,) = world.announcements()
    assert event["detail"]["error_truncated"] is True
    assert event["detail"]["error"] == {"code": "HUGE", "message": "m" * 1024}


@pytest.mark.parametrize("error", ODD_ERRORS.values(), ids=ODD_ERRORS.keys())
def test_giving_up_writes_only_codes_and_counts(world, put_events, monkeypatch, error):
    monkeypatch.setenv("MAX_ATTEMPTS", "2")
    job_id = deliver(job_body(event="job.failed", error=error))
    now = int(time.time())
    # Two earlier attempts, each ended by a transient failure that named a presigned URL.
    for attempt in range(2):
        item = world.table.claim(job_id, now + attempt * 1000, lease_seconds=900)
        url = f"https://cdn.example/a.mp4?{SECRET}"
        failure = {"code": "http_503", "message": f"HTTP 503 from {url}", "url": url}
        assert world.table.release(
            job_id, item.claim_id, now + attempt * 1000, failure, due_at=now + 3000
        )
    later = now + 5000

    result = build_worker(WorkerSettings.from_env(), clock=lambda: later).process(job_id)

    assert result.reason == "too_many_attempts"
    stored = world.item(job_id)
    assert stored.state == "processing_error"
    assert stored.processing_error == {
        "code": "too_many_attempts",
        "message": "gave up after 2 attempts; last error: http_503",
    }
    assert stored.error is None
    assert len(put_events) == 1
    assert_writable(stored.as_item(), put_events)
    (event,) = world.announcements()
    assert event["detail-type"] == DETAIL_TYPES["processing_error"]
    assert (event["detail"]["outcome"], event["detail"]["error"]) == ("failed", None)


@pytest.fixture
def replacing_counts_once(monkeypatch):
    """moto checks an item's size before an update replaces an attribute, counting
    its old value and its new one; DynamoDB counts the item as it will be."""
    original = LimitedSizeDict.__setitem__

    def setitem(self, key, value):
        old = self.pop(key, None)
        try:
            original(self, key, value)
        except Exception:
            if old is not None:
                dict.__setitem__(self, key, old)
            raise

    monkeypatch.setattr(LimitedSizeDict, "__setitem__", setitem)


def long_path(i):
    return f"/{i:03d}/" + "p" * 1800 + ".mp4"


def test_an_artifact_list_past_the_item_is_cut_there_and_announced_whole(
    world, put_events, server, local_urls, replacing_counts_once
):
    urls = [server.route(long_path(i), body=bytes([i])) for i in range(130)]
    job_id = deliver(job_body(artifacts=urls))

    assert run(job_id)[1] == []

    stored = world.item(job_id)
    assert stored.state == "processed"
    assert len(world.objects(job_id)) == 130
    assert len(put_events) == 1
    assert_writable(stored.as_item(), put_events)
    assert stored.artifact_count == 130
    assert stored.artifacts_truncated is True
    on_item = stored.artifacts
    assert [r["source_url"] for r in on_item] == urls[: len(on_item)]
    (event,) = world.announcements()
    detail = event["detail"]
    # EventBridge takes 1 MB: the announcement lists every artifact the item could not.
    assert (detail["artifact_count"], detail["artifacts_truncated"]) == (130, False)
    announced = detail["artifacts"]
    assert len(on_item) < len(announced) == 130
    assert [a["source_url"] for a in announced] == urls[: len(announced)]
    bucket = world.names.artifacts_bucket
    assert event["resources"] == [f"arn:aws:s3:::{bucket}/{a['key']}" for a in announced]


def test_presigned_artifact_urls_never_show_their_query(world, put_events, server, local_urls):
    ok = server.route(f"/ok.mp4?{SECRET}", body=b"fine")
    gone = server.route(f"/gone.mp4?{SECRET}", status=404)
    job_id = deliver(job_body(artifacts=[ok, gone]))

    assert run(job_id)[1] == []

    stored = world.item(job_id)
    assert stored.state == "processing_error"
    assert stored.processing_error == {
        "code": "http_404",
        "message": f"HTTP 404 from {server.url('/gone.mp4')}",
        "url": server.url("/gone.mp4"),
    }
    (record,) = stored.artifacts
    assert record["source_url"] == server.url("/ok.mp4")
    written = {k: v for k, v in stored.as_item().items() if k != "body"}  # the event, as received
    assert "5ecre7" not in json.dumps(written)
    assert "5ecre7" not in json.dumps(world.announcements())


def test_a_retry_reuses_an_artifact_stored_from_a_presigned_url(world, server, local_urls):
    ok = server.route(f"/once.mp4?{SECRET}", body=b"once")
    flaky = server.route(f"/flaky.mp4?{SECRET}", status=503)
    job_id = deliver(job_body(artifacts=[ok, flaky]))

    ids, failed = run(job_id)

    assert failed == ids
    stored = world.item(job_id)
    assert "5ecre7" not in json.dumps(stored.last_error)
    assert stored.last_error["url"] == server.url("/flaky.mp4")
    server.route(f"/flaky.mp4?{SECRET}", body=b"now")
    assert run(job_id)[1] == []
    assert server.hits[f"/once.mp4?{SECRET}"] == 1
    assert world.item(job_id).state == "processed"


class RefusingDynamoDB:
    """DynamoDB that answers ValidationException to the first write matching ``refuse``."""

    def __init__(self, client, refuse):
        self._client = client
        self._refuse = refuse
        self.refused = 0

    def update_item(self, **request):
        if not self.refused and self._refuse(request["UpdateExpression"]):
            self.refused += 1
            error = {"Code": "ValidationException", "Message": "Item size has exceeded the maximum"}
            raise ClientError({"Error": error}, "UpdateItem")
        return self._client.update_item(**request)

    def __getattr__(self, name):
        return getattr(self._client, name)


def processor_with(refuse):
    dynamodb = RefusingDynamoDB(boto3.client("dynamodb"), refuse)

    def clients(service, patient=False):
        return dynamodb if service == "dynamodb" else boto3.client(service)

    return build_worker(WorkerSettings.from_env(), clients), dynamodb


def test_a_refused_finish_falls_back_to_a_minimal_one(world, put_events, monkeypatch):
    job_id = deliver(job_body(event="job.failed"))
    processor, dynamodb = processor_with(lambda update: "processed_at" in update)
    monkeypatch.setattr(worker_compose, "worker_service", lambda: processor)

    assert run(job_id)[1] == []
    assert run(job_id)[1] == []

    assert dynamodb.refused == 1
    stored = world.item(job_id)
    assert (stored.state, stored.outcome) == ("processed", "failed")
    assert stored.details_dropped is True
    assert stored.error is None
    assert stored.due_at is None
    assert len(put_events) == 1
    assert world.announcements()[0]["detail"]["outcome"] == "failed"


def test_a_refused_progress_write_is_a_processing_error(
    world, put_events, server, local_urls, monkeypatch
):
    job_id = deliver(job_body(artifacts=[server.route("/p.mp4", body=b"p")]))
    processor, _ = processor_with(lambda update: ":artifacts" in update)
    monkeypatch.setattr(worker_compose, "worker_service", lambda: processor)

    assert run(job_id)[1] == []
    assert run(job_id)[1] == []

    stored = world.item(job_id)
    assert stored.state == "processing_error"
    assert stored.processing_error["code"] == "write_refused"
    assert server.hits["/p.mp4"] == 1
    assert len(put_events) == 1


def test_a_refused_release_gives_the_claim_back_with_the_code_alone(world, server, local_urls):
    job_id = deliver(job_body(artifacts=[server.route("/down.mp4", status=503)]))
    processor, dynamodb = processor_with(lambda update: "last_error" in update)

    with pytest.raises(TransientFetchError):
        processor.process(job_id)

    assert dynamodb.refused == 1
    stored = world.item(job_id)
    assert stored.last_error == {"code": "http_503"}
    assert stored.lease_until < time.time()  # the retry need not wait out the lease
