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


def test_the_bus_archives_every_announcement_as_long_as_the_dedupe_lasts(
    dev: Stage, prod: Stage
) -> None:
    for stage, days in ((dev, 35), (prod, 14)):
        _, archive = stage.one("AnnouncementsArchive", "AWS::Events::Archive")
        props = archive["Properties"]
        # Only the project's own events: the applications' registrations are theirs.
        assert props["EventPattern"] == spec.ANNOUNCEMENTS_PATTERN == {"source": [EVENT_SOURCE]}
        assert ref_name(props["SourceArn"]) == "AnnouncementsBus"
        # dev: retention_days' default (the item, and so its dedupe, lives that long).
        assert props["RetentionDays"] == days
        output = stage.template["Outputs"][spec.OUTPUTS["announcements_archive"]]
        assert ref_name(output["Value"]) == "AnnouncementsArchive"


def test_no_role_of_the_stack_may_replay_or_change_the_archive(dev: Stage, prod: Stage) -> None:
    # A replay onto the archive's own bus needs no role: the operator's or the
    # integrator's own identity starts it (docs/cli.md lists what it needs).
    for stage in (dev, prod):
        for policy in stage.of_type("AWS::IAM::Policy").values():
            for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
                actions = statement["Action"]
                for action in [actions] if isinstance(actions, str) else actions:
                    assert "Replay" not in action and "Archive" not in action, action
