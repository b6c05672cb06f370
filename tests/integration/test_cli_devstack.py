"""The ops CLI against the local stack: the real receiver, worker and queue behind HTTP."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from devstack.settings import DevStackSettings
from devstack.stack import DevStack
from sume.core import runtime
from sume.core.names import Env, due_shard
from sume_cli.main import main
from sume_cli.times import iso
from tests.builders import registration_entry
from tests.integration.conftest import LOCAL_SECRET, SharedStack, stop_shared_stacks

SECRET = LOCAL_SECRET


@pytest.fixture
def stack(shared_stack: SharedStack) -> DevStack:
    """The module's stack: each test's jobs are its own."""
    return shared_stack.get()


@pytest.fixture
def deployed_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str, str], None]]:
    """Sets a function setting as a deploy does: new containers read it. The stack's own
    comes back after the test, in new containers too."""

    def deploy(key: str, value: str) -> None:
        monkeypatch.setenv(key, value)
        runtime.reset()

    yield deploy
    monkeypatch.undo()
    runtime.reset()


def cli(stack: DevStack, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["--endpoint-url", stack.endpoint_url, "--prefix", stack.prefix, *argv])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return code, captured.out


def wait_for_state(stack: DevStack, capsys, job_id: str, states: set[str]) -> dict:
    """Until the worker has moved the job on, then what ``status --json`` says of it.

    Polled in the table: a CLI run finds the stack's resources first, a dozen calls a
    poll. pytest's timeout bounds a hang.
    """
    jobs = stack.jobs()
    while (job := jobs.get(job_id)) is None or job.state not in states or job.replay:
        time.sleep(0.05)
    code, out = cli(stack, capsys, "status", job_id, "--json")
    assert code == 0
    story = json.loads(out)
    assert story["state"] in states and "replay" not in story
    return story


def test_send_test_then_status_then_replay_on_the_local_stack(stack, capsys):
    # The secret comes from the local stack's Secrets Manager, found by name.
    code, out = cli(stack, capsys, "send-test", stack.url, "--job", "job_cli_local")
    assert code == 0, out
    lines = out.splitlines()
    assert json.loads(lines[0].split(" -> 200 ", 1)[1])["result"] == "test"
    assert json.loads(lines[1].split(" -> 200 ", 1)[1]) == {
        "result": "new",
        "job_id": "job_cli_local",
    }

    story = wait_for_state(stack, capsys, "job_cli_local", {"processed"})
    assert story["source"] == "webhook"
    assert story["deliveries"] == 1
    assert story["outcome"] == "completed"
    first_processed = story["processed_at"]

    code, out = cli(stack, capsys, "status", "job_cli_local")
    assert code == 0
    assert "processed (follow-up work done)" in out

    code, out = cli(stack, capsys, "replay", "job_cli_local")
    assert code == 0
    story = wait_for_state(stack, capsys, "job_cli_local", {"processed"})
    assert "replay" not in story
    assert (story["attempts"], story["replays"]) == (1, 1)  # a fresh budget per replay
    assert story["processed_at"] >= first_processed

    code, out = cli(stack, capsys, "send-test", stack.url, "--secret", "whsec_wrong")
    assert code == 3
    assert "401" in out and "signature_mismatch" in out


def test_a_job_lost_before_lost_jobs_were_announced_is_announced_once(stack, capsys):
    assert stack.names is not None
    jobs = stack.jobs()
    now = int(time.time())
    url = "http://127.0.0.1:8081/jobs/job_cli_old_lost"
    assert jobs.register("job_cli_old_lost", url, None, now - 7200, now - 6300)
    assert jobs.mark_lost("job_cli_old_lost", now - 3600, now, window_at=now - 7200)
    # As the poller of then left it: out of the due-work index, no sequence, never announced.
    stack.client("dynamodb").update_item(
        TableName=stack.names.table,
        Key={"job_id": {"S": "job_cli_old_lost"}},
        UpdateExpression="REMOVE due_at, due_shard, #sequence",
        ExpressionAttributeNames={"#sequence": "sequence"},
    )
    old = jobs.get("job_cli_old_lost")

    # Hours, not the default 35 days: the index is read one Query per day and bucket.
    window = ("--since", "3h")
    code, out = cli(stack, capsys, "announce-owed", *window, "--dry-run", "--output", "json")
    assert code == 0
    assert json.loads(out) == {
        "dry_run": True,
        "owed": [{"job_id": "job_cli_old_lost", "lost_at": iso(now - 3600)}],
        "queued": [],
    }
    assert jobs.get("job_cli_old_lost") == old

    code, out = cli(stack, capsys, "announce-owed", *window)
    assert code == 0
    assert out.splitlines()[1].split() == ["job_cli_old_lost", iso(now - 3600), "yes"]
    while jobs.get("job_cli_old_lost").due_at is not None:  # the worker announces, then finishes
        time.sleep(0.05)
    story = jobs.get("job_cli_old_lost")
    assert (story.state, story.sequence) == ("lost", 1)

    code, out = cli(stack, capsys, "announce-owed", *window, "--output", "json")
    assert (code, json.loads(out)) == (0, {"dry_run": False, "owed": [], "queued": []})
    # Every announcement the bus delivered is counted once the journal's queue is drained.
    assert stack.journal_queue_url
    while stack.queue_depth(stack.journal_queue_url):
        time.sleep(0.05)
    lost = [a for a in stack.announcements if a["detail"].get("job_id") == "job_cli_old_lost"]
    assert [(a["detail-type"], a["detail"]["sequence"]) for a in lost] == [("Sume Job Lost", 1)]


def test_a_refused_registration_is_put_right_by_fixing_the_cause_and_redriving(
    stack, capsys, deployed_env
):
    # The poller's list of status hosts lacks the event's host.
    deployed_env(Env.STATUS_ALLOWED_HOSTS, "api.sume.example")
    status_url = "https://status.sume.example/v1/jobs/job_cli_reg"
    assert stack.names is not None
    refused = stack.journal.count("refused")
    entry = registration_entry(
        stack.names.event_bus, {"job_id": "job_cli_reg", "status_url": status_url}
    )
    assert stack.client("events").put_events(Entries=[entry])["FailedEntryCount"] == 0
    while stack.journal.count("refused") == refused:
        time.sleep(0.05)

    code, out = cli(stack, capsys, "dlq", "peek", "--registrations", "--json")
    assert code == 0
    (parked,) = json.loads(out)
    assert (parked["job_id"], parked["reason"]) == ("job_cli_reg", "refused_host")
    assert "'status.sume.example' is not on STATUS_ALLOWED_HOSTS" in parked["message"]
    code, _ = cli(stack, capsys, "status", "job_cli_reg")
    assert code == 1

    # The fix, as a redeploy makes it: new poller containers read the longer list.
    deployed_env(Env.STATUS_ALLOWED_HOSTS, "api.sume.example,status.sume.example")
    code, out = cli(stack, capsys, "dlq", "redrive", "--registrations")
    assert code == 0
    assert "moved 1 message(s) back to the registrations queue" in out

    story = wait_for_state(stack, capsys, "job_cli_reg", {"awaiting"})
    assert story["status_url"] == status_url
    code, out = cli(stack, capsys, "dlq", "peek", "--registrations")
    assert (code, out.strip()) == (0, "the registrations DLQ is empty")


def test_the_local_stack_tells_the_cli_its_webhook_url_and_shard_count(monkeypatch, capsys):
    stop_shared_stacks()  # one local stack per process; this one starts on 8 shards
    monkeypatch.delenv("SUME_COM_WEBHOOK_SIGNING_SECRET", raising=False)
    settings = DevStackSettings(
        port=0, moto_port=0, signing_secret=SECRET, poller=False, lambda_env={Env.DUE_SHARDS: "8"}
    )
    with DevStack(settings) as stack:
        # No URL: the local stack's, as --stage finds the stage's WebhookUrl output.
        code, out = cli(stack, capsys, "send-test", "--job", "job_cli_no_url")
        assert code == 0, out
        assert out.startswith("webhook.test -> 200")

        # An operator's shell, not the one running the stack: no DUE_SHARDS there.
        job_id = next(f"job_sh{i}" for i in range(100) if due_shard(f"job_sh{i}", 16) >= 8)
        shell = {k: v for k, v in os.environ.items() if k != Env.DUE_SHARDS}
        script = Path(sys.executable).parent / "sume-webhooks"
        where = ["--endpoint-url", stack.endpoint_url, "--prefix", stack.prefix]
        result = subprocess.run(
            [str(script), *where, "expect", job_id, f"http://127.0.0.1:8081/jobs/{job_id}"],
            env=shell,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert result.returncode == 0, result.stderr
        code, out = cli(stack, capsys, "status", job_id, "--json")
        assert json.loads(out)["due_shard"] == due_shard(job_id, 8)
