"""The worker on moto (DynamoDB, SQS, S3, EventBridge) with a loopback artifact server.

Jobs enter through the real receiver, so the items are exactly what
production writes. Announcements are captured the way a subscriber would get
them: an EventBridge rule on the bus with an SQS queue as its target.
"""

import gzip
import hashlib
import itertools
import json
import threading
import time

import boto3
import pytest
from botocore.exceptions import ClientError

import worker
from devstack import moto_atomic
from infra import spec
from sume.core import runtime
from sume.core.names import DETAIL_TYPES, DUE_SHARDS, report_bucket
from sume.net.errors import TransientFetchError
from sume.polling.compose import build_poller
from sume.polling.settings import PollerSettings
from sume.store.jobs import JobsTable
from sume.working.compose import build_worker
from sume.working.errors import JobBusy, OutOfTime
from sume.working.results import Action
from sume.working.settings import WorkerSettings
from tests.awscalls import hooking_new_clients
from tests.builders import LambdaContext, job_body, sqs_event
from tests.consumers import assert_consumers_agree
from tests.integration.conftest import CONFORMANCE
from tests.integration.world import Subscriber, deliver

pytestmark = CONFORMANCE

MP4 = {"content-type": "video/mp4"}


class World:
    """The test's view of the stack: one client per service (creating them is
    the slow part on moto) and the announcements a subscriber would receive,
    through an EventBridge rule on the bus with an SQS queue as its target."""

    def __init__(self, names):
        self.names = names
        self.s3 = boto3.client("s3")
        self.sqs = boto3.client("sqs")
        self.table = JobsTable(boto3.client("dynamodb"), names.table, 16)
        self.subscriber = Subscriber(self.sqs, boto3.client("events"), names.event_bus)

    def announcements(self):
        """Every announcement so far (read from the subscriber's queue)."""
        return self.subscriber.announcements()

    def item(self, job_id):
        return self.table.get(job_id)

    def objects(self, job_id):
        listing = self.s3.list_objects_v2(
            Bucket=self.names.artifacts_bucket, Prefix=f"jobs/{job_id}/"
        )
        return sorted(o["Key"] for o in listing.get("Contents", []))

    def bytes_at(self, key):
        return self.s3.get_object(Bucket=self.names.artifacts_bucket, Key=key)["Body"].read()


@pytest.fixture
def world(aws):
    world = World(aws)
    yield world
    assert_consumers_agree(world.announcements(), world.item)


def run(*job_ids, receives=1):
    event = sqs_event(job_ids, receive_count=receives)
    response = worker.handler(event, LambdaContext())
    ids = [r["messageId"] for r in event["Records"]]
    failed = [f["itemIdentifier"] for f in response["batchItemFailures"]]
    return ids, failed


def test_completed_job_is_archived_recorded_and_announced(world, server, local_urls):
    video = b"\x00video" * 50_000
    u1 = server.route("/r/clip.mp4", body=video, headers=MP4)
    u2 = server.route("/r/thumb.jpg", body=b"jpeg", headers={"content-type": "image/jpeg"})
    job_id = deliver(job_body(artifacts=[u1, {"url": u2, "kind": "thumbnail"}]))
    before = int(time.time())

    assert run(job_id)[1] == []

    stored = world.item(job_id)
    assert stored.state == "processed"
    assert stored.outcome == "completed"
    assert stored.expires_at >= before + 30 * 24 * 3600
    assert stored.processed_at >= before
    for key in ("due_at", "due_shard", "lease_until"):
        assert key not in stored.as_item()
    first, second = stored.artifacts
    assert first["source_url"] == u1
    assert first["key"] == f"jobs/{job_id}/000-clip.mp4"
    assert first["size"] == len(video)
    assert first["sha256"] == hashlib.sha256(video).hexdigest()
    assert first["content_type"] == "video/mp4"
    assert second["key"] == f"jobs/{job_id}/001-thumb.jpg"
    assert second["content_type"] == "image/jpeg"
    assert world.bytes_at(first["key"]) == video
    assert world.bytes_at(second["key"]) == b"jpeg"

    (event,) = world.announcements()
    assert event["source"] == "sume.webhooks"
    assert event["detail-type"] == "Sume Job Completed"
    detail = event["detail"]
    assert detail["job_id"] == job_id
    assert (detail["outcome"], detail["event"], detail["status"]) == (
        "completed",
        "job.completed",
        "OK",
    )
    assert detail["error"] is None and detail["processing_error"] is None
    assert detail["artifacts"][0] == {
        "bucket": world.names.artifacts_bucket,
        "key": first["key"],
        "uri": f"s3://{world.names.artifacts_bucket}/{first['key']}",
        "size": len(video),
        "sha256": first["sha256"],
        "content_type": "video/mp4",
        "source_url": u1,
    }
    assert detail["processed_at"].endswith("Z")
    # As AWS services do: the event names the objects it is about.
    bucket = world.names.artifacts_bucket
    assert event["resources"] == [
        f"arn:aws:s3:::{bucket}/{first['key']}",
        f"arn:aws:s3:::{bucket}/{second['key']}",
    ]


def test_failed_and_canceled_jobs_are_written_down_with_their_error(world):
    bodies = [job_body(event="job.failed"), job_body(event="job.canceled")]
    job_ids = [deliver(body) for body in bodies]
    # The receiver writes no key of the report index; the finish does.
    assert {world.item(job_id).report_bucket for job_id in job_ids} == {None}

    assert run(*job_ids)[1] == []

    announced = {e["detail"]["job_id"]: e for e in world.announcements()}
    for body, outcome in zip(bodies, ("failed", "canceled"), strict=True):
        stored = world.item(body["job_id"])
        assert stored.state == "processed"
        assert stored.outcome == outcome
        assert stored.first_seen is not None
        assert stored.report_at == stored.first_seen
        assert stored.report_bucket == report_bucket(stored.first_seen, stored.job_id)
        assert json.loads(stored.error) == body["error"]  # JSON text, see sume.core.bounded
        assert stored.artifacts == []
        event = announced[body["job_id"]]
        assert event["detail-type"] == DETAIL_TYPES[outcome]
        assert event["detail"]["status"] == "ERROR"
        assert event["detail"]["error"] == body["error"]


def test_missing_artifact_is_a_processing_error_announced_once_not_retried(
    world, server, local_urls
):
    ok = server.route("/ok.mp4", body=b"fine")
    gone = server.route("/gone.mp4", status=404)
    job_id = deliver(job_body(artifacts=[ok, gone]))

    assert run(job_id)[1] == []  # acknowledged: no loop to the DLQ

    stored = world.item(job_id)
    assert stored.state == "processing_error"
    assert stored.processing_error == {
        "code": "http_404",
        "message": f"HTTP 404 from {gone}",
        "url": gone,
    }
    assert [a["source_url"] for a in stored.artifacts] == [ok]
    assert stored.due_at is None
    (event,) = world.announcements()
    assert event["detail-type"] == DETAIL_TYPES["processing_error"]
    assert event["detail"]["processing_error"]["code"] == "http_404"
    assert event["detail"]["outcome"] == "completed"
    # A redelivery of the message changes nothing.
    assert run(job_id)[1] == []
    assert server.hits["/gone.mp4"] == 1
    assert world.announcements() == [event]


WHOLE = b"the origin's whole video, every byte of it"


@pytest.mark.parametrize(
    ("status", "headers", "body", "code"),
    [
        (206, {"content-range": f"bytes 0-9/{len(WHOLE)}"}, WHOLE[:10], "partial_content"),
        (200, {"content-range": f"bytes 0-9/{len(WHOLE)}"}, WHOLE[:10], "partial_content"),
        (200, {"content-encoding": "gzip"}, gzip.compress(WHOLE), "unsupported_encoding"),
        (200, {"content-length": "\u00b2"}, lambda: [WHOLE], "invalid_content_length"),
    ],
    ids=["206", "content-range", "gzip", "superscript-length"],
)
def test_an_answer_that_is_not_the_whole_object_is_never_stored_as_it(
    world, server, local_urls, status, headers, body, code
):
    ok = server.route("/ok.mp4", body=b"fine")
    url = server.route("/clip.mp4", status, {**MP4, **headers}, body)
    job_id = deliver(job_body(artifacts=[ok, url]))

    assert run(job_id)[1] == []  # a named error, not a crash retried to the DLQ

    stored = world.item(job_id)
    assert (stored.state, stored.attempts) == ("processing_error", 1)
    assert (stored.processing_error["code"], stored.processing_error["url"]) == (code, url)
    assert [a["source_url"] for a in stored.artifacts] == [ok]
    assert world.objects(job_id) == [f"jobs/{job_id}/000-ok.mp4"]
    assert server.requests[-1].headers["accept-encoding"] == "identity"
    assert "range" not in server.requests[-1].headers
    (event,) = world.announcements()
    assert event["detail-type"] == DETAIL_TYPES["processing_error"]
    assert event["detail"]["processing_error"]["code"] == code


def test_slow_artifact_times_out_and_is_retried_by_sqs(world, server, local_urls, monkeypatch):
    monkeypatch.setenv("HTTP_READ_TIMEOUT_SECONDS", "0.3")
    url = server.route("/slow.mp4", body=b"late", delay=5.0)
    job_id = deliver(job_body(artifacts=[url]))

    ids, failed = run(job_id)

    assert failed == ids
    stored = world.item(job_id)
    assert stored.state == "processing"
    assert stored.last_error["code"] == "timeout"
    assert stored.lease_until < time.time()  # released: the retry need not wait
    assert stored.due_at is not None  # still owed: the sweeper keeps watching it
    assert world.announcements() == []

    server.route("/slow.mp4", body=b"on time")
    assert run(job_id)[1] == []
    assert world.item(job_id).state == "processed"
    assert world.item(job_id).attempts == 2


def test_redirect_to_a_host_off_the_allow_list_is_refused(world, server, local_urls, monkeypatch):
    monkeypatch.setenv("ARTIFACT_ALLOWED_HOSTS", "127.0.0.1")
    server.route("/internal", body=b"secret")
    hop = server.redirect("/hop.mp4", server.url("/internal", host="localhost"))
    job_id = deliver(job_body(artifacts=[hop]))

    assert run(job_id)[1] == []

    stored = world.item(job_id)
    assert stored.state == "processing_error"
    assert stored.processing_error["code"] == "refused_host"
    assert stored.processing_error["url"] == hop
    assert server.hits["/internal"] == 0
    assert world.announcements()[0]["detail"]["processing_error"]["code"] == "refused_host"


def test_without_local_mode_loopback_artifacts_are_refused(world, server, monkeypatch):
    url = server.route("/a.mp4", body=b"a")
    https_only = deliver(job_body(artifacts=[url]))
    assert run(https_only)[1] == []
    assert world.item(https_only).processing_error["code"] == "refused_scheme"

    monkeypatch.setenv("ALLOW_HTTP_URLS", "true")
    runtime.reset()  # a new container, with the new setting
    public_only = deliver(job_body(artifacts=[url]))
    assert run(public_only)[1] == []
    assert world.item(public_only).processing_error["code"] == "refused_address"
    assert server.hits["/a.mp4"] == 0


def test_the_same_job_delivered_twice_is_processed_once(world, server, local_urls):
    urls = [server.route(f"/d/{i}.mp4", body=b"x" * 1000) for i in range(3)]
    job_id = deliver(job_body(artifacts=urls))

    assert run(job_id)[1] == []
    assert run(job_id)[1] == []

    assert len(world.objects(job_id)) == 3
    assert all(server.hits[f"/d/{i}.mp4"] == 1 for i in range(3))
    assert len(world.announcements()) == 1
    assert world.item(job_id).attempts == 1


def test_the_same_job_delivered_concurrently_is_processed_once(world, server, local_urls):
    moto_atomic.install()  # DynamoDB's per-item atomicity, which moto lacks by default
    # Slow enough that the second worker arrives while the first holds the lease.
    urls = [server.route(f"/c/{i}.mp4", body=b"y" * 1000, delay=0.2) for i in range(2)]
    job_id = deliver(job_body(artifacts=urls))
    workers = [build_worker(WorkerSettings.from_env()) for _ in range(2)]
    start = threading.Barrier(2)
    outcomes = []

    def work(processor):
        start.wait()
        try:
            outcomes.append(processor.process(job_id).action)
        except JobBusy:
            outcomes.append("busy")

    threads = [threading.Thread(target=work, args=(w,)) for w in workers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)

    assert sorted(outcomes) == sorted([Action.PROCESSED, "busy"])
    assert len(world.objects(job_id)) == 2
    assert all(server.hits[f"/c/{i}.mp4"] == 1 for i in range(2))
    assert len(world.announcements()) == 1
    # The busy worker's message comes back later and finds the job done.
    assert run(job_id)[1] == []
    assert len(world.announcements()) == 1


def test_a_poisoned_record_fails_alone(world, server, local_urls):
    good = [deliver(job_body(artifacts=[server.route(f"/g{i}.mp4", body=b"g")])) for i in (1, 2)]
    broken = deliver(job_body(artifacts=[server.route("/down.mp4", status=503)]))
    failed_job = deliver(job_body(event="job.failed"))

    ids, failed = run(good[0], broken, failed_job, good[1])

    assert failed == [ids[1]]
    assert [world.item(j).state for j in (*good, failed_job)] == ["processed"] * 3
    assert world.item(broken).last_error["code"] == "http_503"
    assert len(world.announcements()) == 3


class Crash(BaseException):
    """Stands for the process dying: nothing in the worker catches it."""


class CrashingS3:
    """S3 that dies on its n-th upload, like a Lambda killed mid-job."""

    def __init__(self, client, crash_on):
        self._client = client
        self._left = crash_on

    def put_object(self, **kwargs):
        self._left -= 1
        if self._left == 0:
            raise Crash
        return self._client.put_object(**kwargs)

    def __getattr__(self, name):
        return getattr(self._client, name)


def test_a_retry_after_a_crash_does_not_download_stored_artifacts_again(world, server, local_urls):
    urls = [server.route(f"/p/{i}.bin", body=bytes([i]) * 5000) for i in range(4)]
    job_id = deliver(job_body(artifacts=urls))
    settings = WorkerSettings.from_env()

    def clients(service, patient=False):
        real = boto3.client(service)
        return CrashingS3(real, crash_on=3) if service == "s3" else real

    with pytest.raises(Crash):
        build_worker(settings, clients).process(job_id)
    stored = world.item(job_id)
    assert stored.state == "processing"
    assert [a["source_url"] for a in stored.artifacts] == urls[:2]

    # The crashed worker's lease is still live: the queue's retry must wait.
    ids, failed = run(job_id)
    assert failed == ids

    later = time.time() + settings.lease_seconds + 60
    result = build_worker(settings, clock=lambda: later).process(job_id)

    assert result.action is Action.PROCESSED
    assert (result.artifacts_copied, len(result.artifacts)) == (2, 4)
    assert [server.hits[f"/p/{i}.bin"] for i in range(4)] == [1, 1, 2, 1]
    assert len(world.objects(job_id)) == 4
    for i, record in enumerate(world.item(job_id).artifacts):
        assert world.bytes_at(record["key"]) == bytes([i]) * 5000
    assert len(world.announcements()) == 1


def test_the_last_artifact_s_record_rides_on_the_settle(world, server, local_urls):
    urls = [server.route(f"/w/{i}.bin", body=bytes([i]) * 100) for i in range(3)]
    job_id = deliver(job_body(artifacts=urls))
    updates = []

    def clients(service, patient=False):
        client = boto3.client(service)
        if service == "dynamodb":
            client.meta.events.register(
                "before-parameter-build.dynamodb.UpdateItem",
                lambda params, **_: updates.append(params["UpdateExpression"]),
            )
        return client

    result = build_worker(WorkerSettings.from_env(), clients).process(job_id)

    assert result.action is Action.PROCESSED
    # Claim, a progress write between copies (not after the last), settle, finish.
    assert len(updates) == 5
    assert updates.count("SET artifacts = :artifacts") == 2
    assert [a["source_url"] for a in world.item(job_id).artifacts] == urls
    assert len(world.announcements()) == 1


def test_gives_up_after_max_attempts_with_an_announced_processing_error(
    world, server, local_urls, monkeypatch
):
    """Released claims are claimable again a second later; the clock stands in for waiting."""
    monkeypatch.setenv("MAX_ATTEMPTS", "2")
    job_id = deliver(job_body(artifacts=[server.route("/flaky.mp4", status=500)]))
    settings = WorkerSettings.from_env()
    now = time.time()

    def attempt(seconds_later):
        processor = build_worker(settings, clock=lambda: now + seconds_later)
        return processor.process(job_id)

    with pytest.raises(TransientFetchError):
        attempt(0)
    # The failing attempt that spends the budget gives up, rather than raising.
    result = attempt(2)

    assert result.action is Action.PROCESSING_ERROR
    stored = world.item(job_id)
    assert stored.state == "processing_error"
    assert stored.processing_error == {
        "code": "too_many_attempts",
        "message": "gave up after 2 attempts; last error: http_500",
    }
    assert server.hits["/flaky.mp4"] == 2
    (event,) = world.announcements()
    assert event["detail-type"] == DETAIL_TYPES["processing_error"]


def test_replay_copies_and_announces_again(world, server, local_urls):
    job_id = deliver(job_body(artifacts=[server.route("/r.mp4", body=b"r")]))
    assert run(job_id)[1] == []
    assert world.table.request_replay(job_id, int(time.time()), int(time.time()) + 120)

    assert run(job_id)[1] == []

    assert server.hits["/r.mp4"] == 2
    first, second = world.announcements()
    assert (first["detail"]["replay"], second["detail"]["replay"]) == (False, True)
    assert world.item(job_id).replay is None


def test_an_event_stored_in_s3_is_read_from_there(world, server, local_urls):
    body = job_body(artifacts=[server.route("/big-event.mp4", body=b"b")], notes="n" * 300_000)
    job_id = deliver(body)
    assert world.item(job_id).body_ref is not None

    assert run(job_id)[1] == []

    assert world.item(job_id).state == "processed"
    assert server.hits["/big-event.mp4"] == 1


def stored_body_replaced(world, job_id, raw):
    """The job's stored event as if something other than our intake had written it."""
    boto3.client("dynamodb").update_item(
        TableName=world.names.table,
        Key={"job_id": {"S": job_id}},
        UpdateExpression="SET body = :raw",
        ExpressionAttributeValues={":raw": {"S": raw}},
    )


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("{not json", "stored event is unusable: "),
        ("[" * 100_000 + "]" * 100_000, "stored event is unusable: "),
        ('["job.failed"]', "stored event is not a terminal job event"),
        (
            '{"event":"job.started","job_id":"job_unread"}',
            "stored event is not a terminal job event",
        ),
    ],
)
def test_a_stored_event_the_worker_cannot_read_is_an_announced_processing_error(
    world, raw, message
):
    job_id = deliver(job_body("job_unread", event="job.failed"))
    stored_body_replaced(world, job_id, raw)

    assert run(job_id)[1] == []  # acknowledged: a retry would read the same text

    stored = world.item(job_id)
    assert stored.state == "processing_error"
    assert stored.processing_error is not None
    assert stored.processing_error["code"] == "unreadable_event"
    assert stored.processing_error["message"].startswith(message)
    (event,) = world.announcements()
    assert event["detail-type"] == DETAIL_TYPES["processing_error"]
    assert (event["detail"]["job_id"], event["detail"]["event"]) == (job_id, "job.failed")


def test_the_stored_event_is_trusted_for_what_the_intake_checked(world):
    # The intake checked the job id before it stored the event; the worker
    # does not check the stored body's again (this one breaks the rule) and
    # works on the item's job.
    job_id = deliver(job_body("job_trusted", event="job.failed"))
    stored_body_replaced(
        world, job_id, json.dumps({**job_body(" job_trusted", event="job.failed"), "status": "E"})
    )

    assert run(job_id)[1] == []

    stored = world.item(job_id)
    assert (stored.state, stored.outcome) == ("processed", "failed")
    (event,) = world.announcements()
    assert event["detail"]["job_id"] == job_id
    assert event["detail"]["status"] == "E"


# Retries, the last receive and the sweeper (docs/worker.md, "Retries, giving up
# and the DLQ"); the whole story on a real queue is in test_retries.py.


def sweep(at):
    """One poller run at time ``at``; the owed jobs it queued again."""
    poller = build_poller(PollerSettings.from_env())
    return poller.run(lambda: 60, int(at), range(DUE_SHARDS)).swept


def test_the_sweeper_leaves_a_failed_job_to_the_queue_s_retry(world, server, local_urls):
    job_id = deliver(job_body(artifacts=[server.route("/s.mp4", status=503)]))
    before = int(time.time())

    ids, failed = run(job_id)

    assert failed == ids
    stored = world.item(job_id)
    settings = WorkerSettings.from_env()
    # SQS hands the message back within its visibility timeout; only a lease
    # after that does the sweeper look, so it never queues a copy beside it.
    wait = spec.QUEUE_VISIBILITY_TIMEOUT + settings.lease_seconds
    assert before + wait <= stored.due_at <= time.time() + wait
    assert sweep(before + settings.lease_seconds + 300) == 0
    assert sweep(stored.due_at + 1) == 1


def test_busy_on_the_last_receive_is_acknowledged_and_left_to_the_sweeper(world):
    job_id = deliver(job_body(event="job.failed"))
    now = int(time.time())
    held = world.table.claim(job_id, now, lease_seconds=3600)

    ids, failed = run(job_id, receives=spec.MAX_RECEIVES - 1)
    assert failed == ids
    assert run(job_id, receives=spec.MAX_RECEIVES)[1] == []

    # Untouched: due when the other worker's lease ends, whatever it then does.
    assert world.item(job_id) == held
    assert world.announcements() == []


def test_a_job_still_in_budget_on_the_last_receive_is_left_to_the_sweeper(
    world, server, local_urls
):
    job_id = deliver(job_body(artifacts=[server.route("/t.mp4", status=503)]))

    # Earlier receives were busy or out of time, so the budget is not spent.
    assert run(job_id, receives=spec.MAX_RECEIVES)[1] == []

    stored = world.item(job_id)
    assert (stored.state, stored.attempts, stored.parked_at) == ("processing", 1, None)
    assert stored.last_error["code"] == "http_503"
    assert stored.due_at <= time.time()  # the sweeper's next run queues it
    assert sweep(time.time()) == 1
    assert world.announcements() == []


class Bug(Exception):
    """Stands for a bug in the worker: no rule expects it."""


def failing_put_events(**_):
    raise Bug("the announcer broke")


def test_an_unexpected_failure_on_the_last_receive_parks_the_job(world, logs):
    job_id = deliver(job_body(event="job.canceled"))
    with hooking_new_clients(
        lambda client: client.meta.events.register(
            "before-call.events.PutEvents", failing_put_events
        )
    ):
        runtime.reset()
        ids, failed = run(job_id)
        assert failed == ids
        assert world.item(job_id).parked_at is None  # SQS retries it
        ids, failed = run(job_id, receives=spec.MAX_RECEIVES)

    assert failed == ids  # to the DLQ
    now = time.time()
    parked = world.item(job_id)
    assert (parked.state, parked.attempts) == ("processing", 0)
    assert parked.lease_until < now and now - 5 <= parked.parked_at <= now
    assert parked.due_at >= now - 5 + spec.DLQ_RETENTION_SECONDS
    assert parked.last_error == {"code": "Bug", "message": "the announcer broke"}
    (line,) = [line for line in logs.lines("ERROR") if "parked" in line["message"]]
    assert line["message"] == (
        "job parked on its message's last receive; the message goes to the DLQ"
    )
    assert (line["kind"], line["receives"]) == ("Bug", spec.MAX_RECEIVES)


def test_a_finish_that_fails_after_the_announcement_never_turns_into_a_give_up(world, monkeypatch):
    monkeypatch.setenv("MAX_ATTEMPTS", "1")  # the first attempt spends the budget
    job_id = deliver(job_body(event="job.failed"))
    finishes = []

    def refuse_finish(params, **_):
        if "processed_at" in params.get("UpdateExpression", ""):
            finishes.append(params)
            if len(finishes) == 1:
                error = {"Code": "InternalServerError", "Message": "try again"}
                raise ClientError({"Error": error}, "UpdateItem")

    with hooking_new_clients(
        lambda client: client.meta.events.register(
            "before-parameter-build.dynamodb.UpdateItem", refuse_finish
        )
    ):
        runtime.reset()
        ids, failed = run(job_id)
        assert failed == ids
        retried = world.item(job_id)
        assert (retried.state, retried.attempts) == ("processing", 0)
        assert retried.last_error["code"] == "FinishFailed"
        assert run(job_id)[1] == []

    done = world.item(job_id)
    assert (done.state, done.outcome, done.processing_error) == ("processed", "failed", None)
    # The retry announces what was announced: at least once, never a contradiction.
    kinds = [event["detail-type"] for event in world.announcements()]
    assert kinds == [DETAIL_TYPES["failed"]] * 2


def test_an_attempt_budget_of_zero_is_a_configuration_error_until_fixed(
    world, server, local_urls, monkeypatch, logs
):
    # It used to start, and every job ended "gave up after 0 attempts".
    job_id = deliver(job_body(artifacts=[server.route("/v.mp4", body=b"video")]))
    monkeypatch.setenv("MAX_ATTEMPTS", "0")
    ids, failed = run(job_id)
    assert failed == ids  # handed back by SQS, nothing acknowledged
    untouched = world.item(job_id)
    assert (untouched.state, untouched.attempts) == ("received", None)
    assert world.announcements() == []
    (line,) = logs.lines("ERROR")
    assert line["message"] == "worker misconfigured"
    assert line["reason"] == "MAX_ATTEMPTS must be within 1..1000, got 0"

    monkeypatch.delenv("MAX_ATTEMPTS")
    runtime.reset()
    assert run(job_id)[1] == []
    assert world.item(job_id).state == "processed"


def test_unknown_and_empty_messages(aws):
    assert run("job_that_was_never_received", " ", "")[1] == []


# -- the invocation's deadline -------------------------------------------------------
# A short function timeout (set per test) stands in for the stack's 300 s; the
# bound checked is "before the function's deadline", never a speed claim.


def test_a_trickling_artifact_is_cut_before_the_deadline_and_the_retry_resumes(
    world, server, local_urls, monkeypatch
):
    monkeypatch.setenv("TIME_BUDGET_MARGIN_SECONDS", "1.5")
    context = LambdaContext(timeout_seconds=3)

    def trickle():
        # The invocation's time runs out while this is served (the copy was
        # started with 1.5 s for it, and the fetch is cut then): what is left
        # is the reserve, for releasing the claim.
        context.leave(1.5)
        yield from itertools.repeat(b"x", 100)

    done = server.route("/v/0.mp4", body=b"first", headers=MP4)
    # A byte every 0.2 s: no read ever times out, and the whole takes 20 s.
    slow = server.route("/v/1.mp4", body=trickle, interval=0.2, headers=MP4)
    job_id = deliver(job_body(artifacts=[done, slow]))
    next_in_batch = deliver(job_body(event="job.failed"))
    event = sqs_event([job_id, next_in_batch])

    response = worker.handler(event, context)

    assert context.get_remaining_time_in_millis() > 0
    assert [f["itemIdentifier"] for f in response["batchItemFailures"]] == [
        r["messageId"] for r in event["Records"]
    ]
    stored = world.item(job_id)
    assert stored.state == "processing"
    assert stored.lease_until < time.time()  # released: the retry need not wait
    assert stored.last_error["code"] == "deadline"
    assert [a["key"] for a in stored.artifacts] == [f"jobs/{job_id}/000-0.mp4"]
    # No time was left to finish it: it was not even claimed.
    untouched = world.item(next_in_batch)
    assert (untouched.state, untouched.attempts) == ("received", None)
    assert world.announcements() == []

    server.route("/v/1.mp4", body=b"second", headers=MP4)
    assert run(job_id, next_in_batch)[1] == []
    assert world.item(job_id).state == "processed"
    assert world.item(job_id).attempts == 2
    assert (server.hits["/v/0.mp4"], server.hits["/v/1.mp4"]) == (1, 2)
    assert world.item(next_in_batch).state == "processed"
    assert len(world.announcements()) == 2


def test_no_copy_starts_without_the_time_to_finish_it(world, server, local_urls):
    urls = [server.route(f"/o/{i}.mp4", body=b"o") for i in range(2)]
    job_id = deliver(job_body(artifacts=urls))
    settings = WorkerSettings.from_env()
    # Seconds left when claiming, before the first copy, before the second.
    left = iter([100.0, 100.0, settings.time_reserve_seconds])

    with pytest.raises(OutOfTime):
        build_worker(settings).process(job_id, lambda: next(left))

    stored = world.item(job_id)
    assert stored.state == "processing"
    assert stored.lease_until < time.time()
    assert stored.last_error["code"] == "OutOfTime"
    assert stored.attempts == 0  # time ran out, the work did not fail: no attempt spent
    assert len(stored.artifacts) == 1
    assert server.hits["/o/1.mp4"] == 0

    later = time.time() + 2
    result = build_worker(settings, clock=lambda: later).process(job_id, lambda: 100.0)
    assert result.action is Action.PROCESSED
    assert (result.artifacts_copied, len(result.artifacts)) == (1, 2)
    assert server.hits["/o/0.mp4"] == 1


def test_presigned_query_strings_stay_out_of_the_logs_and_the_item(world, server, local_urls, logs):
    url = server.route(
        "/signed.mp4?X-Amz-Signature=s3cr3t&X-Amz-Credential=AKIDEXAMPLE", status=503
    )
    job_id = deliver(job_body(artifacts=[url]))

    ids, failed = run(job_id)

    assert failed == ids
    last_error = world.item(job_id).last_error
    assert (last_error["code"], last_error["url"]) == ("http_503", server.url("/signed.mp4"))
    (retried,) = [line for line in logs.lines() if line["message"] == "job will be retried"]
    assert retried["error"]["code"] == "http_503"
    for text in (logs.text, json.dumps(last_error)):
        assert "s3cr3t" not in text
        assert "AKIDEXAMPLE" not in text


def test_a_body_that_is_not_a_job_id_is_dropped_and_counted_never_claimed(world, capsys, caplog):
    job_id = deliver(job_body(event="job.failed"))
    capsys.readouterr()

    assert run(f" {job_id} ", f"{job_id}\n", "job_\x00")[1] == []

    stored = world.item(job_id)
    assert (stored.state, stored.attempts) == ("received", None)
    assert world.announcements() == []
    dropped = [
        r for r in caplog.records if r.getMessage() == "message body is not a job id; dropped"
    ]
    assert [(r.levelname, r.reason) for r in dropped] == [("WARNING", "invalid_job_id")] * 3
    emitted = [json.loads(line) for line in capsys.readouterr().out.splitlines() if "_aws" in line]
    assert [metrics["InvalidMessages"] for metrics in emitted] == [[1.0] * 3]
