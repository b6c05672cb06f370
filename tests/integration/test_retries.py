"""A job that keeps failing, from its first receive to the operator's fix, on one moto server.

The receiver, the worker and the poller run in-process as Lambda would run
them; the jobs queue is moto's, with the stack's redrive policy, and Lambda's
SQS event source is played by the local stack's (``ApproximateReceiveCount``
included, a failed message visible again at once); the operator's commands
are the CLI's, against the same server. Announcements are read as a
subscriber gets them: through a rule on the bus and an SQS target.
"""

from __future__ import annotations

import json
import re
import time
import types
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest

import worker
from devstack.eventsources import SqsEventSource
from infra import spec
from infra.spec import ResourceNames
from sume.core import runtime
from sume.core.names import DETAIL_TYPES, DUE_SHARDS
from sume.polling.compose import build_poller
from sume.polling.settings import PollerSettings
from sume.store.job import Job
from sume.store.jobs import JobsTable
from sume_cli.main import main
from tests.awscalls import hooking_new_clients
from tests.builders import job_body
from tests.consumers import assert_consumers_agree
from tests.httpserver import LoopbackServer
from tests.integration.conftest import CONFORMANCE, lambda_environment, served_resources
from tests.integration.world import Subscriber, deliver

pytestmark = CONFORMANCE

DAY = 24 * 3600


class Stack:
    """The stack's resources on the moto server, and what a test does with them."""

    def __init__(self, endpoint: str, names: ResourceNames) -> None:
        self.endpoint = endpoint
        self.names = names
        self.sqs = boto3.client("sqs", endpoint_url=endpoint)
        self.table = JobsTable(boto3.client("dynamodb", endpoint_url=endpoint), names.table, 16)
        events = boto3.client("events", endpoint_url=endpoint)
        self.subscriber = Subscriber(self.sqs, events, names.event_bus)
        self.worker = SqsEventSource(
            self.sqs,
            names.queue_url,
            worker.handler,
            "worker",
            spec.WORKER_TIMEOUT,
            retry_delay_seconds=0,
            wait_seconds=0,
        )

    def deliver(self, body: dict[str, Any]) -> str:
        return deliver(body)

    def work(self) -> int:
        """Lambda's event source until the jobs queue is empty; the receives it made.

        The receive after a message's last moves it to the DLQ, as SQS does.
        """
        receives = 0
        while handed := self.worker.poll_once():
            receives += handed
        return receives

    def sweep(self, at: float) -> int:
        """One poller run at time ``at``; the owed jobs it queued again."""
        poller = build_poller(PollerSettings.from_env())
        return poller.run(lambda: 60.0, int(at), range(DUE_SHARDS)).swept

    def job(self, job_id: str) -> Job:
        job = self.table.get(job_id)
        assert job is not None
        return job

    def depth(self, queue_url: str) -> int:
        attributes = self.sqs.get_queue_attributes(
            QueueUrl=queue_url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        return sum(int(value) for value in attributes.values())

    def announcements(self) -> list[dict[str, Any]]:
        """Every announcement so far, oldest first."""
        return sorted(self.subscriber.announcements(), key=lambda e: e["detail"]["processed_at"])

    def cli(self, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
        capsys.readouterr()
        code = main(["--endpoint-url", self.endpoint, *argv])
        captured = capsys.readouterr()
        assert "Traceback" not in captured.err
        return code, captured.out


def shown(status: str, label: str) -> str:
    """The value on ``status``'s line labelled ``label``."""
    (line,) = [line for line in status.splitlines() if line.startswith(f"{label}  ")]
    return line[len(label) :].strip()


def reset(endpoint: str) -> None:
    request = urllib.request.Request(f"{endpoint}/moto-api/reset", method="POST")
    urllib.request.urlopen(request, timeout=10).close()


@pytest.fixture
def stack(moto_server: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Stack]:
    reset(moto_server)
    names = served_resources(moto_server)
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_server)
    monkeypatch.setenv("ALLOW_HTTP_URLS", "true")
    monkeypatch.setenv("ALLOW_PRIVATE_HOSTS", "true")
    lambda_environment(monkeypatch, names)
    stack = Stack(moto_server, names)
    yield stack
    runtime.reset()
    assert_consumers_agree(stack.announcements(), stack.table.get)
    reset(moto_server)


@pytest.fixture
def origin() -> Iterator[LoopbackServer]:
    with LoopbackServer() as server:
        yield server


class Outage:
    """One AWS operation failing for every client created while it is installed."""

    def __init__(self, event: str, answer: Callable[[], tuple[Any, dict[str, Any]]]) -> None:
        self._event = event
        self._answer = answer
        self.down = True
        self.calls = 0

    def _handler(self, **_: Any) -> tuple[Any, dict[str, Any]] | None:
        if not self.down:
            return None
        self.calls += 1
        return self._answer()

    def install(self, client: Any) -> None:
        client.meta.events.register(f"before-call.{self._event}", self._handler)


def throttled_put_events() -> tuple[Any, dict[str, Any]]:
    """EventBridge takes the call and refuses the entry: 200 with FailedEntryCount 1."""
    entry = {"ErrorCode": "ThrottlingException", "ErrorMessage": "Rate exceeded"}
    return types.SimpleNamespace(status_code=200), {"FailedEntryCount": 1, "Entries": [entry]}


def dynamodb_unavailable() -> tuple[Any, dict[str, Any]]:
    error = {"Code": "InternalServerError", "Message": "Internal server error"}
    return types.SimpleNamespace(status_code=500), {"Error": error, "ResponseMetadata": {}}


@pytest.fixture
def outage() -> Iterator[Callable[[str, Callable[[], tuple[Any, dict[str, Any]]]], Outage]]:
    outages: list[Outage] = []

    def install(event: str, answer: Callable[[], tuple[Any, dict[str, Any]]]) -> Outage:
        outages.append(Outage(event, answer))
        return outages[-1]

    def register(client: Any) -> None:
        for o in outages:
            o.install(client)

    with hooking_new_clients(register):
        yield install


def test_a_job_that_gave_up_is_put_right_by_one_replay_after_the_fix(stack, origin, capsys):
    kept = origin.route("/v/clip.mp4", body=b"clip" * 1000, headers={"content-type": "video/mp4"})
    flaky = origin.route("/v/thumb.jpg", status=503)
    job_id = stack.deliver(job_body(artifacts=[kept, flaky]))

    # Every receive of the message copies what it can and meets the 503; the
    # receive that spends the attempt budget gives up instead of failing.
    assert stack.work() == spec.MAX_RECEIVES
    gave_up = stack.job(job_id)
    assert gave_up.state == "processing_error"
    assert gave_up.processing_error == {
        "code": "too_many_attempts",
        "message": f"gave up after {spec.MAX_RECEIVES} attempts; last error: http_503",
    }
    assert gave_up.attempts == spec.MAX_RECEIVES
    # The copy already made stays recorded, and in S3.
    assert [a["source_url"] for a in gave_up.artifacts or []] == [kept]
    assert gave_up.artifact_count == 1
    (announced,) = stack.announcements()
    assert announced["detail-type"] == DETAIL_TYPES["processing_error"]
    assert announced["detail"]["processing_error"]["code"] == "too_many_attempts"
    assert [a["source_url"] for a in announced["detail"]["artifacts"]] == [kept]
    assert (origin.hits["/v/clip.mp4"], origin.hits["/v/thumb.jpg"]) == (1, spec.MAX_RECEIVES)
    assert stack.depth(stack.names.dlq_url) == 0
    assert stack.sweep(time.time() + DAY) == 0

    code, out = stack.cli(capsys, "status", job_id)
    # The command as pasted: this job, this deployment.
    assert re.search(
        rf"fix the cause, then `sume-webhooks --endpoint-url \S+ .*replay {job_id}`", out
    )

    origin.route("/v/thumb.jpg", body=b"jpeg", headers={"content-type": "image/jpeg"})
    code, out = stack.cli(capsys, "replay", job_id, "--reason", "origin fixed")
    assert code == 0, out
    assert stack.work() == 1

    done = stack.job(job_id)
    assert (done.state, done.outcome, done.attempts) == ("processed", "completed", 1)
    assert done.processing_error is None  # the earlier ending is gone, not kept beside
    assert [a["source_url"] for a in done.artifacts or []] == [kept, flaky]
    assert (origin.hits["/v/clip.mp4"], origin.hits["/v/thumb.jpg"]) == (2, spec.MAX_RECEIVES + 1)
    first, second = stack.announcements()
    assert first == announced
    assert second["detail-type"] == DETAIL_TYPES["completed"]
    assert (second["detail"]["replay"], second["detail"]["processing_error"]) == (True, None)
    assert [a["source_url"] for a in second["detail"]["artifacts"]] == [kept, flaky]

    code, out = stack.cli(capsys, "status", job_id)
    assert code == 0
    assert "processed (follow-up work done)" in out
    assert shown(out, "replays").startswith("1  last ")
    assert shown(out, "replay reason") == "origin fixed"
    code, out = stack.cli(capsys, "status", job_id, "--json")
    story = json.loads(out)
    assert (story["replays"], story["replay_reason"]) == (1, "origin fixed")
    assert "processing_error" not in story and "replay" not in story
    assert stack.depth(stack.names.dlq_url) == 0


def test_a_job_processed_on_its_last_attempt_is_replayed_and_processed_again(stack, origin, capsys):
    first = origin.route("/w/a.bin", body=b"a" * 100)
    second = origin.route("/w/b.bin", status=503)
    job_id = stack.deliver(job_body(artifacts=[first, second]))
    for _ in range(spec.MAX_RECEIVES - 1):
        assert stack.worker.poll_once() == 1
    origin.route("/w/b.bin", body=b"b" * 100)
    assert stack.worker.poll_once() == 1
    processed = stack.job(job_id)
    assert (processed.state, processed.attempts) == ("processed", spec.MAX_RECEIVES)
    old = {a["key"]: a for a in processed.artifacts or []}

    code, _ = stack.cli(capsys, "replay", job_id)
    assert code == 0
    replayed = stack.job(job_id)
    assert (replayed.state, replayed.attempts, replayed.replays) == ("received", 0, 1)
    assert replayed.artifacts == processed.artifacts  # kept until new copies replace them

    # The replay's first receive copies the first artifact again and meets a 503
    # on the second: the item records the new copy and still the old one.
    origin.route("/w/b.bin", status=503)
    assert stack.worker.poll_once() == 1
    midway = stack.job(job_id)
    assert midway.state == "processing"
    (new_a, old_b) = midway.artifacts or []
    assert new_a["key"] in old and new_a["stored_at"] >= (midway.replayed_at or 0)
    assert old_b == old[old_b["key"]]

    origin.route("/w/b.bin", body=b"b" * 100)
    assert stack.work() == 1
    again = stack.job(job_id)
    assert (again.state, again.outcome, again.attempts) == ("processed", "completed", 2)
    assert [a["source_url"] for a in again.artifacts or []] == [first, second]
    assert all(a["stored_at"] >= (again.replayed_at or 0) for a in again.artifacts or [])
    kinds = [(e["detail-type"], e["detail"]["replay"]) for e in stack.announcements()]
    assert kinds == [(DETAIL_TYPES["completed"], False), (DETAIL_TYPES["completed"], True)]


def test_eventbridge_failing_on_every_receive_parks_the_job_with_one_dlq_message(
    stack, origin, outage, capsys
):
    url = origin.route("/x/a.mp4", body=b"x" * 100)
    body = job_body(artifacts=[url])
    job_id = stack.deliver(body)
    eventbridge = outage("events.PutEvents", throttled_put_events)
    runtime.reset()  # a new container, whose clients meet the outage

    assert stack.work() == spec.MAX_RECEIVES
    # One announcement a receive: the ending settled on the first is repeated, never
    # replaced by a give-up.
    assert eventbridge.calls == spec.MAX_RECEIVES
    parked = stack.job(job_id)
    now = time.time()
    assert parked.state == "processing"
    assert parked.parked_at is not None and parked.parked_at <= now
    assert parked.attempts == 0  # a fresh budget for the redrive
    assert parked.last_error is not None and parked.last_error["code"] == "AnnounceFailed"
    assert (parked.due_at or 0) >= now + spec.DLQ_RETENTION_SECONDS - 60
    assert [a["source_url"] for a in parked.artifacts or []] == [url]
    assert stack.depth(stack.names.dlq_url) == 1
    assert origin.hits["/x/a.mp4"] == 1

    # While its message waits in the DLQ, neither the sweeper nor a Sume
    # redelivery queues a second copy.
    for later in (3 * 3600, DAY, 13 * DAY):
        assert stack.sweep(now + later) == 0
    stack.deliver(body)
    assert stack.depth(stack.names.queue_url) == 0
    code, out = stack.cli(capsys, "status", job_id)
    assert re.search(
        r"in the DLQ; fix the cause, then `sume-webhooks --endpoint-url \S+ .*dlq redrive`", out
    )

    eventbridge.down = False
    code, out = stack.cli(capsys, "dlq", "redrive")
    assert (code, "moved 1 message(s)" in out) == (0, True)
    assert stack.work() == 1
    done = stack.job(job_id)
    assert (done.state, done.outcome, done.attempts, done.parked_at) == (
        "processed",
        "completed",
        1,
        None,
    )
    assert origin.hits["/x/a.mp4"] == 1  # the copy made before the outage is reused
    (announced,) = stack.announcements()
    assert announced["detail-type"] == DETAIL_TYPES["completed"]
    assert stack.depth(stack.names.dlq_url) == 0


def test_a_parked_job_never_redriven_is_swept_once_its_dlq_message_has_expired(stack, outage):
    job_id = stack.deliver(job_body(event="job.failed"))
    outage("events.PutEvents", throttled_put_events)
    runtime.reset()
    assert stack.work() == spec.MAX_RECEIVES
    now = time.time()
    assert stack.sweep(now + spec.DLQ_RETENTION_SECONDS - 60) == 0
    assert stack.sweep(now + spec.DLQ_RETENTION_SECONDS + 60) == 1
    assert stack.depth(stack.names.queue_url) == 1
    assert stack.job(job_id).parked_at is not None  # until a worker claims it


def test_dynamodb_failing_on_every_receive_leaves_one_dlq_message_and_the_job_to_the_sweeper(
    stack, outage, capsys
):
    job_id = stack.deliver(job_body(event="job.failed"))
    dynamodb = outage("dynamodb.UpdateItem", dynamodb_unavailable)
    runtime.reset()

    # No claim and no park can be written: the message goes to the DLQ unparked.
    assert stack.work() == spec.MAX_RECEIVES
    assert dynamodb.calls == spec.MAX_RECEIVES + 1  # each receive's claim, the last's park
    assert stack.depth(stack.names.dlq_url) == 1
    owed = stack.job(job_id)
    assert (owed.state, owed.attempts, owed.parked_at) == ("received", None, None)

    # Once DynamoDB is back, the sweeper queues the job it still owes; the DLQ's
    # message, redriven, finds it done.
    dynamodb.down = False
    assert stack.sweep((owed.due_at or 0) + 1) == 1
    assert stack.work() == 1
    assert stack.job(job_id).state == "processed"
    code, _ = stack.cli(capsys, "dlq", "redrive")
    assert code == 0
    assert stack.work() == 1
    assert len(stack.announcements()) == 1
    assert stack.depth(stack.names.dlq_url) == 0
