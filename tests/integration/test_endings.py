"""Every ending announced: a job the poller gives up, and the same job completed later.

The poller against a loopback status host, the worker's and the receiver's
handlers against moto, and a subscriber's queue on the bus; every
announcement is checked against its published schema.
"""

from __future__ import annotations

import time
import types
from collections.abc import Iterator

import pytest
from botocore.exceptions import ClientError

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

METADATA = {"order": "o-42", "price": 12.5}
MAX_AGE = 900


@pytest.fixture
def world(aws, sume: StatusServer, monkeypatch) -> Iterator[World]:
    monkeypatch.setenv("MAX_POLL_AGE_SECONDS", str(MAX_AGE))
    world = World(aws)
    yield world
    assert_consumers_agree(world.announcements(), world.item)


def give_up(aws, sume: StatusServer, job_id: str, now: float) -> Clock:
    """Register ``job_id`` long enough ago, and let the poller ask one last time."""
    clock = Clock(now - MAX_AGE - 100)
    assert register(aws, clock, job_id, sume.job_url(job_id), METADATA)
    sume.answer(job_id, {"status": "running"})
    clock.now = now
    assert make_poller(clock).run(lambda: FOREVER).lost == 1
    return clock


def test_a_job_given_up_is_announced_lost_once_with_its_metadata(aws, sume, world):
    now = time.time()
    give_up(aws, sume, "job_gone", now)
    # The write that marked it lost made its announcement owed, and queued it.
    assert drain_queue(aws) == ["job_gone"]

    assert run("job_gone")[1] == []

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
    # A second copy of the message finds it announced: nothing more is sent.
    assert run("job_gone")[1] == []
    assert world.announcements() == [event]


def test_a_lost_job_whose_message_never_came_is_announced_by_the_sweeper(
    aws,
    sume,
    world,
):
    now = time.time()
    clock = give_up(aws, sume, "job_swept", now)
    drain_queue(aws)  # the poller's send, as if it had never arrived
    sweep_after = PollerSettings.from_env().sweep_after_seconds

    clock.now = now + sweep_after
    assert make_poller(clock).run(lambda: FOREVER).swept == 1
    assert run("job_swept")[1] == []

    (event,) = world.announcements()
    assert (event["detail-type"], event["detail"]["job_id"]) == (DETAIL_TYPES["lost"], "job_swept")
    clock.now = now + 100 * sweep_after
    assert make_poller(clock).run(lambda: FOREVER).swept == 0


def test_a_lost_job_whose_webhook_comes_later_completes_and_says_it_was_lost(
    aws,
    sume,
    world,
):
    now = time.time()
    give_up(aws, sume, "job_late", now)
    assert run("job_late")[1] == []
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
    now = time.time()
    give_up(aws, sume, "job_just", now)
    deliver(job_body("job_just", artifacts=[]))

    # Both messages (the lost one and the received one) reach the worker.
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
    give_up(aws, sume, "job_retry", time.time())
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
    now = time.time()
    give_up(aws, sume, "job_throttled", now)
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
    now = time.time()
    give_up(aws, sume, "job_racing", now)
    webhooks: list[str] = []

    def register(client):
        def webhook_meanwhile(params, **_):
            # The lost announcement is claimed and on its way when Sume's webhook lands.
            if not webhooks and params["Entries"][0]["DetailType"] == DETAIL_TYPES["lost"]:
                webhooks.append(deliver(job_body("job_racing", artifacts=[])))

        client.meta.events.register("before-parameter-build.events.PutEvents", webhook_meanwhile)

    with hooking_new_clients(register):
        runtime.reset()
        assert run("job_racing")[1] == []
    runtime.reset()
    assert webhooks == ["job_racing"]
    assert run("job_racing")[1] == []

    lost, completed = world.announcements()
    assert (lost["detail-type"], lost["detail"]["sequence"]) == (DETAIL_TYPES["lost"], 1)
    assert (completed["detail-type"], completed["detail"]["sequence"]) == (
        DETAIL_TYPES["completed"],
        2,
    )
    assert completed["detail"]["lost_at"] == lost["detail"]["lost_at"]
    assert assert_consumers_agree(world.announcements(), world.item) == 1
