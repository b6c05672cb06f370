"""The poller against moto and a loopback server playing Sume's status endpoint."""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from botocore.exceptions import ClientError

import receiver
import worker
from devstack import switches
from devstack.counting import CallCounter
from devstack.switches import create_switches
from sume.contract.envelope import parse
from sume.core import aws as clients
from sume.core import runtime
from sume.core.names import Env, due_shard, report_bucket
from sume.polling import compose
from sume.polling.compose import build_poller
from sume.polling.poller import RunSummary
from sume.polling.registry import Registry
from sume.polling.settings import PollerSettings
from sume.store.job import Source, State
from sume.store.jobs import JobsTable
from tests.awscalls import hooking_new_clients
from tests.builders import (
    LambdaContext,
    delivery_event,
    job_body,
    sqs_event,
)
from tests.integration.conftest import CONFORMANCE, SHARDS
from tests.rounds import poller_round

pytestmark = CONFORMANCE

T0 = 1_900_000_000
FOREVER = 10_000.0


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def table(aws) -> JobsTable:
    return JobsTable(clients.client("dynamodb"), aws.table, SHARDS)


class AllShards:
    """A round of one run over every shard, at the clock's time."""

    def __init__(self, clock: Clock) -> None:
        self._poller = build_poller(PollerSettings.from_env())
        self._clock = clock

    def run(self, remaining: Callable[[], float]) -> RunSummary:
        return self._poller.run(remaining, int(self._clock()), range(SHARDS))


def make_poller(clock: Clock) -> AllShards:
    return AllShards(clock)


def register(aws, clock: Clock, job_id: str, url: str, metadata=None) -> bool:
    # The poller's own status URL policy (http to loopback, as the fixture sets).
    policy = PollerSettings.from_env().url_policy
    registry = Registry(table(aws), first_poll_after=900, clock=clock, url_policy=policy)
    return registry.expect(job_id, url, metadata)


def drain_queue(aws) -> list[str]:
    sqs = clients.client("sqs")
    bodies: list[str] = []
    while True:
        messages = sqs.receive_message(QueueUrl=aws.queue_url, MaxNumberOfMessages=10).get(
            "Messages", []
        )
        if not messages:
            return bodies
        bodies.extend(m["Body"] for m in messages)


def due_at(aws, job_id: str) -> int:
    """When the job is next due: it is in the due-work index."""
    job = table(aws).get(job_id)
    assert job is not None and job.due_at is not None
    return job.due_at


def indexed_job_ids(aws) -> set[str]:
    jobs = table(aws)
    found: set[str] = set()
    for shard in range(SHARDS):
        start = None
        while True:
            items, start = jobs.due(shard, 2**40, 100, start)
            found.update(job.job_id for job in items)
            if start is None:
                break
    return found


def round_metrics(capsys) -> Counter[str]:
    """What the last round's runs emitted (one per shard), added up by metric."""
    out = capsys.readouterr().out.splitlines()
    runs = [json.loads(line) for line in out if "JobsPolled" in line][-SHARDS:]
    total: Counter[str] = Counter()
    for emitted in runs:
        for name in emitted["_aws"]["CloudWatchMetrics"][0]["Metrics"]:
            total[name["Name"]] += sum(emitted[name["Name"]])
    return total


def use_api_token(monkeypatch, value: str = "sume-api-token") -> None:
    secret = clients.client("secretsmanager").create_secret(
        Name="sume-api-token", SecretString=value
    )
    monkeypatch.setenv("SUME_API_TOKEN_ARN", secret["ARN"])


def test_job_recovered_by_polling_is_recorded_once_and_enqueued_once(aws, sume, monkeypatch):
    use_api_token(monkeypatch)
    monkeypatch.setenv("STATUS_ALLOWED_HOSTS", "127.0.0.1")
    clock = Clock(T0)
    assert register(aws, clock, "job_r", sume.job_url("job_r"), {"order": "o-1", "weight": 1.5})
    assert register(aws, clock, "job_s", sume.job_url("job_s"))
    video = sume.route(
        "/media/r.mp4", body=b"rendered video", headers={"content-type": "video/mp4"}
    )
    served = sume.answer("job_r", job_body("job_r", artifacts=[video]))
    sume.answer("job_s", {"id": "job_s", "state": "failed", "error": "codec"})
    run = make_poller(clock)

    clock.now = T0 + 899
    early = run.run(lambda: FOREVER)
    assert (early.polled, early.recovered) == (0, 0)

    clock.now = T0 + 900
    summary = run.run(lambda: FOREVER)
    assert (summary.polled, summary.recovered, summary.rescheduled) == (2, 2, 0)
    assert summary.complete

    item = table(aws).get("job_r")
    assert item is not None
    assert item.state == State.RECEIVED
    assert item.source == Source.POLL
    assert item.body == served
    assert item.event == "job.completed"
    assert item.deliveries == 0
    assert item.metadata == {"order": "o-1", "weight": 1.5}
    assert item.status_url == sume.job_url("job_r")
    assert sume.requests[0].headers["authorization"] == "Bearer sume-api-token"

    # A status answer that is not an envelope is stored as one built around it.
    built = table(aws).get("job_s")
    assert built is not None
    assert (built.event, built.status, built.source) == ("job.failed", "ERROR", "poll")
    envelope = json.loads(str(built.body))
    assert (envelope["job_id"], envelope["error"]) == ("job_s", {"message": "codec"})
    assert envelope["status_response"] == {"id": "job_s", "state": "failed", "error": "codec"}
    assert sorted(drain_queue(aws)) == ["job_r", "job_s"]

    clock.now = T0 + 901
    again = run.run(lambda: FOREVER)
    assert (again.polled, again.recovered, again.swept) == (0, 0, 0)
    assert (sume.polls_of("job_r"), sume.polls_of("job_s")) == (1, 1)
    assert drain_queue(aws) == []

    # The worker processes each recovered job once, even given a duplicate message.
    result = worker.handler(sqs_event(["job_r", "job_s", "job_r"]), LambdaContext())
    assert result == {"batchItemFailures": []}
    done = {j: table(aws).get(j) for j in ("job_r", "job_s")}
    assert {j: (i.state, i.outcome, i.attempts) for j, i in done.items() if i} == {
        "job_r": (State.PROCESSED, "completed", 1),
        "job_s": (State.PROCESSED, "failed", 1),
    }
    assert sume.hits["/media/r.mp4"] == 1
    assert indexed_job_ids(aws) == set()


def use_api_token_value(monkeypatch, value: str = "sume-api-token") -> None:
    monkeypatch.setenv("SUME_API_TOKEN", value)


@pytest.mark.parametrize("use_token", [use_api_token, use_api_token_value])
def test_the_api_token_goes_only_to_a_listed_host(aws, sume, monkeypatch, use_token):
    use_token(monkeypatch)
    clock = Clock(T0)
    register(aws, clock, "job_t", sume.job_url("job_t"))
    sume.answer("job_t", {"status": "running"})

    # No list (a dev stage): the status_url is read, but without the token.
    monkeypatch.delenv("STATUS_ALLOWED_HOSTS", raising=False)
    clock.now = T0 + 900
    assert make_poller(clock).run(lambda: FOREVER).rescheduled == 1
    assert "authorization" not in sume.requests[-1].headers

    monkeypatch.setenv("STATUS_ALLOWED_HOSTS", "127.0.0.1")
    clock.now = due_at(aws, "job_t")
    assert make_poller(clock).run(lambda: FOREVER).rescheduled == 1
    assert sume.requests[-1].headers["authorization"] == "Bearer sume-api-token"
    assert sume.polls_of("job_t") == 2


def test_a_status_url_off_the_list_is_refused_counted_visible_and_still_lost(
    aws, sume, monkeypatch, capsys
):
    use_api_token(monkeypatch)
    monkeypatch.setenv("MAX_POLL_AGE_SECONDS", "3600")
    now = time.time()
    # Registered before the list was set (registration now refuses it).
    register(aws, Clock(now - 1000), "job_off", sume.job_url("job_off"))
    register(aws, Clock(now - 4000), "job_off_old", sume.job_url("job_off_old"))
    monkeypatch.setenv("STATUS_ALLOWED_HOSTS", "api.sume.example")

    summary = poller_round(60)
    assert (summary["polled"], summary["refused"], summary["lost"]) == (2, 2, 1)
    assert sume.requests == []
    item = table(aws).get("job_off")
    assert item is not None
    assert (item.state, item.poll_attempts, item.last_poll_error) == (
        State.AWAITING,
        1,
        "refused_host",
    )
    lost = table(aws).get("job_off_old")
    assert lost is not None
    assert (lost.state, lost.last_poll_error) == (State.LOST, "refused_host")
    assert round_metrics(capsys)["StatusUrlRefused"] == 2

    # Once Sume's host is listed the next poll gets an answer, and the error goes.
    monkeypatch.setenv("STATUS_ALLOWED_HOSTS", "127.0.0.1")
    sume.answer("job_off", {"status": "running"})
    clock = Clock(due_at(aws, "job_off"))
    assert make_poller(clock).run(lambda: FOREVER).refused == 0
    again = table(aws).get("job_off")
    assert again is not None
    assert again.poll_attempts == 2
    assert again.last_poll_error is None


@pytest.mark.parametrize(
    "about_b",
    [
        lambda video: job_body("job_B", artifacts=[video]),
        lambda video: {"event": "job.completed", "id": "job_B", "payload": {"artifacts": [video]}},
        lambda video: {"job_id": "job_B", "status": "completed", "artifacts": [video]},
        lambda video: {"id": "job_B", "state": "completed", "artifacts": [video]},
        lambda video: {
            "job_id": "job_A",
            "id": "job_B",
            "status": "completed",
            "artifacts": [video],
        },
    ],
    ids=["envelope-job_id", "envelope-id", "status-job_id", "state-id", "job_id-and-another-id"],
)
def test_a_status_url_answering_about_another_job_never_finishes_this_one(
    aws, sume, monkeypatch, capsys, logs, about_b
):
    monkeypatch.setenv("MAX_POLL_AGE_SECONDS", "3600")
    now = time.time()
    b_video = sume.route("/media/b.mp4", body=b"job B's video")
    sume.answer("job_B", about_b(b_video))
    # Both registered with job_B's status URL; the second one is past its cut-off.
    register(aws, Clock(now - 1000), "job_A", sume.job_url("job_B"))
    register(aws, Clock(now - 4000), "job_A_old", sume.job_url("job_B"))

    summary = poller_round(60)

    assert (summary["polled"], summary["recovered"], summary["lost"]) == (2, 0, 1)
    assert (summary["other_job_answers"], summary["lost_announced"]) == (2, 1)
    item = table(aws).get("job_A")
    assert item is not None
    assert (item.state, item.event, item.body) == (State.AWAITING, None, None)
    assert (item.poll_attempts, item.last_poll_error) == (1, "job_id_mismatch")
    lost = table(aws).get("job_A_old")
    assert lost is not None
    assert (lost.state, lost.event, lost.last_poll_error) == (State.LOST, None, "job_id_mismatch")
    # Announced lost by the run that gave it up: nothing queued.
    assert drain_queue(aws) == []
    # StatusAnswersForOtherJobs is the metric the stack alarms on.
    assert round_metrics(capsys)["StatusAnswersForOtherJobs"] == 2
    errors = [e for e in logs.lines("ERROR") if "about another job" in e["message"]]
    assert sorted(e["job_id"] for e in errors) == ["job_A", "job_A_old"]

    # job_A's own webhook is a new job, not a duplicate: its own artifact is the one copied.
    a_video = sume.route("/media/a.mp4", body=b"job A's video")
    answer = receiver.handler(
        delivery_event(job_body("job_A", artifacts=[a_video])), LambdaContext()
    )
    assert json.loads(answer["body"])["result"] == "new"
    assert worker.handler(sqs_event(["job_A"]), LambdaContext()) == {"batchItemFailures": []}
    done = table(aws).get("job_A")
    assert done is not None
    assert (done.state, done.source) == (State.PROCESSED, Source.WEBHOOK)
    assert [a["source_url"] for a in done.artifacts or []] == [a_video]
    assert sume.hits["/media/b.mp4"] == 0


def test_webhook_and_poll_racing_produce_one_item_and_one_enqueue(aws, sume):
    now = time.time()
    job_ids = [f"job_race_{i}" for i in range(6)]
    bodies = {}
    for job_id in job_ids:
        register(aws, Clock(now - 1000), job_id, sume.job_url(job_id))
        bodies[job_id] = job_body(job_id)
        sume.answer(job_id, bodies[job_id])
    run = make_poller(Clock(now))
    start = threading.Barrier(1 + len(job_ids))
    answers: list[dict[str, Any]] = []
    # Lambda runs one invocation per container at a time; here the deliveries share
    # one process's Powertools metrics, whose flush is not thread-safe (one handler's
    # flush can empty the set another is serialising). They take turns among
    # themselves; each still races the poll.
    container = threading.Lock()

    def deliver(job_id: str) -> None:
        start.wait()
        with container:
            answers.append(receiver.handler(delivery_event(bodies[job_id]), LambdaContext()))

    threads = [threading.Thread(target=deliver, args=(j,)) for j in job_ids]
    for thread in threads:
        thread.start()
    start.wait()
    summary = run.run(lambda: FOREVER)
    for thread in threads:
        thread.join()

    assert [a["statusCode"] for a in answers] == [200] * len(job_ids)
    webhook_new = sum(json.loads(a["body"])["result"] == "new" for a in answers)
    assert webhook_new + summary.recovered == len(job_ids)
    assert sorted(drain_queue(aws)) == sorted(job_ids)
    for job_id in job_ids:
        item = table(aws).get(job_id)
        assert item is not None
        assert item.state == State.RECEIVED
        # Whichever won, the webhook's delivery was counted exactly once.
        assert item.deliveries == 1
        assert item.source in ("webhook", "poll")


def test_a_job_sume_never_knew_is_lost_with_the_404_as_its_last_poll_error(
    aws, sume, monkeypatch, logs
):
    monkeypatch.setenv("MAX_POLL_AGE_SECONDS", "3600")
    sume.answer("job_unknown", {"message": "no such job"}, 404)
    register(aws, Clock(time.time() - 4000), "job_unknown", sume.job_url("job_unknown"))

    assert poller_round(60)["lost"] == 1

    lost = table(aws).get("job_unknown")
    assert lost is not None
    # What status and the announcement show is what the log says.
    assert (lost.state, lost.last_poll_error) == (State.LOST, "http_404")
    (line,) = [e for e in logs.lines("ERROR") if e["message"].startswith("job lost")]
    assert line["last_poll_error"] == "http_404"


def test_backoff_doubles_up_to_its_cap_and_the_job_is_lost_at_the_cut_off(aws, sume, monkeypatch):
    monkeypatch.setenv("POLL_MAX_INTERVAL_SECONDS", "5000")
    monkeypatch.setenv("MAX_POLL_AGE_SECONDS", "20000")
    clock = Clock(T0)
    register(aws, clock, "job_slow", sume.job_url("job_slow"))
    run = make_poller(clock)
    polled_at: list[int] = []
    # Not finished, Sume overloaded, an unknown word: all mean "poll later".
    answers = [(200, {"status": "running"}), (503, "overloaded"), (200, {"state": "queued"})]
    for i in range(10):
        item = table(aws).get("job_slow")
        assert item is not None
        if item.state != State.AWAITING:
            break
        status, data = answers[i % len(answers)]
        sume.answer("job_slow", data, status)
        clock.now = due_at(aws, "job_slow") - 1
        assert run.run(lambda: FOREVER).polled == 0
        clock.now = due_at(aws, "job_slow")
        summary = run.run(lambda: FOREVER)
        assert summary.polled == 1
        polled_at.append(int(clock.now) - T0)

    gaps = [b - a for a, b in zip([0, *polled_at], polled_at, strict=False)]
    assert gaps == [900, 1800, 3600, 5000, 5000, 3700]
    assert polled_at[-1] == 20000
    assert (summary.lost, summary.lost_announced) == (1, 1)
    item = table(aws).get("job_slow")
    assert item is not None
    assert item.state == State.LOST
    assert item.lost_at == T0 + 20000
    assert item.poll_attempts == 6
    # Announced by the run that gave it up, and out of the due-work index.
    assert (item.due_at, item.lease_until, item.claim_id) == (None, None, None)
    assert "job_slow" not in indexed_job_ids(aws)
    # Into the report's index in the same write.
    assert (item.report_bucket, item.report_at) == (report_bucket(T0, "job_slow"), T0)
    assert sume.polls_of("job_slow") == 6
    assert drain_queue(aws) == []


def test_a_late_webhook_completes_a_lost_job(aws, sume, monkeypatch):
    monkeypatch.setenv("MAX_POLL_AGE_SECONDS", "900")
    now = time.time()
    clock = Clock(now - 2000)
    register(aws, clock, "job_late", sume.job_url("job_late"), {"k": "v"})
    clock.now = now
    assert make_poller(clock).run(lambda: FOREVER).lost == 1
    answer = receiver.handler(delivery_event(job_body("job_late")), LambdaContext())
    assert json.loads(answer["body"])["result"] == "new"
    item = table(aws).get("job_late")
    assert item is not None
    assert (item.state, item.metadata, item.sequence) == (State.RECEIVED, {"k": "v"}, 2)
    # Still in the report index from its loss.
    assert item.report_at == item.registered_at
    # Announced lost by the poller's run, then queued as received for the worker.
    assert drain_queue(aws) == ["job_late"]


def test_crash_left_in_received_is_re_enqueued_after_its_deadline(aws, sume):
    jobs = table(aws)
    event = parse(json.dumps(job_body("job_crash")).encode())
    # The receiver's write succeeded and the process died before SendMessage.
    assert jobs.record(event, Source.WEBHOOK, T0, sweep_at=T0 + 120).new  # type: ignore[arg-type]
    clock = Clock(T0 + 119)
    run = make_poller(clock)
    assert run.run(lambda: FOREVER).swept == 0
    assert drain_queue(aws) == []

    clock.now = T0 + 120
    assert run.run(lambda: FOREVER).swept == 1
    assert drain_queue(aws) == ["job_crash"]
    item = jobs.get("job_crash")
    assert item is not None
    assert (item.state, item.due_at, item.sweeps) == ("received", T0 + 120 + 240, 1)

    clock.now = T0 + 359
    assert run.run(lambda: FOREVER).swept == 0
    clock.now = T0 + 360
    assert run.run(lambda: FOREVER).swept == 1
    assert drain_queue(aws) == ["job_crash"]

    claimed = jobs.claim("job_crash", T0 + 361, lease_seconds=300)
    assert jobs.finish(
        "job_crash",
        str(claimed.claim_id),
        State.PROCESSED,
        T0 + 362,
        T0 + 10**6,
        {},
        window_at=claimed.unreported_at(),
    )
    clock.now = T0 + 10**5
    assert run.run(lambda: FOREVER).swept == 0
    assert drain_queue(aws) == []


def test_expired_lease_is_owed_work_again(aws, sume):
    jobs = table(aws)
    event = parse(json.dumps(job_body("job_lease")).encode())
    jobs.record(event, Source.WEBHOOK, T0, sweep_at=T0 + 120)  # type: ignore[arg-type]
    jobs.claim("job_lease", T0 + 1, lease_seconds=600)
    clock = Clock(T0 + 600)
    run = make_poller(clock)
    assert run.run(lambda: FOREVER).swept == 0
    clock.now = T0 + 601
    assert run.run(lambda: FOREVER).swept == 1
    assert drain_queue(aws) == ["job_lease"]
    # The redelivered message lets another worker take the job over.
    again = jobs.claim("job_lease", T0 + 602, lease_seconds=600)
    assert again.attempts == 2


def test_a_running_lease_is_waited_out_not_swept(aws, sume):
    jobs = table(aws)
    event = parse(json.dumps(job_body("job_long")).encode())
    jobs.record(event, Source.WEBHOOK, T0, sweep_at=T0 + 120)  # type: ignore[arg-type]
    jobs.claim("job_long", T0 + 1, lease_seconds=600)
    # The claim leaves the due time (its index entry keeps its key).
    assert due_at(aws, "job_long") == T0 + 120
    clock = Clock(T0 + 120)
    run = make_poller(clock)
    assert run.run(lambda: FOREVER).swept == 0
    assert drain_queue(aws) == []
    job = jobs.get("job_long")
    assert job is not None
    assert (job.due_at, job.sweeps) == (T0 + 601, None)
    # The worker died holding it: at the lease's end the job is owed again.
    clock.now = T0 + 601
    assert run.run(lambda: FOREVER).swept == 1
    assert drain_queue(aws) == ["job_long"]


class Budget:
    """The invocation's time left: plenty for the first ``calls`` checks, then,
    beyond the poller's margin, too little to start a poll (less than one poll's
    reserve), though enough to finish the polls already started: time runs
    down, it does not jump to the deadline."""

    def __init__(self, calls: int, margin: float) -> None:
        self.calls = calls
        self._after = margin + 10.0
        self._lock = threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            self.calls -= 1
            return FOREVER if self.calls >= 0 else self._after


def test_run_out_of_time_leaves_the_rest_for_the_next_run(aws, sume):
    clock = Clock(T0)
    job_ids = [f"job_many_{i:02d}" for i in range(20)]
    for job_id in job_ids:
        register(aws, clock, job_id, sume.job_url(job_id))
    clock.now = T0 + 900
    run = make_poller(clock)

    first = run.run(Budget(8, PollerSettings.from_env().policy.time_margin_seconds))
    assert not first.complete
    assert 0 < first.polled < len(job_ids)
    assert first.rescheduled == first.polled

    second = run.run(lambda: FOREVER)
    assert second.complete
    assert (second.remaining, second.errors) == (0, 0)
    assert first.polled + second.polled == len(job_ids)
    assert all(sume.polls_of(j) == 1 for j in job_ids)
    for job_id in job_ids:
        item = table(aws).get(job_id)
        assert item is not None
        assert item.poll_attempts == 1


def test_handler_stops_before_the_deadline_and_reports_in_metrics(aws, sume, monkeypatch, capsys):
    monkeypatch.setenv("MAX_POLL_AGE_SECONDS", "3600")
    now = time.time()
    for i in range(2):
        register(aws, Clock(now - 1000), f"job_h{i}", sume.job_url(f"job_h{i}"))
    register(aws, Clock(now - 4000), "job_gone", sume.job_url("job_gone"))
    # Refused by the URL policy whatever it allows: polled later, never fetched.
    register(aws, Clock(now - 1000), "job_imds", "http://169.254.169.254/latest/meta-data/")
    sume.answer("job_h0", job_body("job_h0"))

    # 20 s left minus the 10 s margin is less than one poll's worst case.
    tight = poller_round(20)
    assert set(tight) == {
        "polled",
        "recovered",
        "rescheduled",
        "lost",
        "lost_announced",
        "swept",
        "remaining",
        "errors",
        "refused",
        "other_job_answers",
        "configuration_errors",
        "complete",
        "shards",
        "taken",
        "held",
    }
    assert (tight["polled"], tight["rescheduled"], tight["complete"]) == (0, 0, False)
    assert tight["remaining"] >= 1

    roomy = poller_round(60)
    assert (roomy["polled"], roomy["recovered"], roomy["rescheduled"], roomy["lost"]) == (
        4,
        1,
        2,
        1,
    )
    assert roomy["complete"]
    assert all("authorization" not in r.headers for r in sume.requests)
    imds = table(aws).get("job_imds")
    assert imds is not None
    assert (imds.state, imds.poll_attempts) == (State.AWAITING, 1)
    emitted = round_metrics(capsys)
    # JobsLost is the metric the stack alarms on; the run that gave it up announced it.
    assert (emitted["JobsRecoveredByPoll"], emitted["JobsLost"], emitted["JobsPolled"]) == (1, 1, 4)
    assert emitted["LostJobsAnnounced"] == 1


def emitted_metrics(capsys) -> list[dict[str, Any]]:
    return [json.loads(line) for line in capsys.readouterr().out.splitlines() if "_aws" in line]


def gauged(emitted: list[dict[str, Any]]) -> list[float]:
    """JobsAwaiting as the round's tick emitted it (before its runs polled)."""
    (tick,) = [metrics for metrics in emitted if "JobsAwaiting" in metrics]
    return list(tick["JobsAwaiting"])


def added(emitted: list[dict[str, Any]], name: str) -> float:
    return sum(sum(metrics[name]) for metrics in emitted if name in metrics)


def test_each_round_gauges_the_jobs_awaiting_before_it_polls(aws, sume, capsys):
    # DeliverySilence reads JobsAwaiting; PollRecoveryShare reads JobsRecoveredByPoll.
    now = time.time()
    for job_id in ("job_w0", "job_w1", "job_w2", "job_w3"):
        register(aws, Clock(now - 1000), job_id, sume.job_url(job_id))
    sume.answer("job_w0", job_body("job_w0"))
    # A webhook ends job_w3's wait: its owed work is in the index, not awaiting.
    assert (
        receiver.handler(delivery_event(job_body("job_w3")), LambdaContext())["statusCode"] == 200
    )

    first = poller_round(60)
    round1 = emitted_metrics(capsys)
    second = poller_round(60)
    round2 = emitted_metrics(capsys)

    assert (first["polled"], first["recovered"], second["polled"]) == (3, 1, 0)
    # Counted by the tick, before the runs: job_w0, recovered in round 1, had waited in it.
    assert (gauged(round1), added(round1, "JobsRecoveredByPoll")) == ([3.0], 1)
    assert (gauged(round2), added(round2, "JobsRecoveredByPoll")) == ([2.0], 0)


def test_past_its_read_limit_the_gauge_is_a_lower_bound(aws, sume, monkeypatch, capsys):
    monkeypatch.setattr(compose, "AWAITING_COUNT_LIMIT", 1)
    runtime.reset()
    in_shard_0 = [j for j in (f"job_b{i}" for i in range(40)) if due_shard(j, SHARDS) == 0]
    for job_id in [*in_shard_0[:2], *one_job_per_shard("job_c")[1:]]:
        register(aws, Clock(time.time()), job_id, sume.job_url(job_id))

    poller_round(60)

    # Shard 0 holds two awaiting jobs and was read one item deep.
    assert gauged(emitted_metrics(capsys)) == [float(SHARDS)]


def refuse_counts(params: dict[str, Any], **_: Any) -> None:
    if params.get("Select") == "COUNT":
        raise ClientError(
            {"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "slow down"}},
            "Query",
        )


def test_a_count_that_fails_leaves_the_gauge_out_and_the_polls_go_on(aws, sume, capsys, logs):
    now = time.time()
    register(aws, Clock(now - 1000), "job_counted", sume.job_url("job_counted"))
    sume.answer("job_counted", job_body("job_counted"))
    with hooking_new_clients(
        lambda client: client.meta.events.register(
            "provide-client-params.dynamodb.Query", refuse_counts
        )
    ):
        runtime.reset()
        result = poller_round(60)

    assert (result["polled"], result["recovered"]) == (1, 1)
    emitted = emitted_metrics(capsys)
    # No gauge is no data: the silence alarm is not told jobs wait, nor that none do.
    assert not any("JobsAwaiting" in metrics for metrics in emitted)
    assert added(emitted, "PollerStepErrors") == 1
    (error,) = logs.lines("ERROR")
    assert error["message"] == "awaiting jobs could not be counted"


def test_the_due_index_is_sparse_and_never_scanned(aws, sume):
    jobs = table(aws)
    clock = Clock(T0)
    register(aws, clock, "job_waiting", sume.job_url("job_waiting"))
    for job_id in ("job_done", "job_owed"):
        event = parse(json.dumps(job_body(job_id)).encode())
        jobs.record(event, Source.WEBHOOK, T0, sweep_at=T0 + 120)  # type: ignore[arg-type]
    claimed = jobs.claim("job_done", T0 + 1, lease_seconds=300)
    assert jobs.finish(
        "job_done",
        str(claimed.claim_id),
        State.PROCESSED,
        T0 + 2,
        T0 + 10**6,
        {},
        window_at=claimed.unreported_at(),
    )
    clients.client("dynamodb").put_item(
        TableName=aws.table, Item={"job_id": {"S": "job_plain"}, "state": {"S": "processed"}}
    )
    assert indexed_job_ids(aws) == {"job_waiting", "job_owed"}

    clock.now = T0 + 10**4
    with CallCounter().installed() as calls:
        runtime.reset()  # the poller's clients are made in the block, so counted
        summary = make_poller(clock).run(lambda: FOREVER)
    assert (summary.polled, summary.swept) == (1, 1)
    assert calls.calls.count("dynamodb.Query") == SHARDS
    assert calls.calls.count("dynamodb.Scan") == 0


# -- deadlines and faults that must not stop a run ------------------------------------
# Short function timeouts (set per test) stand in for the stack's 120 s; the
# bounds checked are "before the function's deadline", never a speed claim.


@pytest.fixture
def short_polls(monkeypatch):
    monkeypatch.setenv("HTTP_TOTAL_TIMEOUT_SECONDS", "0.6")
    monkeypatch.setenv("TIME_BUDGET_MARGIN_SECONDS", "1")


def test_a_slow_status_host_stalls_neither_the_run_nor_the_other_polls(aws, sume, short_polls):
    now = time.time()
    quick = [f"job_quick_{i}" for i in range(4)]
    for job_id in quick:
        register(aws, Clock(now - 1000), job_id, sume.job_url(job_id))
        sume.answer(job_id, {"status": "running"})
    register(aws, Clock(now - 1000), "job_trickle", sume.job_url("job_trickle"))
    # Headers at once, then a byte every 0.1 s: no single read ever times out
    # (reads wait at least 1 s), and the answer would take 30 s.
    sume.route("/v1/jobs/job_trickle", body=lambda: itertools.repeat(b" ", 300), interval=0.1)
    context = LambdaContext(timeout_seconds=20)

    summary = poller_round(context=lambda: context)

    assert context.get_remaining_time_in_millis() > 0
    assert (summary["polled"], summary["rescheduled"], summary["complete"]) == (5, 5, True)
    assert [sume.polls_of(j) for j in quick] == [1] * 4
    slow = table(aws).get("job_trickle")
    assert slow is not None
    assert (slow.state, slow.poll_attempts) == (State.AWAITING, 1)


def test_a_host_that_never_answers_is_lost_at_the_cut_off(aws, sume, short_polls, monkeypatch):
    monkeypatch.setenv("MAX_POLL_AGE_SECONDS", "900")
    register(aws, Clock(time.time() - 900), "job_mute", sume.job_url("job_mute"))
    # It sends its head a byte every 0.1 s: no read ever times out, and the
    # answer would never be complete within the function's time.
    head = [b"HTTP/1.0 200 OK\r\n", b"x-wait: "]
    sume.route(
        "/v1/jobs/job_mute",
        body=lambda: itertools.chain(head, itertools.repeat(b"z", 300)),
        interval=0.1,
        raw=True,
    )
    context = LambdaContext(timeout_seconds=20)

    summary = poller_round(context=lambda: context)

    assert context.get_remaining_time_in_millis() > 0
    assert (summary["polled"], summary["lost"]) == (1, 1)
    item = table(aws).get("job_mute")
    assert item is not None
    assert item.state == State.LOST


def one_job_per_shard(prefix: str) -> list[str]:
    by_shard: dict[int, str] = {}
    for i in itertools.count():
        job_id = f"{prefix}_{i}"
        by_shard.setdefault(due_shard(job_id, SHARDS), job_id)
        if len(by_shard) == SHARDS:
            return [by_shard[s] for s in range(SHARDS)]
    raise AssertionError("unreachable")


def test_a_poll_configuration_error_does_not_stop_the_sweeps(aws, sume, monkeypatch, capsys, logs):
    # An empty token secret is the operator's fault, met inside one poll.
    secret = clients.client("secretsmanager").create_secret(Name="sume-api-token", SecretString=" ")
    monkeypatch.setenv("SUME_API_TOKEN_ARN", secret["ARN"])
    # The token is only read for a listed host.
    monkeypatch.setenv("STATUS_ALLOWED_HOSTS", "127.0.0.1")
    # The run starts at the polled job's shard, so every sweep comes after it.
    shard = due_shard("job_cfg", SHARDS)
    now = int(time.time())
    now -= (now - shard) % SHARDS
    register(aws, Clock(now - 1000), "job_cfg", sume.job_url("job_cfg"))
    due = due_at(aws, "job_cfg")
    owed = one_job_per_shard("job_owed")
    for job_id in owed:
        event = parse(json.dumps(job_body(job_id)).encode())
        table(aws).record(event, Source.WEBHOOK, now - 200, sweep_at=now - 100)  # type: ignore[arg-type]

    summary = make_poller(Clock(now)).run(lambda: FOREVER)

    assert (summary.configuration_errors, summary.errors, summary.polled) == (1, 0, 0)
    assert (summary.swept, summary.complete) == (SHARDS, True)
    assert sorted(drain_queue(aws)) == sorted(owed)
    assert sume.polls_of("job_cfg") == 0
    assert due_at(aws, "job_cfg") == due  # asked again next run

    result = poller_round(60)
    assert (result["configuration_errors"], result["swept"]) == (1, 0)
    errors = logs.lines("ERROR")
    assert [e["job_id"] for e in errors] == ["job_cfg", "job_cfg"]
    assert all("configuration error" in e["message"] for e in errors)
    # PollerConfigurationErrors is the metric the stack alarms on.
    assert round_metrics(capsys)["PollerConfigurationErrors"] == 1


def test_status_url_secrets_stay_out_of_the_logs(aws, sume, short_polls, logs):
    now = time.time()
    secret = "?token=s3cr3t"
    sume.route("/v1/jobs/job_busy" + secret, status=503)
    sume.route("/v1/jobs/job_denied" + secret, status=403)
    sume.redirect("/v1/jobs/job_hop" + secret, "http://169.254.169.254/latest" + secret)
    for job_id in ("job_busy", "job_denied", "job_hop"):
        register(aws, Clock(now - 1000), job_id, sume.job_url(job_id) + secret)

    summary = poller_round(30)

    assert summary["polled"] == 3
    assert [line["message"] for line in logs.lines()].count("status poll failed") == 3
    assert "s3cr3t" not in logs.text


def test_a_paused_workers_owed_jobs_are_held_not_queued_again_every_round(aws, sume, monkeypatch):
    # The worker's mapping as AWS keeps it; the sweeper asks it before it sweeps.
    switches.install()
    turned = create_switches(clients.client, aws, "sweep-held")
    monkeypatch.setenv(Env.WORKER_EVENT_SOURCE_MAPPING, turned.worker)
    lambda_ = clients.client("lambda")
    lambda_.update_event_source_mapping(UUID=turned.worker, Enabled=False)
    jobs = table(aws)
    event = parse(json.dumps(job_body("job_held")).encode())
    assert jobs.record(event, Source.WEBHOOK, T0, sweep_at=T0 + 120).new  # type: ignore[arg-type]
    clock = Clock(T0 + 120)
    run = make_poller(clock)
    # Round after round while paused: owed, held, never queued again.
    for later in (0, 600, 3600):
        clock.now = T0 + 120 + later
        summary = run.run(lambda: FOREVER)
        assert (summary.swept, summary.held) == (0, 1)
    assert drain_queue(aws) == []
    item = jobs.get("job_held")
    assert item is not None and (item.due_at, item.sweeps) == (T0 + 120, None)

    # Resumed: the next round sweeps it, once.
    lambda_.update_event_source_mapping(UUID=turned.worker, Enabled=True)
    clock.now = T0 + 4000
    assert (run.run(lambda: FOREVER).swept, run.run(lambda: FOREVER).swept) == (1, 0)
    assert drain_queue(aws) == ["job_held"]


def test_a_switch_that_cannot_be_read_holds_nothing(aws, sume, monkeypatch):
    # No such mapping (or no permission): the sweep is the safety net, it sweeps.
    monkeypatch.setenv(Env.WORKER_EVENT_SOURCE_MAPPING, "00000000-0000-0000-0000-000000000000")
    jobs = table(aws)
    event = parse(json.dumps(job_body("job_swept_anyway")).encode())
    assert jobs.record(event, Source.WEBHOOK, T0, sweep_at=T0 + 120).new  # type: ignore[arg-type]
    summary = make_poller(Clock(T0 + 120)).run(lambda: FOREVER)
    assert (summary.swept, summary.held) == (1, 0)
    assert drain_queue(aws) == ["job_swept_anyway"]
