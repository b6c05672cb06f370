"""The local stack as an object: what it tells, what it refuses."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import pytest

from devstack.settings import ensure_free
from devstack.simulator import Sume
from devstack.stack import DevStack
from infra import spec
from sume.contract.envelope import JobEvent, parse
from sume.store.job import Source, State
from tests.builders import job_body, raw_of


def test_a_taken_port_is_an_error_not_a_hang() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(OSError):
            ensure_free(taken.getsockname()[1], "webhook")
    ensure_free(0, "moto")


def test_a_second_stack_in_one_process_is_refused(stack: DevStack) -> None:
    with pytest.raises(RuntimeError, match="already running"):
        DevStack().start()
    assert stack.url.startswith("http://127.0.0.1:")


def test_the_banner_names_everything_needed_to_look_inside(stack: DevStack) -> None:
    assert stack.names is not None
    banner = "\n".join(stack.describe())
    for value in (
        stack.url,
        stack.signing_secret,
        stack.endpoint_url,
        stack.names.table,
        stack.names.queue_url,
        stack.names.dlq_url,
        stack.names.artifacts_bucket,
        stack.names.payloads_bucket,
        stack.names.event_bus,
        stack.names.registrations_dlq_url,
        str(stack.names.signing_secret_arn),
        "ALLOW_HTTP_URLS=true ALLOW_PRIVATE_HOSTS=true",
    ):
        assert value in banner
    send_one = next(line for line in banner.splitlines() if line.startswith("Send one:"))
    assert send_one.endswith(f"--secret {stack.signing_secret} --spacing 5")


def launch_devstack(*args: str, **env: str) -> subprocess.Popen[str]:
    """`make run`, as a process."""
    return subprocess.Popen(
        [sys.executable, "-m", "devstack", *args],
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def ended(process: subprocess.Popen[str]) -> subprocess.CompletedProcess[str]:
    """How it ended: it must exit by itself (the timeout fails the test)."""
    try:
        stdout, stderr = process.communicate(timeout=60)
    finally:
        process.kill()
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def start_devstack(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return ended(launch_devstack(*args, **env))


def test_a_bad_setting_stops_the_start_in_one_line() -> None:
    """It used to start, then fail every job with a traceback per retry until the DLQ."""
    result = start_devstack("--port", "0", "--moto-port", "0", LEASE_SECONDS="abc")
    assert result.returncode == 1
    assert result.stderr == (
        "cannot start: the worker's settings: LEASE_SECONDS must be an integer, got 'abc'\n"
    )
    assert result.stdout == ""


def test_a_taken_port_is_named() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        # Both at once: each start is mostly Python importing the stack.
        starts = [
            launch_devstack("--port", str(port), "--moto-port", "0"),
            launch_devstack("--port", "0", MOTO_PORT=str(port)),
        ]
        webhook, moto = (ended(start) for start in starts)
    assert (webhook.returncode, webhook.stdout) == (1, "")
    assert webhook.stderr == (
        f"cannot start: webhook port {port} is already in use: set PORT (or --port) to a free one\n"
    )
    assert (moto.returncode, moto.stdout) == (1, "")
    assert moto.stderr == (
        f"cannot start: moto port {port} is already in use: "
        "set MOTO_PORT (or --moto-port) to a free one\n"
    )


def test_retry_and_sweeper_lines_carry_the_error_code(stack: DevStack) -> None:
    assert stack.names is not None
    table = stack.jobs()
    event = parse(raw_of(job_body("job_held_elsewhere")))
    assert isinstance(event, JobEvent)
    now = int(time.time())
    assert table.record(event, Source.WEBHOOK, now, sweep_at=now + 3600).new
    # Another worker holds it for a day: every receive here is refused as busy.
    assert table.claim("job_held_elsewhere", now, lease_seconds=86400).state == State.PROCESSING
    sqs = stack.client("sqs")
    sqs.send_message(QueueUrl=stack.names.queue_url, MessageBody="job_held_elsewhere")

    def lines() -> list[tuple[str, str]]:
        return [
            (e.kind, e.detail) for e in stack.journal.entries() if e.job_id == "job_held_elsewhere"
        ]

    while len(lines()) < spec.MAX_RECEIVES:
        time.sleep(0.1)
    # Busy is no failure: on its last receive the message is acknowledged, and the
    # job is the sweeper's again: due at its sweep deadline (a claim leaves the due-work
    # key alone), where the sweeper waits out the lease rather than queue it.
    assert lines() == [
        *[("retry", "JobBusy; retried in 1s")] * (spec.MAX_RECEIVES - 1),
        ("sweeper", f"JobBusy; receive {spec.MAX_RECEIVES}: acknowledged, left to the sweeper"),
    ]
    assert stack.queue_depth(stack.names.dlq_url) == 0
    held = table.get("job_held_elsewhere")
    assert held is not None and held.due_at == now + 3600


def test_a_processing_error_line_carries_its_code(stack: DevStack) -> None:
    with Sume(stack.url, [stack.signing_secret], spacing_seconds=0.05) as sume:
        job = sume.new_job(artifacts=1)
        job.artifacts.clear()  # its link now answers 404: retrying cannot fix that
        assert sume.deliver(job).delivered
        while stack.announced()[job.job_id] == 0:
            time.sleep(0.05)
    [entry] = [e for e in stack.journal.entries() if e.job_id == job.job_id][1:]
    assert entry.kind == "processing_error"
    assert entry.detail.startswith("http_404: ")


def test_the_banner_says_to_subscribe_with_a_rule_of_your_own_and_that_one_gets_everything(
    stack: DevStack,
) -> None:
    """A queue offered to readers was the journal's own: each reader took lines from it."""
    assert stack.names is not None
    banner = "\n".join(stack.describe())
    assert stack.journal_queue_url not in banner
    (line,) = [line for line in banner.splitlines() if line.startswith("  announcements ")]
    pattern = line.partition("pattern ")[2].rpartition(", and queue")[0]
    sqs, events = stack.client("sqs"), stack.client("events")
    url = sqs.create_queue(QueueName="outside-reader")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    events.put_rule(Name="outside-reader", EventBusName=stack.names.event_bus, EventPattern=pattern)
    events.put_targets(
        Rule="outside-reader",
        EventBusName=stack.names.event_bus,
        Targets=[{"Id": "reader", "Arn": arn}],
    )
    with Sume(stack.url, [stack.signing_secret]) as sume:
        job = sume.new_job(event="job.failed")
        assert sume.deliver(job).delivered

    read: list[str] = []
    deadline = time.monotonic() + 30
    while job.job_id not in read and time.monotonic() < deadline:
        for message in sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1).get("Messages", []):
            read.append(json.loads(message["Body"])["detail"]["job_id"])
    events.remove_targets(Rule="outside-reader", EventBusName=stack.names.event_bus, Ids=["reader"])
    events.delete_rule(Name="outside-reader", EventBusName=stack.names.event_bus)
    sqs.delete_queue(QueueUrl=url)
    assert job.job_id in read
    # The journal saw it too: the reader took nothing from it.
    deadline = time.monotonic() + 30
    while not stack.announced()[job.job_id] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert stack.announced()[job.job_id] == 1


def test_the_journal_prints_a_replay_as_a_replay(stack: DevStack) -> None:
    with Sume(stack.url, [stack.signing_secret], spacing_seconds=0.05) as sume:
        job = sume.new_job(artifacts=0)
        assert sume.deliver(job).delivered
        while stack.announced()[job.job_id] == 0:
            time.sleep(0.05)
    now = int(time.time())
    assert stack.jobs().request_replay(job.job_id, now, now + 3600, "check the journal")
    assert stack.names is not None
    stack.client("sqs").send_message(QueueUrl=stack.names.queue_url, MessageBody=job.job_id)
    while stack.announced()[job.job_id] < 2:
        time.sleep(0.05)
    lines = [(e.kind, e.detail) for e in stack.journal.entries() if e.job_id == job.job_id]
    assert lines[-2:] == [("processed", "completed"), ("replayed", "completed (announcement #2)")]


def journal_of(stack: DevStack, job_id: str, last: str) -> list[tuple[str, str]]:
    """The job's journal lines once one of kind ``last`` is among them."""
    while not stack.journal.entries(last) or last not in [
        e.kind for e in stack.journal.entries() if e.job_id == job_id
    ]:
        time.sleep(0.05)
    return [(e.kind, e.detail) for e in stack.journal.entries() if e.job_id == job_id]


def test_each_status_poll_is_one_line_naming_the_job_and_what_sume_answered(
    stack: DevStack,
) -> None:
    """Poll lines used to be one per run, counts only (``polled=1 rescheduled=1``)."""
    with Sume(stack.url, [stack.signing_secret]) as sume:
        running = sume.new_job(finished=False)
        done = sume.new_job(event="job.failed")
        for job in (running, done):
            stack.expect(job.job_id, job.status_url)
        found = journal_of(stack, done.job_id, "recovered")
        given_up = journal_of(stack, running.job_id, "lost")
    assert found == [
        ("poll", "Sume: job.failed; stored, work queued"),
        ("recovered", "by status_url poll: failed"),
    ]
    *polls, lost = given_up
    *rescheduled, last = polls
    assert [kind for kind, _ in polls] == ["poll"] * len(polls)
    for number, (_, detail) in enumerate(rescheduled, start=1):
        assert detail.startswith("Sume: not finished; next poll at ")
        assert detail.endswith(f" (poll {number})")
    assert last[1] == f"Sume: not finished; no more polls: lost (poll {len(polls)})"
    assert lost == ("lost", f"announced: no answer after {len(polls)} poll(s)")
