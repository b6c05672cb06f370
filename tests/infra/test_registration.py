"""Registering jobs by event (``infra/registration.py``): rule, queue, DLQ, policy, alarms."""

from __future__ import annotations

from infra import spec
from sume.core.names import METRICS_NAMESPACE, REGISTRATION_DETAIL_TYPE, SERVICE_NAME
from tests.infra.conftest import Stage, ref_name


def test_a_rule_on_the_bus_queues_registration_events_with_a_dlq(dev: Stage) -> None:
    props = dev.one("RegistrationsRule", "AWS::Events::Rule")[1]["Properties"]
    assert ref_name(props["EventBusName"]) == "AnnouncementsBus"
    assert props["EventPattern"] == {"detail-type": [REGISTRATION_DETAIL_TYPE]}
    assert props["EventPattern"] == spec.REGISTRATION_PATTERN
    (target,) = props["Targets"]
    assert ref_name(target["Arn"]) == "RegistrationsQueue"
    # What EventBridge cannot deliver lands where refused events do.
    assert ref_name(target["DeadLetterConfig"]["Arn"]) == "RegistrationsDeadLetters"

    queue = dev.one("RegistrationsQueue", "AWS::SQS::Queue")[1]["Properties"]
    assert queue["VisibilityTimeout"] >= 6 * dev.function("Poller")["Timeout"]
    redrive = queue["RedrivePolicy"]
    assert ref_name(redrive["deadLetterTargetArn"]) == "RegistrationsDeadLetters"
    assert redrive["maxReceiveCount"] == spec.MAX_RECEIVES
    dlq = dev.one("RegistrationsDeadLetters", "AWS::SQS::Queue")[1]["Properties"]
    assert dlq["MessageRetentionPeriod"] == spec.DLQ_RETENTION_SECONDS
    for q in (queue, dlq):
        assert q["SqsManagedSseEnabled"] is True
    for name in ("RegistrationsQueuePolicy", "RegistrationsDeadLettersPolicy"):
        statements = dev.one(name, "AWS::SQS::QueuePolicy")[1]["Properties"]["PolicyDocument"]
        (allow,) = [s for s in statements["Statement"] if s["Effect"] == "Allow"]
        assert allow["Principal"] == {"Service": "events.amazonaws.com"}
        assert "sqs:SendMessage" in allow["Action"]
        assert ref_name(allow["Condition"]["ArnEquals"]["aws:SourceArn"]) == "RegistrationsRule"


def test_putting_registration_events_is_a_managed_policy_and_nothing_more(
    dev: Stage, prod: Stage
) -> None:
    for stage in (dev, prod):
        _, policy = stage.one("RegistrationsPutPolicy", "AWS::IAM::ManagedPolicy")
        props = policy["Properties"]
        assert props["ManagedPolicyName"] == f"{stage.name}-register-jobs"
        (statement,) = props["PolicyDocument"]["Statement"]
        assert (statement["Effect"], statement["Action"]) == ("Allow", "events:PutEvents")
        assert ref_name(statement["Resource"]) == "AnnouncementsBus"
        assert statement["Condition"] == {
            "StringEquals": {"events:detail-type": REGISTRATION_DETAIL_TYPE}
        }
        # Attached by the applications that register jobs, by no role here.
        assert not {"Roles", "Users", "Groups"} & set(props)


def test_every_registration_that_did_not_register_is_alarmed(dev: Stage) -> None:
    alarms = dev.alarms()
    rejected = alarms["RegistrationsRejected"]
    assert (rejected["Namespace"], rejected["MetricName"]) == (
        METRICS_NAMESPACE,
        "RegistrationsRejected",
    )
    assert rejected["Dimensions"] == [{"Name": "service", "Value": SERVICE_NAME}]
    dlq = alarms["RegistrationDlqNotEmpty"]
    assert (dlq["Namespace"], dlq["MetricName"]) == (
        "AWS/SQS",
        "ApproximateNumberOfMessagesVisible",
    )
    assert ref_name(dlq["Dimensions"][0]["Value"]) == "RegistrationsDeadLetters"
    for props in (rejected, dlq):
        assert (props["Threshold"], props["ComparisonOperator"]) == (
            1,
            "GreaterThanOrEqualToThreshold",
        )
        assert [ref_name(a) for a in props["AlarmActions"]] == ["MonitoringAlarmTopic"]
