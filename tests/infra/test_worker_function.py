"""The worker's construct (``infra/functions/worker.py``): environment, queue and grants."""

from __future__ import annotations

from sume.working.settings import WorkerSettings
from tests.infra.conftest import CONSUME, ITEMS, Stage, logs_and_traces, ref_name


def test_the_worker_environment_satisfies_its_settings(dev: Stage, prod: Stage) -> None:
    worker = WorkerSettings.from_env(prod.environment("Worker"))
    assert worker.artifacts_bucket_name == "resolved-BucketsArtifacts"
    assert worker.payloads_bucket_name == "resolved-BucketsPayloads"
    assert worker.event_bus_name == "resolved-AnnouncementsBus"
    assert worker.retention_days == 60
    assert worker.url_policy.allowed_hosts == ("cdn.sume.example",)
    assert "ARTIFACT_ALLOWED_HOSTS" not in dev.environment("Worker")


def test_the_worker_knows_its_queue_as_deployed_and_gives_up_within_its_receives(
    prod: Stage,
) -> None:
    worker = WorkerSettings.from_env(prod.environment("Worker"))
    _, queue = prod.one("JobsQueue", "AWS::SQS::Queue")
    _, dlq = prod.one("JobsQueueDeadLetters", "AWS::SQS::Queue")
    assert worker.max_receives == queue["Properties"]["RedrivePolicy"]["maxReceiveCount"]
    assert worker.queue_retry_seconds == queue["Properties"]["VisibilityTimeout"]
    assert worker.dlq_retention_seconds == dlq["Properties"]["MessageRetentionPeriod"]
    # A job whose work keeps failing ends as a processing error, never in the DLQ.
    assert worker.max_attempts == worker.max_receives


def test_the_worker_may_do_only_what_its_code_does(dev: Stage) -> None:
    assert dev.permissions("Worker") == {
        **logs_and_traces("Worker"),
        "JobsTable": ITEMS,
        "JobsQueue": CONSUME,
        "BucketsPayloads/events/*": {"s3:GetObject"},
        "BucketsArtifacts/*": {"s3:PutObject", "s3:AbortMultipartUpload"},
        "AnnouncementsBus": {"events:PutEvents"},
    }


def test_worker_event_source_reports_item_failures_with_window_and_cap(
    dev: Stage, prod: Stage
) -> None:
    for stage, batch, window, cap in ((dev, 10, 5, 10), (prod, 5, 2, 4)):
        props = stage.event_source("JobsQueue")
        assert ref_name(props["EventSourceArn"]) == "JobsQueue"
        assert ref_name(props["FunctionName"]) == "FunctionsWorkerFunction"
        assert props["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
        assert props["BatchSize"] == batch
        assert props["MaximumBatchingWindowInSeconds"] == window
        assert props["ScalingConfig"] == {"MaximumConcurrency": cap}
