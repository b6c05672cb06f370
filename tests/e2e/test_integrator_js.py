"""The integrator's path in JavaScript (examples/integrator-js, AWS SDK v3) on the local stack.

The example runs as an application would: its own process, the SDK's own
configuration from the variables the banner prints, its own rule and queue.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from devstack.simulator import Sume
from devstack.stack import DevStack
from sume.store.jobs import State

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "integrator-js"
# Longer than the e2e stack's cut-off (tests/e2e/conftest.py), so a lost job is
# announced well within it.
WAIT_SECONDS = 60


def integrate(stack: DevStack, name: str, *args: str) -> subprocess.CompletedProcess[str]:
    assert stack.names is not None
    assert (EXAMPLE / "node_modules").is_dir(), (
        "the example's dependencies are missing (make test installs them): "
        "make examples/integrator-js/node_modules/.package-lock.json"
    )
    # Exactly what the banner tells an application to set, nothing of the tests'.
    (line,) = [line for line in stack.describe() if line.startswith("  any AWS SDK/CLI:")]
    banner = dict(word.split("=", 1) for word in line.partition(":")[2].split())
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("AWS_")},
        **banner,
        "SUME_EVENT_BUS": stack.names.event_bus,
    }
    return subprocess.run(
        ["node", "integrate.mjs", "--name", name, "--wait-seconds", str(WAIT_SECONDS), *args],
        cwd=EXAMPLE,
        env=env,
        capture_output=True,
        text=True,
        timeout=WAIT_SECONDS + 30,
        check=False,
    )


def announcement(run: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert run.returncode == 0, run.stderr
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
