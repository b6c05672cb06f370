"""``sume-webhooks replay --since``: a window's ended jobs by filter, the CLI over moto's server.

The jobs are brought to their endings by the table's own transitions, as the
worker writes them (tests/integration/test_report.py's helpers); what each
command finds, writes and queues is compared with the items and the queue.
"""

from __future__ import annotations

import json
import shlex
from typing import Any

import boto3
import pytest

from devstack.counting import CallCounter
from sume.store.job import State
from sume.store.jobs import JobsTable
from sume.store.queue import JobQueue
from sume_cli import replaying
from sume_cli.context import local_sweep_after
from sume_cli.replaying import run_id
from sume_cli.times import iso
from tests.builders import SECRET
from tests.integration import test_report as reported
from tests.integration.conftest import served_resources
from tests.integration.test_report import HOUR, NOW, finish, lose, record, register

# The report's moto world: a fresh local stack's resources, and the CLI over it.
cli, endpoint, names, table = reported.cli, reported.endpoint, reported.names, reported.table

ENTERED = NOW - HOUR
OUTAGE = ("job_out_a", "job_out_b", "job_out_c", "job_out_failed")
REASON = "origin outage"
SELECT = ("--since", "3h", "--state", "processing_error", "--error-code", "http_503")
# The most the CLI allows: at the default two a second each run would sleep out its pace.
FAST = ("--rate", "20")


def gave_up(table: JobsTable, job_id: str, at: int, last_code: str) -> None:
    """End the job as the worker does after its origin kept failing: released, then given up."""
    claimed = table.claim(job_id, at, lease_seconds=300)
    error = {"code": last_code, "message": f"origin said {last_code}"}
    assert table.release(job_id, str(claimed.claim_id), at, error, due_at=at + 1)
    claimed = table.claim(job_id, at + 2, lease_seconds=300)
    problem = {"code": "too_many_attempts", "message": f"gave up; last error: {last_code}"}
    event = claimed.event or ""
    details: dict[str, Any] = {"outcome": event.removeprefix("job."), "processing_error": problem}
    assert table.finish(
        job_id,
        str(claimed.claim_id),
        State.PROCESSING_ERROR,
        at + 3,
        at + 35 * 86400,
        details,
        window_at=claimed.unreported_at(),
    )


def failed_for_good(table: JobsTable, job_id: str, at: int, code: str) -> None:
    claimed = table.claim(job_id, at, lease_seconds=300)
    details = {"outcome": "completed", "processing_error": {"code": code, "message": code}}
    assert table.finish(
        job_id,
        str(claimed.claim_id),
        State.PROCESSING_ERROR,
        at + 1,
        at + 35 * 86400,
        details,
        window_at=claimed.unreported_at(),
    )


@pytest.fixture
def outage(table: JobsTable) -> JobsTable:
    return an_outage(table)


def an_outage(table: JobsTable) -> JobsTable:
    """An origin that answered 503 for an hour, and the jobs around it."""
    for offset, job_id in enumerate(OUTAGE):
        event = "job.failed" if job_id == "job_out_failed" else "job.completed"
        record(table, job_id, ENTERED + offset, event)
        gave_up(table, job_id, ENTERED + offset + 5, "http_503")
    record(table, "job_gone_404", ENTERED + 10)
    failed_for_good(table, "job_gone_404", ENTERED + 15, "http_404")
    record(table, "job_fine", ENTERED + 20)
    finish(table, "job_fine", ENTERED + 25)
    # Retried past one 503, then processed: its last_error is no reason to replay it.
    record(table, "job_fixed_by_retry", ENTERED + 30)
    claimed = table.claim("job_fixed_by_retry", ENTERED + 31, lease_seconds=300)
    error = {"code": "http_503", "message": "once"}
    assert table.release(
        "job_fixed_by_retry", str(claimed.claim_id), ENTERED + 31, error, due_at=ENTERED + 32
    )
    finish(table, "job_fixed_by_retry", ENTERED + 35)
    record(table, "job_before", NOW - 5 * HOUR)
    gave_up(table, "job_before", NOW - 5 * HOUR + 5, "http_503")
    register(table, "job_lost", ENTERED)
    lose(table, "job_lost", ENTERED + 900)
    record(table, "job_still_owed", ENTERED + 40)
    return table


def queued(endpoint: str) -> list[str]:
    sqs = boto3.client("sqs", endpoint_url=endpoint)
    url = sqs.get_queue_url(QueueName="sume-local-jobs")["QueueUrl"]
    bodies: list[str] = []
    while messages := sqs.receive_message(
        QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=300
    ).get("Messages"):
        bodies += [m["Body"] for m in messages]
    return sorted(bodies)


def snapshot(table: JobsTable) -> dict[str, Any]:
    names = (*OUTAGE, "job_gone_404", "job_fine", "job_fixed_by_retry", "job_before", "job_lost")
    return {job_id: table.get(job_id) for job_id in names}


def test_a_dry_run_names_exactly_the_jobs_and_why_and_writes_nothing(cli, outage, endpoint):
    before = snapshot(outage)
    with CallCounter().installed() as counter:
        code, out, err = cli("replay", *SELECT, "--reason", REASON, "--dry-run")
    assert code == 0, err
    rows = [line.split(None, 3) for line in out.splitlines()[1 : 1 + len(OUTAGE)]]
    assert [row[0] for row in rows] == list(OUTAGE)
    assert {row[3] for row in rows} == {"state=processing_error, error_code=http_503 (last_error)"}
    assert f"dry run: 4 job(s) to replay as {run_id(REASON)} ('origin outage')" in out
    assert "nothing replayed" in out
    assert "no Scan" in err
    assert not any(call.endswith(".Scan") for call in counter.calls)
    assert not any(call.endswith((".UpdateItem", ".SendMessage")) for call in counter.calls)
    assert snapshot(outage) == before
    assert queued(endpoint) == []

    code, out, _ = cli("replay", *SELECT, "--reason", REASON, "--dry-run", "--output", "json")
    plan = json.loads(out)
    assert (code, plan["dry_run"], plan["matched"]) == (0, True, 4)
    assert [job["job_id"] for job in plan["jobs"]] == list(OUTAGE)
    assert plan["jobs"][0] == {
        "job_id": "job_out_a",
        "state": "processing_error",
        "entered": iso(ENTERED),
        "why": ["state=processing_error", "error_code=http_503 (last_error)"],
    }
    assert plan["already_replayed"] == []
    # Every ended job whose entry is in the 3 h: the outage's, the 404, the two
    # processed ones and the lost one; not the one before, not the one still owed.
    assert plan["ended_in_window"] == 8
    assert plan["run"] == run_id(REASON)


def test_the_replay_audits_each_job_once_and_a_second_run_replays_none(cli, outage, endpoint):
    before = {job_id: outage.get(job_id) for job_id in OUTAGE}
    code, out, err = cli("replay", *SELECT, *FAST, "--reason", REASON, "--output", "json")
    assert code == 0, err
    result = json.loads(out)
    assert result["replayed"] == list(OUTAGE)
    assert (result["already_replayed"], result["refused"], result["complete"]) == ([], {}, True)
    assert "replayed 4/4 (already 0, refused 0)" in err
    assert queued(endpoint) == sorted(OUTAGE)
    for job_id, old in before.items():
        job = outage.get(job_id)
        assert job is not None and old is not None
        assert (job.state, job.replay, job.attempts) == (State.RECEIVED, True, 0)
        assert (job.replays, job.replay_reason, job.replay_runs) == (1, REASON, [run_id(REASON)])
        assert job.replayed_at is not None and job.replayed_at >= NOW
        # Owed at the local stack's sweep delay, should the send have failed.
        assert job.due_at == job.replayed_at + local_sweep_after().seconds
        # A new announcement number: the replay's ending is announced as a new one.
        assert job.sequence == (old.sequence or 0) + 1
    assert outage.get("job_gone_404").replays is None

    # The origin is still down: the replays end as before. The same run again
    # replays none of them; a new reason is a new run.
    for job_id in OUTAGE:
        gave_up(outage, job_id, NOW, "http_503")
    code, out, err = cli("replay", *SELECT, "--reason", REASON, "--dry-run")
    assert code == 0, err
    assert "dry run: 0 job(s) to replay" in out
    assert f"already replayed by this run (skipped): {', '.join(OUTAGE)}" in out
    code, out, err = cli("replay", *SELECT, *FAST, "--reason", REASON)
    assert code == 0, err
    assert "replayed 0 job(s)" in out and "already replayed by this run: 4; refused: 0" in out
    assert queued(endpoint) == []
    assert {outage.get(job_id).replays for job_id in OUTAGE} == {1}

    code, out, err = cli("replay", *SELECT, *FAST, "--reason", "origin outage, second try")
    assert code == 0, err
    assert queued(endpoint) == sorted(OUTAGE)
    job = outage.get("job_out_a")
    assert job is not None and job.replays == 2
    assert job.replay_runs == sorted([run_id(REASON), run_id("origin outage, second try")])


def interrupted(after: int) -> Any:
    """A pace's ``wait`` that is Ctrl-C at its ``after``-th call (before that job's write)."""
    waits: list[None] = []

    def wait(pace: replaying.Pace) -> None:
        waits.append(None)
        if len(waits) == after:
            raise KeyboardInterrupt

    return wait


def test_an_interrupted_run_continues_where_it_stopped(cli, outage, endpoint, monkeypatch):
    with monkeypatch.context() as patched:
        patched.setattr(replaying.Pace, "wait", interrupted(3))
        code, out, err = cli("replay", *SELECT, *FAST, "--reason", REASON, "--output", "json")
    assert code == 130
    partial = json.loads(out)
    assert (partial["replayed"], partial["complete"]) == (["job_out_a", "job_out_b"], False)
    hint = next(line for line in err.splitlines() if line.startswith("stopped after 2 of 4"))
    again = shlex.split(hint.partition("to continue, run ")[2])
    assert again[:3] == ["sume-webhooks", "--endpoint-url", endpoint]
    assert partial["command"] == again
    assert again[again.index("--since") + 1].endswith("Z")
    assert queued(endpoint) == ["job_out_a", "job_out_b"]

    code, out, err = cli(*again[3:], "--output", "json")
    assert code == 0, err
    assert json.loads(out)["replayed"] == ["job_out_c", "job_out_failed"]
    assert queued(endpoint) == ["job_out_c", "job_out_failed"]
    assert {outage.get(job_id).replays for job_id in OUTAGE} == {1}


def test_a_send_lost_after_the_write_leaves_the_job_to_the_sweeper_and_is_not_redone(
    cli, outage, endpoint, monkeypatch
):
    sends: list[str] = []

    def send_then_die(queue: Any, job_id: str) -> None:
        sends.append(job_id)
        if len(sends) == 2:
            raise KeyboardInterrupt
        original(queue, job_id)

    original = JobQueue.send
    with monkeypatch.context() as patched:
        patched.setattr(JobQueue, "send", send_then_die)
        code, _, err = cli("replay", *SELECT, *FAST, "--reason", REASON)
    assert code == 130
    # Counted, and named: replayed, owed, not queued.
    assert "stopped after 2 of 4 (job_out_b replayed but not queued: " in err
    lost = outage.get("job_out_b")
    assert lost is not None and lost.state == State.RECEIVED and lost.replays == 1
    # Owed, in the due-work index: the sweeper queues it when its due time comes.
    assert (
        lost.due_shard is not None and lost.due_at == lost.replayed_at + local_sweep_after().seconds
    )

    code, out, err = cli("replay", *SELECT, *FAST, "--reason", REASON, "--output", "json")
    assert code == 0, err
    assert json.loads(out)["replayed"] == ["job_out_c", "job_out_failed"]
    assert queued(endpoint) == ["job_out_a", "job_out_c", "job_out_failed"]
    assert {outage.get(job_id).replays for job_id in OUTAGE} == {1}


def test_a_write_refused_after_the_plan_is_counted_and_exits_3(cli, outage, endpoint, monkeypatch):
    planned = replaying.plan

    def plan_then_race(*args: Any) -> replaying.Plan:
        found = planned(*args)
        # Between the read and the writes: an operator replays one job by id,
        # and another copy of this same run replays a second one, which the
        # worker ends in error again (the origin still down) before our write:
        # only the write's condition knows this run replayed it.
        assert outage.request_replay("job_out_b", NOW, NOW + 60, "by hand")
        assert outage.request_replay("job_out_c", NOW, NOW + 60, REASON, run_id(REASON))
        gave_up(outage, "job_out_c", NOW, "http_503")
        return found

    monkeypatch.setattr("sume_cli.commands.replay.plan", plan_then_race)
    code, out, err = cli("replay", *SELECT, *FAST, "--reason", REASON, "--output", "json")
    assert code == 3, err
    result = json.loads(out)
    assert result["replayed"] == ["job_out_a", "job_out_failed"]
    assert result["already_replayed"] == ["job_out_c"]
    assert result["refused"] == {"job_out_b": "received"}
    assert "replayed 2/4 (already 1, refused 1)" in err
    assert queued(endpoint) == ["job_out_a", "job_out_failed"]
    by_hand = outage.get("job_out_b")
    assert by_hand is not None
    assert (by_hand.replays, by_hand.replay_reason, by_hand.replay_runs) == (1, "by hand", None)
    raced = outage.get("job_out_c")
    assert raced is not None and (raced.state, raced.replays) == (State.PROCESSING_ERROR, 1)

    monkeypatch.undo()
    code, out, _ = cli("replay", *SELECT, *FAST, "--reason", REASON)
    assert code == 0
    assert "refused: 1" not in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--since", "3h"], "--reason is required with --since"),
        (["--since", "3h", "--reason", "  "], "--reason is required with --since"),
        (["job_x", "--since", "3h", "--reason", "r"], "either JOB_ID or --since"),
        (["job_x", "--state", "processed"], "--state needs --since (a window), not JOB_ID"),
        (["--dry-run", "--reason", "r"], "--dry-run needs --since"),
        ([], "replay what? pass JOB_ID, or --since"),
        (["--since", "3h", "--reason", "r", "--rate", "0"], "--rate 0: more than 0"),
        (["--since", "3h", "--reason", "r", "--rate", "21"], "at most 20 a second"),
        (["--since", "1h", "--until", "2h", "--reason", "r"], "is before --since"),
        (["--since", "2099-01-01T00:00:00Z", "--reason", "r"], "is in the future"),
        (["--since", "400d", "--reason", "r"], "at most 366 days"),
        (["--since", "yesterday", "--reason", "r"], "--since 'yesterday'"),
        (["--since", "3h", "--reason", "é" * 257], "--reason: at most 512 bytes"),
    ],
)
def test_usage_errors_exit_2_before_any_call(cli, argv, message):
    with CallCounter().installed() as counter:
        code, _, err = cli("replay", *argv)
    assert code == 2
    assert message in err
    assert counter.calls == []


def test_the_printed_command_replays_the_deployment_that_printed_it(cli, outage, endpoint):
    # A second deployment on the same endpoint, with the same outage: only --prefix,
    # which the printed command once dropped, tells the two apart.
    names = served_resources(endpoint, prefix="sume-other", signing_secret=SECRET)
    other = an_outage(JobsTable(boto3.client("dynamodb", endpoint_url=endpoint), names.table, 16))
    chosen = ["--prefix", "sume-other", "--region", "us-east-1", "--shards", "16"]
    code, out, err = cli(*chosen, "replay", *SELECT, "--reason", REASON, "--dry-run")
    assert code == 0, err
    line = next(line for line in out.splitlines() if line.startswith("to replay them: "))
    argv = shlex.split(line.partition(": ")[2])
    assert argv[:9] == ["sume-webhooks", "--endpoint-url", endpoint, *chosen]
    code, out, err = cli(*argv[3:], *FAST, "--output", "json")
    assert code == 0, err
    assert json.loads(out)["replayed"] == list(OUTAGE)
    assert {getattr(other.get(job_id), "replays", None) for job_id in OUTAGE} == {1}
    assert {getattr(outage.get(job_id), "replays", None) for job_id in OUTAGE} == {None}
    assert queued(endpoint) == []
