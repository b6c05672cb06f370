"""The jobs queue with its DLQ, and the announcement bus (``infra/messaging.py``)."""

from __future__ import annotations

from infra import spec
from sume.core.names import EVENT_SOURCE
from tests.infra.conftest import Stage, ref_name


def test_queue_visibility_redrive_encryption_and_tls(dev: Stage) -> None:
    _, queue = dev.one("JobsQueue", "AWS::SQS::Queue")
    _, dlq = dev.one("JobsQueueDeadLetters", "AWS::SQS::Queue")
    props = queue["Properties"]
    assert props["VisibilityTimeout"] >= 6 * dev.function("Worker")["Timeout"]
    assert props["VisibilityTimeout"] == spec.QUEUE_VISIBILITY_TIMEOUT
    redrive = props["RedrivePolicy"]
    assert redrive["maxReceiveCount"] == spec.MAX_RECEIVES
    assert ref_name(redrive["deadLetterTargetArn"]) == "JobsQueueDeadLetters"
    assert dlq["Properties"]["MessageRetentionPeriod"] == spec.DLQ_RETENTION_SECONDS
    for q in (props, dlq["Properties"]):
        assert q["SqsManagedSseEnabled"] is True
    for policy in dev.of_type("AWS::SQS::QueuePolicy").values():
        deny = policy["Properties"]["PolicyDocument"]["Statement"][0]
        assert deny["Effect"] == "Deny"
        assert deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}


def test_announcements_go_to_a_custom_bus(dev: Stage) -> None:
    _, bus = dev.one("AnnouncementsBus", "AWS::Events::EventBus")
    assert bus["Properties"]["Name"] == "SumeWebhooks-dev-jobs"
    assert EVENT_SOURCE == "sume.webhooks"
