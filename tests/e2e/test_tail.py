"""``sume-webhooks tail`` on the local stack, run as an operator runs it: a job sent
through the receiver shows as received, then processed; Ctrl-C and kill stop it with
their exit codes and leave the deployment as it was (nothing subscribed, nothing left)."""

from __future__ import annotations

import json
import queue
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devstack.demo import wait_processed
from devstack.simulator import Sume
from devstack.stack import DevStack
from sume_cli.commands.tail import INTERRUPTED, TERMINATED

CLI = str(Path(sys.executable).with_name("sume-webhooks"))
# Not a timing: how long a read may block before the test calls the tool hung.
HUNG_SECONDS = 120


class Tail:
    """The CLI's ``tail`` in a process of its own, its lines read as they come."""

    def __init__(self, stack: DevStack, *argv: str) -> None:
        self.process = subprocess.Popen(
            [CLI, "--endpoint-url", stack.endpoint_url, "--prefix", stack.prefix, "tail", *argv],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        # The tool says when it follows; only then is a job sent.
        assert self.process.stderr is not None
        started = self.process.stderr.readline()
        assert started.startswith("following the job events of 3 log group(s)"), started

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def until(self, wanted: set[tuple[str, str]], split: Any) -> list[str]:
        """Lines up to the one that shows the last of ``wanted`` ((event, job id) pairs)."""
        seen: list[str] = []
        missing = set(wanted)
        while missing:
            line = self.lines.get(timeout=HUNG_SECONDS)
            assert line is not None, f"tail ended; it showed {seen}"
            seen.append(line)
            missing.discard(split(line))
        return seen

    def stop(self, signum: int) -> tuple[int, str]:
        self.process.send_signal(signum)
        _, err = self.process.communicate(timeout=HUNG_SECONDS)
        return self.process.returncode, err


def text_fields(line: str) -> tuple[str, str]:
    _, event, job_id, *_ = line.split()
    return event, job_id


def json_fields(line: str) -> tuple[str, str]:
    record = json.loads(line)
    return record["event"], record["job_id"]


@pytest.fixture
def send(stack: DevStack) -> Iterator[Any]:
    """Sends a job through the simulator, as Sume would, one artifact to store; its
    server serves the artifact while the test runs."""
    with Sume(stack.url, [stack.signing_secret]) as sume:

        def one(job_id: str, processed: bool = False) -> None:
            job = sume.new_job(artifacts=1, job_id=job_id)
            assert sume.deliver(job).results() == ["new"]
            if processed:
                wait_processed(stack, job, HUNG_SECONDS)
                assert stack.announced()[job_id] == 1

        yield one


def footprint(stack: DevStack) -> dict[str, Any]:
    """What a follower could have subscribed: rules on the bus, queues, log subscriptions."""
    assert stack.names is not None
    events, sqs, logs = (stack.client(s) for s in ("events", "sqs", "logs"))
    groups = [g["logGroupName"] for g in logs.describe_log_groups()["logGroups"]]
    return {
        "rules": sorted(
            r["Name"] for r in events.list_rules(EventBusName=stack.names.event_bus)["Rules"]
        ),
        "buses": sorted(b["Name"] for b in events.list_event_buses()["EventBuses"]),
        "queues": sorted(sqs.list_queues().get("QueueUrls", [])),
        "log groups": sorted(groups),
        "subscriptions": {
            group: logs.describe_subscription_filters(logGroupName=group)["subscriptionFilters"]
            for group in groups
        },
    }


@pytest.fixture
def job_id() -> str:
    return f"job_tail_{uuid.uuid4().hex[:10]}"


@pytest.fixture
def untouched(stack: DevStack) -> Iterator[None]:
    before = footprint(stack)
    yield
    assert footprint(stack) == before


@pytest.mark.usefixtures("untouched")
def test_a_job_shows_received_then_processed_and_ctrl_c_leaves_nothing(
    stack: DevStack, send: Any, job_id: str
) -> None:
    tail = Tail(stack)
    send(job_id)
    seen = tail.until({("received", job_id), ("processed", job_id)}, text_fields)
    mine = [text_fields(line) for line in seen if text_fields(line)[1] == job_id]
    assert mine == [("received", job_id), ("processed", job_id)]
    shown = {text_fields(line)[0]: line for line in seen if text_fields(line)[1] == job_id}
    assert shown["received"].endswith("job.completed: stored, work queued")
    assert shown["processed"].endswith("completed, 1 artifact(s) stored")

    code, err = tail.stop(signal.SIGINT)
    assert code == INTERRUPTED
    assert err.strip() == "stopped (Ctrl-C)"


@pytest.mark.usefixtures("untouched")
def test_since_shows_the_history_first_as_json_and_kill_leaves_nothing(
    stack: DevStack, send: Any, job_id: str
) -> None:
    send(job_id, processed=True)
    # Started after the job ended: --since brings its lines back, once each, in order.
    tail = Tail(stack, "--since", "10m", "--output", "json")
    seen = tail.until({("received", job_id), ("processed", job_id)}, json_fields)
    records = [json.loads(line) for line in seen]
    mine = [r for r in records if r["job_id"] == job_id]
    assert [r["event"] for r in mine] == ["received", "processed"]
    assert mine[1]["fields"]["outcome"] == "completed"
    assert mine[0]["at"] <= mine[1]["at"]

    code, err = tail.stop(signal.SIGTERM)
    assert code == TERMINATED
    assert err.strip() == "stopped (SIGTERM)"
