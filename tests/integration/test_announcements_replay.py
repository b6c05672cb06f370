"""``announcements replay`` over HTTP against moto's server: a subscriber down for a window
gets exactly what it missed, from the archive, and nobody else gets anything.

moto's replay is made to honour the window, the destination rule and a disabled rule,
as AWS does (devstack/moto_replay.py).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest

from devstack.resources import subscribe_queue
from infra.spec import ResourceNames
from sume.core.names import EVENT_SOURCE
from sume.store.job import Job
from sume.store.jobs import JobsTable
from sume_cli.main import main
from tests.builders import SECRET
from tests.integration.conftest import served_resources
from tests.integration.test_cli import reset

NOW = int(time.time())


@pytest.fixture
def endpoint(moto_server: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    reset(moto_server)
    yield moto_server
    reset(moto_server)


@pytest.fixture
def names(endpoint: str) -> ResourceNames:
    return served_resources(endpoint, signing_secret=SECRET)


def client(endpoint: str, service: str) -> Any:
    return boto3.client(service, endpoint_url=endpoint)


def iso(epoch: int) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def announce(endpoint: str, names: ResourceNames, job_id: str, sequence: int, at: int) -> None:
    client(endpoint, "events").put_events(
        Entries=[
            {
                "EventBusName": names.event_bus,
                "Source": EVENT_SOURCE,
                "DetailType": "Sume Job Completed",
                "Detail": json.dumps({"job_id": job_id, "sequence": sequence}),
                "Time": datetime.fromtimestamp(at, UTC),
            }
        ]
    )


def received(endpoint: str, url: str) -> list[dict[str, Any]]:
    sqs, events = client(endpoint, "sqs"), []
    while batch := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages"):
        for message in batch:
            events.append(json.loads(message["Body"]))
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    return events


def cli(endpoint: str, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["--endpoint-url", endpoint, *argv])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return code, captured.out, captured.err


def test_a_subscriber_down_for_a_window_gets_what_it_missed_and_no_one_else_does(
    endpoint: str, names: ResourceNames, capsys: pytest.CaptureFixture[str]
) -> None:
    events = client(endpoint, "events")
    down = subscribe_queue(client(endpoint, "sqs"), events, "down", names.event_bus)
    up = subscribe_queue(client(endpoint, "sqs"), events, "up", names.event_bus)
    announce(endpoint, names, "job_before", 1, NOW - 3600)
    events.disable_rule(Name="down", EventBusName=names.event_bus)
    announce(endpoint, names, "job_missed_1", 1, NOW - 3000)
    announce(endpoint, names, "job_missed_2", 2, NOW - 2400)
    events.enable_rule(Name="down", EventBusName=names.event_bus)
    announce(endpoint, names, "job_after", 1, NOW - 600)
    assert [e["detail"]["job_id"] for e in received(endpoint, down)] == ["job_before", "job_after"]
    first = {e["detail"]["job_id"]: e for e in received(endpoint, up)}
    assert len(first) == 4

    since, until = iso(NOW - 3300), iso(NOW - 1800)
    code, out, err = cli(
        endpoint, capsys, "announcements", "replay", "--since", since, "--until", until,
        "--rule", "down",
    )  # fmt: skip

    assert code == 0, err
    assert "COMPLETED" in out
    assert "completed, 100% of its window" in err
    replayed = received(endpoint, down)
    assert sorted(e["detail"]["job_id"] for e in replayed) == ["job_missed_1", "job_missed_2"]
    for event in replayed:
        original = first[event["detail"]["job_id"]]
        # The same announcement: detail (job_id, sequence), type, source and time;
        # a new id, and the replay's name to tell the copy from the first.
        for key in ("detail", "detail-type", "source", "time", "account", "region"):
            assert event[key] == original[key], key
        assert event["id"] != original["id"]
        assert event["replay-name"].startswith("down-")
    assert received(endpoint, up) == []


def test_a_dry_run_names_the_plan_and_starts_nothing(
    endpoint: str, names: ResourceNames, capsys: pytest.CaptureFixture[str]
) -> None:
    events = client(endpoint, "events")
    subscribe_queue(client(endpoint, "sqs"), events, "down", names.event_bus)
    JobsTable(client(endpoint, "dynamodb"), names.table, 16)
    code, out, _ = cli(
        endpoint, capsys, "--output", "json", "announcements", "replay", "--since", "2h",
        "--rule", "down", "--dry-run",
    )  # fmt: skip
    assert code == 0
    shown = json.loads(out)
    assert shown["rule"] == "down"
    assert shown["archive"] == names.announcements_archive
    assert shown["dry_run"] is True
    assert events.list_replays()["Replays"] == []


def test_a_job_narrows_the_replay_to_the_minutes_of_its_ending(
    endpoint: str, names: ResourceNames, capsys: pytest.CaptureFixture[str]
) -> None:
    events = client(endpoint, "events")
    down = subscribe_queue(client(endpoint, "sqs"), events, "down", names.event_bus)
    table = JobsTable(client(endpoint, "dynamodb"), names.table, 16)
    client(endpoint, "dynamodb").put_item(
        TableName=names.table,
        Item={
            "job_id": {"S": "job_wanted"},
            "state": {"S": "processed"},
            "sequence": {"N": "1"},
            "processed_at": {"N": str(NOW - 3000)},
        },
    )
    assert isinstance(table.get("job_wanted"), Job)
    events.disable_rule(Name="down", EventBusName=names.event_bus)
    announce(endpoint, names, "job_wanted", 1, NOW - 3000)
    announce(endpoint, names, "job_other_hour", 1, NOW - 1200)
    events.enable_rule(Name="down", EventBusName=names.event_bus)

    code, out, err = cli(
        endpoint, capsys, "announcements", "replay", "--since", "2h", "--rule", "down",
        "--job", "job_wanted",
    )  # fmt: skip

    assert code == 0, err
    assert "job job_wanted: sequence 1" in out
    assert [e["detail"]["job_id"] for e in received(endpoint, down)] == ["job_wanted"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--since", "1h", "--rule", "nobody"), "--rule nobody: no such rule on the bus"),
        (("--since", "40d", "--rule", "down"), "outside the archive"),
        (("--since", "1h", "--rule", "off"), "--rule off is disabled"),
        (("--since", "1h", "--until", "2h", "--rule", "down"), "is not before --until"),
    ],
)
def test_a_wrong_rule_or_window_is_refused_in_one_line(
    endpoint: str,
    names: ResourceNames,
    capsys: pytest.CaptureFixture[str],
    argv: tuple[str, ...],
    message: str,
) -> None:
    events, sqs = client(endpoint, "events"), client(endpoint, "sqs")
    subscribe_queue(sqs, events, "down", names.event_bus)
    subscribe_queue(sqs, events, "off", names.event_bus)
    events.disable_rule(Name="off", EventBusName=names.event_bus)
    code, out, err = cli(endpoint, capsys, "announcements", "replay", *argv)
    assert code != 0
    assert out == ""
    assert len(err.strip().splitlines()) == 1
    assert message in err
    if "nobody" in argv:
        # It names the rules there are, the archive's own (managed by AWS) left out.
        assert "(its rules: down, off, " in err
        assert "Events-Archive" not in err
    assert events.list_replays()["Replays"] == []
