"""The edges of ``replay`` (by id and by window) and of a window's bounds: a write whose
answer was lost, a job that stopped matching between the plan and its write, adjacent
windows, a stop between a write and its send, the stack's sweep delay. The CLI over
moto's server, as tests/integration/test_replay_window.py.
"""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest

from sume.core.names import Env
from sume.store.job import State
from sume.store.jobs import JobsTable
from sume.store.queue import JobQueue
from sume_cli.main import main
from sume_cli.times import iso
from tests.awscalls import hooking_new_clients
from tests.integration import test_replay_window as windowed
from tests.integration import test_report as reported
from tests.integration.test_cli import deploy_poller
from tests.integration.test_replay_window import (
    ENTERED,
    FAST,
    OUTAGE,
    REASON,
    SELECT,
    an_outage,
    gave_up,
    queued,
)
from tests.integration.test_report import HOUR, NOW, finish, record

cli, endpoint, names, table = reported.cli, reported.endpoint, reported.names, reported.table
outage = windowed.outage


def retry_the_landed_update(attempts: int, response: Any, **_: Any) -> float | None:
    # As when the answer to a write that landed is lost: botocore sends it again.
    return 0 if attempts == 1 and response is not None else None


def lost_answers() -> Any:
    """Every UpdateItem of the clients made inside: its first answer lost, then resent."""
    return hooking_new_clients(
        lambda client: client.meta.events.register(
            "needs-retry.dynamodb.UpdateItem", retry_the_landed_update
        )
    )


def test_a_replay_whose_answer_was_lost_is_its_own_write_and_is_queued(cli, outage, endpoint):
    with lost_answers():
        code, out, err = cli("replay", "job_out_a", "--reason", "origin back")
    assert code == 0, err
    assert "replay queued for job_out_a" in out
    assert queued(endpoint) == ["job_out_a"]
    job = outage.get("job_out_a")
    assert job is not None and (job.state, job.replays) == (State.RECEIVED, 1)
    # Its own write, once: a second replay by id is refused as ever (it is owed).
    code, _, err = cli("replay", "job_out_a")
    assert code == 1
    assert "is received: only processed or processing_error" in err


def test_a_window_replay_whose_answer_was_lost_is_replayed_and_queued(cli, outage, endpoint):
    with lost_answers():
        code, out, err = cli("replay", *SELECT, *FAST, "--reason", REASON, "--output", "json")
    assert code == 0, err
    result = json.loads(out)
    assert (result["replayed"], result["already_replayed"]) == (list(OUTAGE), [])
    assert queued(endpoint) == sorted(OUTAGE)
    assert {outage.get(job_id).replays for job_id in OUTAGE} == {1}


def test_a_job_that_stopped_matching_after_the_plan_is_not_replayed_again(
    cli, outage, endpoint, monkeypatch
):
    planned = windowed.replaying.plan

    def plan_then_fix_one(*args: Any) -> Any:
        found = planned(*args)
        # Between the read and the writes: an operator replays one job by id and the
        # worker processes it; another, replayed by id too, fails again with a 404.
        assert outage.request_replay("job_out_b", NOW, NOW + 60, "by hand")
        finish(outage, "job_out_b", NOW + 1)
        assert outage.request_replay("job_out_c", NOW, NOW + 60, "by hand")
        windowed.failed_for_good(outage, "job_out_c", NOW + 2, "http_404")
        return found

    monkeypatch.setattr("sume_cli.commands.replay.plan", plan_then_fix_one)
    code, out, err = cli("replay", *SELECT, *FAST, "--reason", REASON, "--output", "json")
    assert code == 3, err
    result = json.loads(out)
    assert result["replayed"] == ["job_out_a", "job_out_failed"]
    assert result["refused"] == {"job_out_b": "processed", "job_out_c": "processing_error"}
    assert queued(endpoint) == ["job_out_a", "job_out_failed"]
    for job_id, state in (("job_out_b", State.PROCESSED), ("job_out_c", State.PROCESSING_ERROR)):
        job = outage.get(job_id)
        assert job is not None and (job.state, job.replays, job.replay_runs) == (state, 1, None)
    monkeypatch.undo()
    code, out, _ = cli("replay", *SELECT, *FAST, "--reason", REASON)
    assert "no longer matches" not in out
    code, out, _ = cli("replay", *SELECT, "--reason", "another", "--dry-run", "--output", "json")
    assert [job["job_id"] for job in json.loads(out)["jobs"]] == []


def test_the_refusal_says_the_job_no_longer_matches(cli, outage, monkeypatch):
    planned = windowed.replaying.plan

    def plan_then_fix(*args: Any) -> Any:
        found = planned(*args)
        assert outage.request_replay("job_out_b", NOW, NOW + 60, "by hand")
        finish(outage, "job_out_b", NOW + 1)
        return found

    monkeypatch.setattr("sume_cli.commands.replay.plan", plan_then_fix)
    code, out, _ = cli("replay", *SELECT, *FAST, "--reason", REASON)
    assert code == 3
    assert "refused job_out_b: it is processed now, no longer matches the filters" in out


def test_adjacent_windows_share_no_second(cli, table, endpoint):
    edge = ENTERED
    for job_id, at in (
        ("job_before_edge", edge - 1),
        ("job_on_edge", edge),
        ("job_after", edge + 1),
    ):
        record(table, job_id, at)
        gave_up(table, job_id, at + 5, "http_503")
    first = ("--since", iso(edge - HOUR), "--until", iso(edge))
    second = ("--since", iso(edge), "--until", iso(edge + HOUR))
    plans = []
    for window in (first, second):
        code, out, err = cli("replay", *window, "--reason", REASON, "--dry-run", "--output", "json")
        assert code == 0, err
        plans.append([job["job_id"] for job in json.loads(out)["jobs"]])
    assert plans == [["job_before_edge"], ["job_on_edge", "job_after"]]
    # The report says the same of its window: since included, until not.
    code, out, _ = cli("report", "--since", iso(edge), "--output", "json")
    assert json.loads(out)["processing_error"]["job_ids"] == ["job_on_edge", "job_after"]


def test_a_malformed_until_is_named_as_until(cli):
    code, _, err = cli("replay", "--since", "3h", "--until", "later", "--reason", "r")
    assert code == 2
    assert "--until 'later'" in err and "--since 'later'" not in err


def test_more_error_codes_than_a_condition_holds_is_a_usage_error(cli):
    codes = [word for n in range(41) for word in ("--error-code", f"http_{n}")]
    code, _, err = cli("replay", "--since", "3h", *codes, "--reason", "r")
    assert code == 2
    assert "--error-code: at most 40 codes" in err


def test_a_stop_between_a_write_and_its_send_is_counted_and_named(
    cli, outage, endpoint, monkeypatch
):
    sends: list[str] = []
    original = JobQueue.send

    def send_then_die(queue: Any, job_id: str) -> None:
        sends.append(job_id)
        if len(sends) == 2:
            raise KeyboardInterrupt
        original(queue, job_id)

    monkeypatch.setattr(JobQueue, "send", send_then_die)
    code, out, err = cli("replay", *SELECT, *FAST, "--reason", REASON, "--output", "json")
    assert code == 130
    result = json.loads(out)
    assert result["replayed"] == ["job_out_a", "job_out_b"]
    assert result["not_queued"] == ["job_out_b"]
    lost = outage.get("job_out_b")
    assert lost is not None and lost.due_at is not None
    line = next(line for line in err.splitlines() if line.startswith("stopped after "))
    assert line.startswith(
        f"stopped after 2 of 4 (job_out_b replayed but not queued: the sweeper queues it "
        f"from {iso(lost.due_at)}): to continue, run "
    )


def test_a_replay_owes_its_work_at_the_stacks_sweep_delay(cli, outage, monkeypatch):
    # The local stack's SWEEP_AFTER_SECONDS, as `make run` reads it: not the default.
    monkeypatch.setenv(Env.SWEEP_AFTER_SECONDS, "45")
    assert cli("replay", "job_out_a", "--reason", "r")[0] == 0
    job = outage.get("job_out_a")
    assert job is not None and job.due_at == job.replayed_at + 45
    assert cli("replay", "--since", "3h", "--event", "job.failed", *FAST, "--reason", "r")[0] == 0
    job = outage.get("job_out_failed")
    assert job is not None and job.due_at == job.replayed_at + 45


@pytest.fixture
def stage(endpoint: str, names: Any, monkeypatch: pytest.MonkeyPatch) -> JobsTable:
    deploy_poller(endpoint, "qa", names, **{Env.SWEEP_AFTER_SECONDS: "300"})
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    return an_outage(JobsTable(boto3.client("dynamodb", endpoint_url=endpoint), names.table, 16))


def test_a_stage_replay_owes_its_work_at_its_pollers_sweep_delay(stage, capsys):
    assert main(["--stage", "qa", "replay", "job_out_a", "--reason", "r"]) == 0
    capsys.readouterr()
    job = stage.get("job_out_a")
    assert job is not None and job.due_at == job.replayed_at + 300
