"""Every delivery path over real HTTP, against the local stack, with Sume simulated."""

from __future__ import annotations

import time

from devstack.simulator import Sume, SumeJob, scenario
from devstack.stack import DevStack

SETTLE_BOUND = 60.0


def wait_processed(stack: DevStack, job: SumeJob) -> None:
    deadline = time.monotonic() + SETTLE_BOUND
    while stack.announced()[job.job_id] == 0 and time.monotonic() < deadline:
        time.sleep(0.05)


def test_every_path_keeps_the_invariants(stack: DevStack) -> None:
    with Sume(
        stack.url, [stack.signing_secret], spacing_seconds=0.05, api_token=stack.api_token
    ) as sume:
        run = scenario.drive(
            sume, stack.expect, lambda job: wait_processed(stack, job), slow_seconds=0.3
        )
        assert scenario.settle(stack, run, SETTLE_BOUND)
        report = scenario.check(stack, run)

    assert report.problems == []
    jobs = run.jobs()
    summary = report.summary()
    assert summary["jobs"] == len(jobs) == 9
    assert summary["processed once"] == 9
    assert summary["recovered by poll"] == 1
    assert summary["lost"] == 0
    assert summary["DLQ"] == 0
    assert summary["rejected"] == 1
    # Three concurrent twins, one retry after a lost answer, one Redeliver;
    # an attempt Sume timed out on still reached the receiver and counts.
    timed_out = sum(c.timed_out for c in jobs)
    assert summary["duplicates"] == 5 + timed_out

    # Sume's status endpoint was asked with the API token from Secrets Manager,
    # each artifact was downloaded once, and the one whose first answer was a
    # 503 twice: its job went back to the queue once and was then processed.
    polled = next(c.job for c in jobs if c.arrives == scenario.POLL)
    flaky = next(c.job for c in jobs if c.job and c.job.flaky)
    assert polled is not None and flaky is not None
    assert sume.hits[f"/status/{polled.job_id}"] >= 1
    artifact_hits = {p: n for p, n in sume.hits.items() if p.startswith("/artifacts/")}
    assert len(artifact_hits) == sum(len(c.job.artifacts) for c in jobs if c.job)
    for path, hits in artifact_hits.items():
        assert hits == (2 if flaky.job_id in path else 1), path
    retries = [e for e in stack.journal.entries("retry") if e.job_id == flaky.job_id]
    assert [e.detail for e in retries] == ["http_503; retried in 1s"]


def test_the_journal_tells_each_job_story(stack: DevStack) -> None:
    with Sume(stack.url, [stack.signing_secret], spacing_seconds=0.05) as sume:
        job = sume.new_job(artifacts=1)
        first = sume.deliver(job)
        wait_processed(stack, job)
        again = sume.redeliver(job)
    assert first.results() == ["new"]
    assert again.results() == ["duplicate"]
    kinds = [e.kind for e in stack.journal.entries() if e.job_id == job.job_id]
    assert sorted(kinds[:2]) == ["processed", "received"]
    assert kinds[2:] == ["duplicate"]


def test_the_check_names_each_broken_invariant(stack: DevStack) -> None:
    assert stack.names is not None
    with Sume(stack.url, [stack.signing_secret], spacing_seconds=0.05) as sume:
        job = sume.new_job(artifacts=1)
        run = scenario.Run([scenario.Case("one job", job, scenario.WEBHOOK, [sume.deliver(job)])])
        assert scenario.settle(stack, run, SETTLE_BOUND)
    assert scenario.check(stack, run).problems == []

    s3, sqs, events = stack.client("s3"), stack.client("sqs"), stack.client("events")
    key = next(
        o["Key"]
        for o in s3.list_objects_v2(Bucket=stack.names.artifacts_bucket)["Contents"]
        if job.job_id in o["Key"]
    )
    s3.delete_object(Bucket=stack.names.artifacts_bucket, Key=key)
    events.put_events(
        Entries=[
            {
                "Source": "sume.webhooks",
                "DetailType": "Sume Job Completed",
                "Detail": f'{{"job_id": "{job.job_id}"}}',
                "EventBusName": stack.names.event_bus,
            }
        ]
    )
    sqs.send_message(QueueUrl=stack.names.dlq_url, MessageBody=job.job_id)
    try:
        deadline = time.monotonic() + SETTLE_BOUND
        while stack.announced()[job.job_id] < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        report = scenario.check(stack, run)
    finally:
        sqs.purge_queue(QueueUrl=stack.names.dlq_url)

    assert not report.ok
    assert report.problems == [
        "one job: artifact render-0.mp4 is not in the artifacts bucket",
        "one job: announced 2 times, not once",
        f"1 message(s) in the DLQ: ['{job.job_id}']",
    ]
    assert report.summary()["processed once"] == 0
