"""The ops CLI against the local stack: the real receiver, worker and queue behind HTTP."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator

import pytest

from devstack.settings import DevStackSettings
from devstack.stack import DevStack
from sume.core import runtime
from sume.core.names import Env
from sume_cli.main import main
from tests.builders import registration_entry

SECRET = "whsec_cli_local"


@pytest.fixture
def stack(monkeypatch: pytest.MonkeyPatch) -> Iterator[DevStack]:
    monkeypatch.delenv("SUME_COM_WEBHOOK_SIGNING_SECRET", raising=False)
    settings = DevStackSettings(port=0, moto_port=0, signing_secret=SECRET, poller=False)
    with DevStack(settings) as running:
        yield running


def cli(stack: DevStack, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["--endpoint-url", stack.endpoint_url, "--prefix", stack.prefix, *argv])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return code, captured.out


def wait_for_state(stack: DevStack, capsys, job_id: str, states: set[str]) -> dict:
    """Until the worker has moved the job on; pytest's timeout bounds a hang."""
    while True:
        code, out = cli(stack, capsys, "status", job_id, "--json")
        story = json.loads(out) if code == 0 else {}
        if story.get("state") in states and "replay" not in story:
            return story
        time.sleep(0.1)


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


def test_a_refused_registration_is_put_right_by_fixing_the_cause_and_redriving(monkeypatch, capsys):
    monkeypatch.delenv("SUME_COM_WEBHOOK_SIGNING_SECRET", raising=False)
    settings = DevStackSettings(
        port=0,
        moto_port=0,
        signing_secret=SECRET,
        poller=False,
        lambda_env={Env.STATUS_ALLOWED_HOSTS: "api.sume.example"},
    )
    status_url = "https://status.sume.example/v1/jobs/job_cli_reg"
    with DevStack(settings) as stack:
        assert stack.names is not None
        entry = registration_entry(
            stack.names.event_bus, {"job_id": "job_cli_reg", "status_url": status_url}
        )
        assert stack.client("events").put_events(Entries=[entry])["FailedEntryCount"] == 0
        while not stack.journal.count("refused"):
            time.sleep(0.05)

        code, out = cli(stack, capsys, "dlq", "peek", "--registrations", "--json")
        assert code == 0
        (parked,) = json.loads(out)
        assert (parked["job_id"], parked["reason"]) == ("job_cli_reg", "refused_host")
        assert "'status.sume.example' is not on STATUS_ALLOWED_HOSTS" in parked["message"]
        code, _ = cli(stack, capsys, "status", "job_cli_reg")
        assert code == 1

        # The fix, as a redeploy makes it: new poller containers read the longer
        # list. The stack puts its environment back when it stops.
        os.environ[Env.STATUS_ALLOWED_HOSTS] = "api.sume.example,status.sume.example"
        runtime.reset()
        code, out = cli(stack, capsys, "dlq", "redrive", "--registrations")
        assert code == 0
        assert "moved 1 message(s) back to the registrations queue" in out

        story = wait_for_state(stack, capsys, "job_cli_reg", {"awaiting"})
        assert story["status_url"] == status_url
        code, out = cli(stack, capsys, "dlq", "peek", "--registrations")
        assert (code, out.strip()) == (0, "the registrations DLQ is empty")
