"""A poller round fanned out over the shards queue: the handler against moto, with a
loopback server playing Sume's status endpoint."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError

import poller
from devstack.counting import CallCounter
from devstack.eventsources import sqs_records
from sume.core import aws as clients
from sume.core import runtime
from sume.core.names import DUE_INDEX, due_shard
from sume.polling import poller as poller_module
from sume.polling import settings as settings_module
from sume.polling.compose import build_fanout, build_shard_run
from sume.polling.fanout import Assignment
from sume.polling.registry import Registry
from sume.polling.settings import FanOutSettings, PollerSettings
from sume.store.jobs import JobsTable
from tests.awscalls import hooking_new_clients
from tests.builders import LambdaContext, scheduled_event
from tests.httpserver import LoopbackServer
from tests.integration.conftest import CONFORMANCE, SHARDS
from tests.rounds import assignments, run_assignments, shards_queue

pytestmark = CONFORMANCE


def register(aws, sume: LoopbackServer, count: int, shards: int, at: float) -> list[str]:
    """``count`` awaiting jobs due at ``at`` + 1, written with ``shards`` shards."""
    jobs = JobsTable(clients.client("dynamodb"), aws.table, shards)
    # The poller's own status URL policy (http to loopback, as the fixture sets).
    policy = PollerSettings.from_env().url_policy
    registry = Registry(jobs, first_poll_after=1, clock=lambda: at, url_policy=policy)
    job_ids = [f"job_{n:03d}" for n in range(count)]
    for job_id in job_ids:
        path = f"/v1/jobs/{job_id}"
        sume.route(path, headers={"content-type": "application/json"}, body=b'{"state":"running"}')
        assert registry.expect(job_id, sume.url(path))
    return job_ids


def polls(sume: LoopbackServer, job_ids: list[str]) -> list[int]:
    return [sume.hits[f"/v1/jobs/{job_id}"] for job_id in job_ids]


def message(body: str) -> dict[str, Any]:
    """A shards-queue message as ReceiveMessage hands it over."""
    return {"MessageId": str(uuid.uuid4()), "ReceiptHandle": uuid.uuid4().hex, "Body": body}


def test_a_tick_hands_each_group_of_shards_to_a_run_and_each_job_is_polled_once(
    aws, sume, monkeypatch
):
    monkeypatch.setenv("POLL_SHARDS_PER_RUN", "3")
    job_ids = register(aws, sume, 12, SHARDS, time.time() - 60)

    tick = poller.handler(scheduled_event(), LambdaContext(timeout_seconds=60))

    sent = assignments()
    bodies = [json.loads(m["Body"]) for m in sent]
    assert tick == {"round": bodies[0]["round"], "runs": 2}
    assert sorted(b["shards"] for b in bodies) == [[0, 1, 2], [3]]
    assert {b["round"] for b in bodies} == {tick["round"]}
    runs = [run_assignments([m], LambdaContext(timeout_seconds=60))[0] for m in sent]
    assert sorted(run["shards"] for run in runs) == [[0, 1, 2], [3]]
    assert sum(run["polled"] for run in runs) == 12
    assert all(run["complete"] and run["taken"] == [] for run in runs)
    assert polls(sume, job_ids) == [1] * 12


def test_a_duplicate_or_late_assignment_polls_nothing_again(aws, sume):
    job_ids = register(aws, sume, 8, SHARDS, time.time() - 60)
    poller.handler(scheduled_event(), LambdaContext(timeout_seconds=60))
    sent = assignments()
    first = run_assignments(sent, LambdaContext(timeout_seconds=60))
    assert sum(run["polled"] for run in first) == 8

    # SQS delivers a message again (at least once), or a retry comes late.
    again = run_assignments(sent, LambdaContext(timeout_seconds=60))
    assert [run["taken"] for run in again] == [run["shards"] for run in first]
    assert [run["shards"] for run in again] == [[]] * len(sent)
    # An assignment of an older round, once a later one claimed its shards.
    round_ = json.loads(sent[0]["Body"])["round"]
    older = Assignment(round_ - 300, tuple(range(SHARDS))).body()
    (late,) = run_assignments([message(older)], LambdaContext(timeout_seconds=60))
    assert (late["polled"], late["taken"]) == (0, list(range(SHARDS)))
    assert polls(sume, job_ids) == [1] * 8


def test_a_later_round_skips_the_shards_a_run_still_holds(aws, sume):
    (job_id,) = register(aws, sume, 1, SHARDS, time.time() - 60)
    shard = due_shard(job_id, SHARDS)
    path = f"/v1/jobs/{job_id}"
    # The answer's body is held until the later round's run has ended.
    answered = threading.Event()

    def held() -> Iterator[bytes]:
        answered.wait(30)
        yield b"{}"

    sume.route(path, headers={"content-type": "application/json"}, body=held, length=2)
    round_ = int(time.time())
    slow: list[dict[str, Any]] = []
    holder = threading.Thread(
        target=lambda: slow.extend(
            run_assignments(
                [message(Assignment(round_, (shard,)).body())], LambdaContext(timeout_seconds=60)
            )
        )
    )
    holder.start()
    while not sume.hits[path]:
        time.sleep(0.02)

    # The next round's run comes while the first still polls the shard's job.
    (later,) = run_assignments(
        [message(Assignment(round_ + 1, (shard,)).body())], LambdaContext(timeout_seconds=60)
    )
    answered.set()
    holder.join()

    assert (later["polled"], later["taken"]) == (0, [shard])
    assert (slow[0]["polled"], slow[0]["shards"]) == (1, [shard])
    assert sume.hits[path] == 1


@pytest.mark.parametrize(
    "body",
    [
        "not json",
        "[]",
        '{"round": 1900000000}',
        '{"round": true, "shards": [0]}',
        '{"round": 1900000000, "shards": []}',
        '{"round": 1900000000, "shards": [4]}',
        '{"round": 1900000000, "shards": [0, 0]}',
        '{"round": 1900000000, "shards": ["0"]}',
        '{"round": 1900000000, "shards": [0], "pad": "' + "x" * 9000 + '"}',
    ],
)
def test_a_message_that_is_no_assignment_is_refused_without_an_aws_call(aws, sume, body):
    _, arn = shards_queue()
    with CallCounter().installed() as calls:
        runtime.reset()  # the poller's clients are made in the block, so counted
        result = poller.handler(sqs_records([message(body)], arn), LambdaContext())
    assert result == {"runs": [{"refused": "invalid_assignment"}]}
    assert calls.calls == []


def index_counts(aws, shards: range) -> dict[int, int]:
    """Items per shard of the due-work index: the drain check in docs/operations.md."""
    ddb = clients.client("dynamodb")
    return {
        shard: ddb.query(
            TableName=aws.table,
            IndexName=DUE_INDEX,
            KeyConditionExpression="due_shard = :s",
            ExpressionAttributeValues={":s": {"N": str(shard)}},
            Select="COUNT",
        )["Count"]
        for shard in shards
    }


def one_round(at: float) -> int:
    """A round at ``at`` through the tick and every run, as the handler composes them."""
    clock = lambda: at  # noqa: E731 - the round's time
    fanout = FanOutSettings.from_env()
    build_fanout(fanout, clock=clock).start()
    run = build_shard_run(PollerSettings.from_env(), fanout, clock=clock)
    polled = 0
    for sent in assignments():
        polled += run.work(run.parse(sent["Body"]), lambda: 60.0).polled
    return polled


@pytest.mark.parametrize("before, after", [(4, 2), (4, 8)])
def test_the_shard_count_changes_on_a_live_table_without_stranding_an_item(
    aws, sume, monkeypatch, before, after
):
    now = time.time()
    job_ids = register(aws, sume, 24, before, now - 60)
    assert sum(index_counts(aws, range(before)).values()) == 24

    # Step 1: the new count, the readers still covering the old shards.
    monkeypatch.setenv("DUE_SHARDS", str(after))
    monkeypatch.setenv("DUE_SHARDS_PREVIOUS", str(before))
    runtime.reset()
    assert one_round(now) == 24
    # Every item the round touched is in its shard under the new count.
    counts = index_counts(aws, range(max(before, after)))
    assert {s for s, n in counts.items() if n} <= set(range(after))
    jobs = JobsTable(clients.client("dynamodb"), aws.table, after)
    for job_id in job_ids:
        item = jobs.get(job_id)
        assert item is not None and item.due_shard == due_shard(job_id, after)

    # Step 2: the old shards empty (the check above), the readers follow the new count.
    monkeypatch.delenv("DUE_SHARDS_PREVIOUS")
    runtime.reset()
    assert one_round(now + 10**5) == 24
    assert polls(sume, job_ids) == [2] * 24


def test_while_a_lowered_shard_count_drains_the_gauge_counts_the_old_shards(
    aws, sume, monkeypatch, capsys
):
    # Five awaiting jobs, all in shards the lowered count no longer writes to.
    job_ids = [j for j in (f"job_{n:03d}" for n in range(200)) if due_shard(j, SHARDS) >= 2][:5]
    jobs = JobsTable(clients.client("dynamodb"), aws.table, SHARDS)
    policy = PollerSettings.from_env().url_policy
    registry = Registry(jobs, first_poll_after=1, clock=time.time, url_policy=policy)
    for job_id in job_ids:
        assert registry.expect(job_id, sume.url(f"/v1/jobs/{job_id}"))
    monkeypatch.setenv("DUE_SHARDS", "2")
    monkeypatch.setenv("DUE_SHARDS_PREVIOUS", str(SHARDS))
    runtime.reset()
    capsys.readouterr()

    poller.handler(scheduled_event(), LambdaContext(timeout_seconds=60))

    emitted = [json.loads(line) for line in capsys.readouterr().out.splitlines() if "_aws" in line]
    # DeliverySilence reads this gauge: the jobs still wait, wherever their shard is.
    assert [m["JobsAwaiting"] for m in emitted if "JobsAwaiting" in m] == [[5.0]]


def test_a_claim_that_fails_lets_go_of_the_shards_already_won(aws, sume):
    def throttle_shard_1(params: dict[str, Any], **_: Any) -> None:
        if params.get("TableName") == leases and params["Item"]["due_shard"] == {"N": "1"}:
            raise ClientError(
                {"Error": {"Code": "ThrottlingException", "Message": "slow down"}}, "PutItem"
            )

    leases = FanOutSettings.from_env().leases_table_name
    round_ = int(time.time())
    with hooking_new_clients(
        lambda client: client.meta.events.register(
            "provide-client-params.dynamodb.PutItem", throttle_shard_1
        )
    ):
        runtime.reset()
        with pytest.raises(ClientError):
            run_assignments(
                [message(Assignment(round_, (0, 1)).body())], LambdaContext(timeout_seconds=60)
            )
    runtime.reset()

    # The next round's run need not wait for the failed run's Lambda deadline.
    (later,) = run_assignments(
        [message(Assignment(round_ + 1, (0,)).body())], LambdaContext(timeout_seconds=60)
    )
    assert (later["shards"], later["taken"]) == ([0], [])


def test_a_poll_left_at_the_deadline_cannot_write_over_a_later_round(aws, sume, monkeypatch):
    # A poll's write stuck past the run's deadline (a throttled or hanging DynamoDB
    # call that botocore retries) lands later: in Lambda, when the frozen container
    # thaws for another invocation, after the run let go of the shard.
    monkeypatch.setattr(settings_module, "POLL_FINISH_SECONDS", 0.2)
    monkeypatch.setattr(poller_module, "POLL_FINISH_SECONDS", 0.2)
    monkeypatch.setenv("HTTP_TOTAL_TIMEOUT_SECONDS", "0.5")
    monkeypatch.setenv("TIME_BUDGET_MARGIN_SECONDS", "0")
    (job_id,) = register(aws, sume, 1, SHARDS, time.time() - 600)
    shard = due_shard(job_id, SHARDS)
    gate, held = threading.Event(), threading.Event()
    stalled_run = LambdaContext(timeout_seconds=1.5)

    def stall_the_first_reschedule(request: Any, **_: Any) -> None:
        if b"poll_attempts" in (request.body or b"") and not held.is_set():
            held.set()
            stalled_run.leave(0)  # the run's time runs out while the write hangs
            gate.wait(30)

    with hooking_new_clients(
        lambda client: client.meta.events.register(
            "before-send.dynamodb.UpdateItem", stall_the_first_reschedule
        )
    ):
        runtime.reset()
        round_ = int(time.time())
        (first,) = run_assignments([message(Assignment(round_, (shard,)).body())], stalled_run)
        assert held.is_set() and first["remaining"] == 1
        # The next round: its run polls the job and reschedules it.
        (second,) = run_assignments(
            [message(Assignment(round_ + 60, (shard,)).body())], LambdaContext(timeout_seconds=60)
        )
        assert (second["polled"], second["rescheduled"]) == (1, 1)
        gate.set()
        for thread in threading.enumerate():
            if thread.name.startswith("poll"):
                thread.join(10)

    item = JobsTable(clients.client("dynamodb"), aws.table, SHARDS).get(job_id)
    assert item is not None
    # One poll recorded, the later round's: the stale write changed nothing.
    assert (item.poll_attempts, item.last_polled_at) == (1, round_ + 60)
