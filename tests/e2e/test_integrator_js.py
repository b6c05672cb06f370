"""The integrator's path in JavaScript (examples/integrator-js, AWS SDK v3) on the local stack.

The example runs as an application would: its own process, the SDK's own
configuration from the variables the banner prints, its own rule and queue.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from devstack.resources import subscribe_queue
from devstack.simulator import Sume
from devstack.stack import DevStack
from sume.store.job import State

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "integrator-js"
# Longer than the e2e stack's cut-off (tests/e2e/conftest.py), so a lost job is
# announced well within it.
WAIT_SECONDS = 60
# An announcement ends a long poll at once; a queue deleted under a run is noticed
# only when the receive under way ends (after SQS's 20 s by default).
LONG_POLL_SECONDS = 1


def command(stack: DevStack, *args: str) -> tuple[list[str], dict[str, str]]:
    """The example's command line and environment: exactly what the banner tells an
    application to set, nothing of the tests'."""
    assert stack.names is not None
    assert (EXAMPLE / "node_modules").is_dir(), (
        "the example's dependencies are missing (make test installs them): "
        "make examples/integrator-js/node_modules/.package-lock.json"
    )
    (line,) = [line for line in stack.describe() if line.startswith("  any AWS SDK/CLI:")]
    banner = dict(word.split("=", 1) for word in line.partition(":")[2].split())
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("AWS_")},
        **banner,
        "SUME_EVENT_BUS": stack.names.event_bus,
    }
    options = ["--wait-seconds", str(WAIT_SECONDS), "--long-poll-seconds", str(LONG_POLL_SECONDS)]
    return ["node", "integrate.mjs", *options, *args], env


def integrate(stack: DevStack, name: str, *args: str) -> subprocess.CompletedProcess[str]:
    argv, env = command(stack, "--name", name, *args)
    return subprocess.run(
        argv,
        cwd=EXAMPLE,
        env=env,
        capture_output=True,
        text=True,
        timeout=WAIT_SECONDS + 30,
        check=False,
    )


def start(stack: DevStack, *args: str) -> subprocess.Popen[str]:
    argv, env = command(stack, *args)
    return subprocess.Popen(
        argv, cwd=EXAMPLE, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def announcement(run: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert run.returncode == 0, run.stderr
    # The example's own progress and nothing else: on a Node the AWS SDK no longer
    # supports, every run printed its 8-line warning (tests/conftest.py: the project's).
    progress = ("subscribed: rule ", "registered ")
    assert [line for line in run.stderr.splitlines() if not line.startswith(progress)] == []
    (line,) = run.stdout.splitlines()
    event: dict[str, Any] = json.loads(line)
    return event


def queues(stack: DevStack) -> list[str]:
    return list(stack.client("sqs").list_queues().get("QueueUrls", []))


def test_a_registered_job_is_announced_to_the_applications_own_queue(stack: DevStack) -> None:
    with Sume(stack.url, [stack.signing_secret], api_token=stack.api_token) as sume:
        # Sume finished the job; its webhook never reaches us.
        job = sume.new_job(artifacts=1)
        run = integrate(
            stack,
            "orders-js",
            "--job-id",
            job.job_id,
            "--status-url",
            job.status_url,
            "--metadata",
            json.dumps({"order": "o-7"}),
        )

    event = announcement(run)
    assert (event["source"], event["detail-type"]) == ("sume.webhooks", "Sume Job Completed")
    assert event["detail"]["job_id"] == job.job_id
    assert len(event["detail"]["artifacts"]) == 1
    # What the application registered comes back, and this is the job's first word.
    assert (event["detail"]["metadata"], event["detail"]["sequence"]) == ({"order": "o-7"}, 1)
    # The journal reads its own queue: the application took nothing from it.
    assert [e.job_id for e in stack.journal.entries("recovered")].count(job.job_id) == 1
    assert stack.announced()[job.job_id] == 1
    # Its rule and queue are gone with it (--keep leaves them).
    assert not [url for url in queues(stack) if url.endswith("/orders-js")]


def test_a_job_that_never_ends_is_announced_lost(stack: DevStack) -> None:
    with Sume(stack.url, [stack.signing_secret], api_token=stack.api_token) as sume:
        # Sume says "running" on every poll until the registration's cut-off.
        job = sume.new_job(finished=False)
        run = integrate(
            stack, "orders-js-lost", "--job-id", job.job_id, "--status-url", job.status_url
        )

    event = announcement(run)
    assert (event["source"], event["detail-type"]) == ("sume.webhooks", "Sume Job Lost")
    detail = event["detail"]
    assert detail["job_id"] == job.job_id
    assert (detail["sequence"], detail["metadata"]) == (1, None)
    assert detail["polls"] >= 1
    assert detail["lost_at"] >= detail["registered_at"]
    stored = stack.jobs().get(job.job_id)
    assert stored is not None
    assert stored.state == State.LOST


def test_a_refused_registration_is_announced_to_the_application(stack: DevStack) -> None:
    # Not on the local stack's allow-list (127.0.0.1): it can never be polled.
    run = integrate(
        stack,
        "orders-js-refused",
        "--job-id",
        "job_js_refused",
        "--status-url",
        "https://api.sume.example/v1/jobs/job_js_refused",
    )

    event = announcement(run)
    assert (event["source"], event["detail-type"]) == (
        "sume.webhooks",
        "Sume Job Registration Refused",
    )
    detail = event["detail"]
    assert (detail["job_id"], detail["reason"]) == ("job_js_refused", "refused_host")
    # The application can tell which of its events was refused.
    assert f"(event {detail['registration_event_id']})" in run.stderr
    assert stack.jobs().get("job_js_refused") is None


def test_two_runs_at_once_each_read_their_own_subscription(stack: DevStack) -> None:
    with Sume(stack.url, [stack.signing_secret], api_token=stack.api_token) as sume:
        jobs = [sume.new_job(artifacts=0) for _ in range(2)]
        # No --name: each run makes its own rule and queue.
        runs = [
            start(stack, "--job-id", job.job_id, "--status-url", job.status_url) for job in jobs
        ]
        outputs = [run.communicate(timeout=WAIT_SECONDS + 30) for run in runs]

    for job, run, (stdout, stderr) in zip(jobs, runs, outputs, strict=True):
        assert run.returncode == 0, stderr
        (line,) = stdout.splitlines()
        assert json.loads(line)["detail"]["job_id"] == job.job_id
    names = {re.search(r"subscribed: rule (\S+)", err).group(1) for _, err in outputs}  # type: ignore[union-attr]
    assert len(names) == 2
    assert not [url for url in queues(stack) if url.rsplit("/", 1)[1] in names]


def test_when_its_subscription_is_deleted_under_it_the_first_error_is_reported(
    stack: DevStack,
) -> None:
    assert stack.names is not None
    with Sume(stack.url, [stack.signing_secret], api_token=stack.api_token) as sume:
        # Never finished: the run waits on its queue.
        job = sume.new_job(finished=False)
        run = start(
            stack,
            "--name",
            "orders-js-shared",
            "--job-id",
            job.job_id,
            "--status-url",
            job.status_url,
        )
        assert run.stderr is not None
        # (The SDK may warn first about the Node version.)
        before = iter(run.stderr.readline, "")
        assert any(line.startswith("subscribed: rule orders-js-shared") for line in before)
        # What another run of the same name does when it cleans up.
        events = stack.client("events")
        events.remove_targets(
            Rule="orders-js-shared", EventBusName=stack.names.event_bus, Ids=["queue"]
        )
        events.delete_rule(Name="orders-js-shared", EventBusName=stack.names.event_bus)
        sqs = stack.client("sqs")
        sqs.delete_queue(QueueUrl=sqs.get_queue_url(QueueName="orders-js-shared")["QueueUrl"])
        _, stderr = run.communicate(timeout=WAIT_SECONDS + 30)

    assert run.returncode == 1
    *_, cleanup, cause = stderr.splitlines()
    # The queue that vanished is the cause; the rule the cleanup missed comes second.
    assert cause.startswith("QueueDoesNotExist:"), stderr
    assert "cleaning up orders-js-shared failed too (ResourceNotFoundException" in cleanup
    # Its job is lost at the cut-off: announced now, and not in a later test's queue.
    while not stack.announced()[job.job_id]:
        time.sleep(0.1)  # pytest's timeout bounds a hang


def test_without_a_bus_it_says_how_to_run_it() -> None:
    run = subprocess.run(
        ["node", "integrate.mjs", "--job-id", "job_x"],
        cwd=EXAMPLE,
        env={k: v for k, v in os.environ.items() if k != "SUME_EVENT_BUS"},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert run.returncode == 2
    assert "SUME_EVENT_BUS" in run.stderr


def drained(stack: DevStack, url: str) -> list[dict[str, Any]]:
    sqs, taken = stack.client("sqs"), []
    while batch := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages"):
        for message in batch:
            taken.append(json.loads(message["Body"]))
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    return taken


def test_a_consumer_down_for_a_window_catches_up_from_the_archive(stack: DevStack) -> None:
    """docs/integrating.md's "my consumer was down": the window replayed to its rule alone."""
    assert stack.names is not None
    bus, events, sqs = stack.names.event_bus, stack.client("events"), stack.client("sqs")
    down = subscribe_queue(sqs, events, "orders-js-down", bus)
    other = subscribe_queue(sqs, events, "orders-js-other", bus)
    events.disable_rule(Name="orders-js-down", EventBusName=bus)
    # From the next whole second: both rules are as the test wants them all the window
    # (an earlier test's job announced just before them is not the down one's to miss).
    since = int(time.time()) + 1
    while time.time() < since:
        time.sleep(0.05)
    with Sume(stack.url, [stack.signing_secret], api_token=stack.api_token) as sume:
        jobs = [sume.new_job(artifacts=1) for _ in range(2)]
        for job in jobs:
            assert sume.deliver(job).delivered
        while any(stack.announced()[job.job_id] < 1 for job in jobs):
            time.sleep(0.05)  # pytest's timeout bounds a hang
    until = int(time.time()) + 1
    while int(time.time()) < until:
        time.sleep(0.05)
    events.enable_rule(Name="orders-js-down", EventBusName=bus)
    assert drained(stack, down) == []
    # What the other subscriber, up all along, took in the window: what the down one missed.
    missed = {
        (e["detail"]["job_id"], e["detail"]["sequence"]): e
        for e in drained(stack, other)
        if since <= datetime.fromisoformat(e["time"].replace("Z", "+00:00")).timestamp() < until
    }
    assert {job.job_id for job in jobs} <= {job_id for job_id, _ in missed}
    announced_before = stack.announced()

    argv, env = command(stack)
    argv = ["node", "catch-up.mjs", "--name", "orders-js-down"]
    env["SUME_ANNOUNCEMENTS_ARCHIVE"] = stack.names.announcements_archive
    iso = lambda epoch: datetime.fromtimestamp(epoch, UTC).isoformat()  # noqa: E731
    run = subprocess.run(
        [*argv, "--since", iso(since), "--until", iso(until)],
        cwd=EXAMPLE,
        env=env,
        capture_output=True,
        text=True,
        timeout=WAIT_SECONDS + 30,
        check=False,
    )

    assert run.returncode == 0, run.stderr
    taken = [json.loads(line) for line in run.stdout.splitlines()]
    keys = [(e["detail"]["job_id"], e["detail"]["sequence"]) for e in taken]
    # Each missed announcement once, as it was first sent, marked as a replayed copy.
    assert sorted(keys) == sorted(missed)
    for event in taken:
        first = missed[(event["detail"]["job_id"], event["detail"]["sequence"])]
        assert (event["detail"], event["detail-type"]) == (first["detail"], first["detail-type"])
        assert event["replay-name"].startswith("orders-js-down-catch-up-")
    for job in jobs:
        stored = stack.jobs().get(job.job_id)
        assert stored is not None
        assert stored.sequence == next(s for j, s in keys if j == job.job_id)
    # Nobody else got a copy: the other subscriber, and the stack's own tap on the bus.
    assert drained(stack, other) == []
    assert stack.announced() == announced_before
