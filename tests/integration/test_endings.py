"""Every ending announced: a job the poller gives up, and the same job completed later.

The poller against a loopback status host, the worker's and the receiver's
handlers against moto, and a subscriber's queue on the bus; every
announcement is checked against its published schema. The run that gives a
job up announces it; one it could not announce is swept to the worker.
"""

from __future__ import annotations

import threading
import time
import types
from collections.abc import Iterator

import pytest
from botocore.exceptions import ClientError

from devstack.counting import CallCounter
from infra import spec
from sume.core import runtime
from sume.core.names import DETAIL_TYPES
from sume.polling.settings import PollerSettings
from sume.store.bus import iso_time
from sume.store.job import State
from tests.awscalls import hooking_new_clients
from tests.builders import job_body
from tests.consumers import assert_consumers_agree
from tests.httpserver import StatusServer
from tests.integration.conftest import CONFORMANCE
from tests.integration.test_announcement_schemas import validator
from tests.integration.test_poller import (
    FOREVER,
    Clock,
    drain_queue,
    indexed_job_ids,
    make_poller,
    register,
)
from tests.integration.test_worker import World, deliver, run

pytestmark = CONFORMANCE

METADATA = {"order": "o-42", "price": 12.5}
MAX_AGE = 900


@pytest.fixture
def world(aws, sume: StatusServer, monkeypatch) -> Iterator[World]:
    monkeypatch.setenv("MAX_POLL_AGE_SECONDS", str(MAX_AGE))
    world = World(aws)
    yield world
    assert_consumers_agree(world.announcements(), world.item)


def registered(aws, sume: StatusServer, job_id: str, now: float) -> Clock:
    """``job_id`` registered long enough ago to be given up at ``now``, still running."""
    clock = Clock(now - MAX_AGE - 100)
    assert register(aws, clock, job_id, sume.job_url(job_id), METADATA)
    sume.answer(job_id, {"status": "running"})
    clock.now = now
    return clock


def give_up(aws, sume: StatusServer, job_id: str, now: float, announced: int = 1) -> Clock:
    """Register ``job_id`` long enough ago, and let the poller ask one last time."""
    clock = registered(aws, sume, job_id, now)
    summary = make_poller(clock).run(lambda: FOREVER)
    assert (summary.lost, summary.lost_announced) == (1, announced)
    return clock


def given_up_unannounced(aws, sume: StatusServer, job_id: str, now: float) -> Clock:
    """Give ``job_id`` up at ``now`` with EventBridge refusing the poller's put."""
    with hooking_new_clients(
        lambda client: client.meta.events.register(
            "before-call.events.PutEvents", refused_put_events
        )
    ):
        runtime.reset()
        clock = give_up(aws, sume, job_id, now, announced=0)
    runtime.reset()
    return clock


def swept_to_the_worker(aws, sume: StatusServer, job_id: str) -> float:
    """Give ``job_id`` up, unannounced, so long ago that the poller's lease on its
    announcement has ended (the worker claims at the real time); the sweeper queues
    it for the worker. Returns when it was given up."""
    sweep_after = PollerSettings.from_env().sweep_after_seconds
    then = time.time() - sweep_after - 5
    clock = given_up_unannounced(aws, sume, job_id, then)
    assert drain_queue(aws) == []
    clock.now = then + sweep_after
    assert make_poller(clock).run(lambda: FOREVER).swept == 1
    return then


def test_the_run_that_gives_a_job_up_announces_it_with_the_floor_s_calls(aws, sume, world):
    now = time.time()
    clock = registered(aws, sume, "job_gone", now)
    with CallCounter().installed() as counter:
        runtime.reset()
        summary = make_poller(clock).run(lambda: FOREVER)
    runtime.reset()
    # Reading the due-work index aside: given up (lost, its announcement's claim
    # taken), announced, out of the index (bench/jobfloor.py's steps). Nothing queued.
    calls = [c for c in counter.calls if c != "dynamodb.Query"]
    assert calls == ["dynamodb.UpdateItem", "events.PutEvents", "dynamodb.UpdateItem"]
    assert drain_queue(aws) == []
    assert (summary.lost, summary.lost_announced) == (1, 1)

    (event,) = world.announcements()
    validator(event["detail-type"]).validate(event)
    assert event["detail-type"] == DETAIL_TYPES["lost"] == "Sume Job Lost"
    assert event["resources"] == []
    assert event["detail"] == {
        "version": 1,
        "job_id": "job_gone",
        "sequence": 1,
        "metadata": METADATA,
        "registered_at": iso_time(int(now) - MAX_AGE - 100),
        "lost_at": iso_time(int(now)),
        "polls": 1,
        "last_poll_error": None,
        "replay": False,
    }
    item = world.item("job_gone")
    assert item is not None
    assert (item.state, item.due_at, item.claim_id, item.sequence) == (State.LOST, None, None, 1)
    assert "job_gone" not in indexed_job_ids(aws)
    # A message for it (an operator's announce-owed, say) finds it announced.
    assert run("job_gone")[1] == []
    assert world.announcements() == [event]


def test_a_lost_job_the_poller_could_not_announce_is_announced_once_after_its_lease(
    aws,
    sume,
    world,
):
    sweep_after = PollerSettings.from_env().sweep_after_seconds
    # So long ago that the lease has ended by the worker's (real) clock.
    now = time.time() - sweep_after - 5
    clock = given_up_unannounced(aws, sume, "job_swept", now)
    held = world.item("job_swept")
    assert held is not None
    # The poller's claim on the announcement holds until the first sweep.
    assert (held.state, held.due_at, held.lease_until) == (
        State.LOST,
        int(now) + sweep_after,
        int(now) + sweep_after,
    )
    assert held.claim_id is not None
    assert world.announcements() == [] and drain_queue(aws) == []
    clock.now = now + sweep_after - 1
    assert make_poller(clock).run(lambda: FOREVER).swept == 0
    assert drain_queue(aws) == []

    clock.now = now + sweep_after
    assert make_poller(clock).run(lambda: FOREVER).swept == 1
    assert run("job_swept")[1] == []

    (event,) = world.announcements()
    validator(event["detail-type"]).validate(event)
    assert (event["detail-type"], event["detail"]["job_id"]) == (DETAIL_TYPES["lost"], "job_swept")
    assert event["detail"]["sequence"] == 1
    assert "job_swept" not in indexed_job_ids(aws)
    clock.now = now + 100 * sweep_after
    assert make_poller(clock).run(lambda: FOREVER).swept == 0


def test_a_lost_job_whose_webhook_comes_later_completes_and_says_it_was_lost(
    aws,
    sume,
    world,
):
    now = time.time()
    give_up(aws, sume, "job_late", now)
    deliver(job_body("job_late", artifacts=[]))

    assert run("job_late")[1] == []

    lost, completed = world.announcements()
    for event in (lost, completed):
        validator(event["detail-type"]).validate(event)
    assert completed["detail-type"] == DETAIL_TYPES["completed"]
    assert (lost["detail"]["sequence"], completed["detail"]["sequence"]) == (1, 2)
    assert completed["detail"]["lost_at"] == lost["detail"]["lost_at"] == iso_time(int(now))
    assert completed["detail"]["metadata"] == METADATA
    item = world.item("job_late")
    assert item is not None
    assert (item.state, item.attempts) == (State.PROCESSED, 1)


def test_a_webhook_before_the_lost_announcement_leaves_only_the_completion(
    aws,
    sume,
    world,
):
    now = swept_to_the_worker(aws, sume, "job_just")
    deliver(job_body("job_just", artifacts=[]))

    # Both messages (the lost one the sweeper queued and the received one) reach the worker.
    assert run("job_just", "job_just")[1] == []

    (event,) = world.announcements()
    validator(event["detail-type"]).validate(event)
    assert event["detail-type"] == DETAIL_TYPES["completed"]
    assert (event["detail"]["sequence"], event["detail"]["lost_at"]) == (2, iso_time(int(now)))


def refused_put_events(**_):
    """EventBridge takes the call and refuses the entry, as when throttled."""
    entry = {"ErrorCode": "ThrottlingException", "ErrorMessage": "Rate exceeded"}
    return types.SimpleNamespace(status_code=200), {"FailedEntryCount": 1, "Entries": [entry]}


def test_a_lost_announcement_eventbridge_refused_is_retried_until_sent(
    aws,
    sume,
    world,
):
    swept_to_the_worker(aws, sume, "job_retry")
    with hooking_new_clients(
        lambda client: client.meta.events.register(
            "before-call.events.PutEvents", refused_put_events
        )
    ):
        runtime.reset()
        ids, failed = run("job_retry")
        assert failed == ids  # SQS retries it
        # On the message's last receive it is acknowledged, left to the sweeper.
        assert run("job_retry", receives=spec.MAX_RECEIVES)[1] == []

    held = world.item("job_retry")
    assert held is not None
    assert (held.state, held.last_error["code"]) == (State.LOST, "AnnounceFailed")
    assert held.lease_until is not None and held.lease_until < time.time()
    assert "job_retry" in indexed_job_ids(aws)
    runtime.reset()
    assert run("job_retry")[1] == []
    (event,) = world.announcements()
    assert (event["detail-type"], event["detail"]["sequence"]) == (DETAIL_TYPES["lost"], 1)


def throttling(condition_part: str, update_part: str = ""):
    """DynamoDB throttles the UpdateItem whose condition and update name these parts."""

    def register(client):
        def throttle(params, **_):
            if condition_part in params.get(
                "ConditionExpression", ""
            ) and update_part in params.get("UpdateExpression", ""):
                error = {"Code": "ThrottlingException", "Message": "Rate exceeded"}
                raise ClientError({"Error": error}, "UpdateItem")

        client.meta.events.register("before-parameter-build.dynamodb.UpdateItem", throttle)

    return register


@pytest.mark.parametrize(
    "step",
    [
        ("#state = :lost AND attribute_exists(due_at)", ""),  # claim_lost
        ("#state = :lost AND claim_id = :claim", "REMOVE "),  # finish_lost
    ],
    ids=["claim_lost", "finish_lost"],
)
def test_a_lost_job_throttled_on_the_last_receive_is_left_to_the_sweeper_not_the_dlq(
    aws,
    sume,
    world,
    step,
):
    swept_to_the_worker(aws, sume, "job_throttled")
    with hooking_new_clients(throttling(*step)):
        runtime.reset()
        assert run("job_throttled")[1] != []  # SQS retries it
        # The last receive raises nothing: its message is acknowledged, not sent to the DLQ.
        assert run("job_throttled", receives=spec.MAX_RECEIVES)[1] == []
    runtime.reset()

    owed = world.item("job_throttled")
    assert owed is not None
    assert (owed.state, owed.parked_at) == (State.LOST, None)
    assert "job_throttled" in indexed_job_ids(aws)  # still due: the sweeper queues it
    assert owed.lease_until is None or owed.lease_until < time.time()  # released
    assert run("job_throttled")[1] == []
    assert [e["detail-type"] for e in world.announcements()][-1] == DETAIL_TYPES["lost"]
    assert "job_throttled" not in indexed_job_ids(aws)


def test_a_webhook_while_the_lost_announcement_is_sent_leaves_both_numbered_in_order(
    aws,
    sume,
    world,
):
    swept_to_the_worker(aws, sume, "job_racing")
    webhooks: list[str] = []

    # The lost announcement is claimed and on its way when Sume's webhook lands.
    with hooking_new_clients(webhook_before_the_lost_put("job_racing", webhooks)):
        runtime.reset()
        assert run("job_racing")[1] == []
    runtime.reset()
    assert webhooks == ["job_racing"]
    assert run("job_racing")[1] == []

    assert_lost_then_completed(world)


def webhook_before_the_lost_put(job_id: str, webhooks: list[str]):
    """Sume's webhook for ``job_id`` lands just before the first *Lost* put (in ``webhooks``)."""

    def register(client):
        def webhook_meanwhile(params, **_):
            if not webhooks and params["Entries"][0]["DetailType"] == DETAIL_TYPES["lost"]:
                webhooks.append(deliver(job_body(job_id, artifacts=[])))

        client.meta.events.register("before-parameter-build.events.PutEvents", webhook_meanwhile)

    return register


def assert_lost_then_completed(world: World) -> None:
    """*Lost* (1) and the completion (2) announced, once each, both with ``lost_at``."""
    lost, completed = world.announcements()
    assert (lost["detail-type"], lost["detail"]["sequence"]) == (DETAIL_TYPES["lost"], 1)
    assert (completed["detail-type"], completed["detail"]["sequence"]) == (
        DETAIL_TYPES["completed"],
        2,
    )
    assert completed["detail"]["lost_at"] == lost["detail"]["lost_at"]
    assert assert_consumers_agree(world.announcements(), world.item) == 1


def test_a_webhook_between_the_poller_s_give_up_and_its_announcement_completes_the_job(
    aws,
    sume,
    world,
):
    now = time.time()
    clock = registered(aws, sume, "job_between", now)
    webhooks: list[str] = []

    # The poller's write gave the job up; Sume's webhook lands before its put.
    with hooking_new_clients(webhook_before_the_lost_put("job_between", webhooks)):
        runtime.reset()
        summary = make_poller(clock).run(lambda: FOREVER)
    runtime.reset()
    assert webhooks == ["job_between"]
    # Announced by the run; its finish found the job received, which the worker takes.
    assert (summary.lost, summary.lost_announced) == (1, 1)
    assert drain_queue(aws) == ["job_between"]
    assert run("job_between")[1] == []

    assert_lost_then_completed(world)
    assert world.announcements()[0]["detail"]["lost_at"] == iso_time(int(now))
    item = world.item("job_between")
    assert item is not None
    assert (item.state, item.due_at) == (State.PROCESSED, None)
    assert "job_between" not in indexed_job_ids(aws)


def test_a_lost_announcement_whose_finish_failed_in_the_poller_is_sent_again_numbered_alike(
    aws,
    sume,
    world,
):
    sweep_after = PollerSettings.from_env().sweep_after_seconds
    now = time.time() - sweep_after - 5  # the lease has ended by the worker's clock
    clock = registered(aws, sume, "job_twice", now)
    with hooking_new_clients(throttling("#state = :lost AND claim_id = :claim", "REMOVE ")):
        runtime.reset()
        summary = make_poller(clock).run(lambda: FOREVER)
    runtime.reset()
    assert (summary.lost, summary.lost_announced, summary.errors) == (1, 0, 1)
    assert "job_twice" in indexed_job_ids(aws)

    clock.now = now + sweep_after
    assert make_poller(clock).run(lambda: FOREVER).swept == 1
    assert run("job_twice")[1] == []

    # At least once: the same announcement twice, which subscribers dedupe.
    first, again = world.announcements()
    assert first["detail"] == again["detail"]
    assert (first["detail-type"], first["detail"]["sequence"]) == (DETAIL_TYPES["lost"], 1)
    assert "job_twice" not in indexed_job_ids(aws)
    assert assert_consumers_agree(world.announcements(), world.item) == 1


def test_a_run_out_of_time_after_giving_a_job_up_leaves_its_announcement_to_the_sweeper(
    aws,
    sume,
    world,
):
    now = time.time()
    clock = registered(aws, sume, "job_late_run", now)
    given_up: list[str] = []

    def register(client):
        def note_give_up(params, **_):
            if "lost_at" in params.get("UpdateExpression", ""):
                given_up.append(params["Key"]["job_id"]["S"])

        client.meta.events.register("before-parameter-build.dynamodb.UpdateItem", note_give_up)

    with hooking_new_clients(register):
        runtime.reset()
        # The poll's time is up from the moment its write gave the job up. Only the
        # poll's thread is told so: told too, the run's own wait could stop before it
        # collects the poll's tally, and whether it did would race the poll.
        main = threading.current_thread()

        def time_left() -> float:
            up = given_up and threading.current_thread() is not main
            return 0.0 if up else FOREVER

        summary = make_poller(clock).run(time_left)
    runtime.reset()
    assert given_up == ["job_late_run"]
    assert (summary.lost, summary.lost_announced, summary.errors) == (1, 0, 0)
    assert world.announcements() == [] and drain_queue(aws) == []
    held = world.item("job_late_run")
    assert held is not None and held.claim_id is not None
    assert (
        held.lease_until == held.due_at == int(now) + PollerSettings.from_env().sweep_after_seconds
    )
