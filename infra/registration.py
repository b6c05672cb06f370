"""Registering jobs by event: the rule on the bus, its queue and DLQ, the managed
policy applications attach to put the event, and the alarms on what could not
register. The poller's side (its event source on the queue, its grant on the
DLQ) is ``infra.functions.poller.PollerFunction.take_registrations``.

Why a queue between the rule and the poller rather than the function as the
rule's target: EventBridge invokes a function asynchronously, so an event the
function refuses would be a function error (tripping the poller's error alarm,
which means its runs are failing) and its on-failure destination, set per
function, would also collect failed scheduled runs. Through a queue, a refused
event is parked by the code in the DLQ at once with its reason, a failure
that may pass is retried by SQS, and the DLQ holds registration events only,
ready to be moved back to the queue once the cause is fixed.
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from constructs import Construct

from infra import spec
from infra.messaging import queue_with_dlq
from infra.monitoring import PERIOD, Monitoring, app_metric
from sume.core.names import REGISTRATION_DETAIL_TYPE, Metric


class JobRegistrations(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        bus: events.IEventBus,
        policy_name: str,
        is_dev: bool,
    ) -> None:
        super().__init__(scope, construct_id)
        self.queue, self.dlq = queue_with_dlq(
            self,
            visibility_timeout_seconds=spec.REGISTRATIONS_VISIBILITY_TIMEOUT,
            is_dev=is_dev,
        )
        self.rule = events.Rule(
            self,
            "Rule",
            event_bus=bus,
            description=f"Queues '{REGISTRATION_DETAIL_TYPE}' events for the poller to register",
            event_pattern=events.EventPattern(detail_type=spec.REGISTRATION_PATTERN["detail-type"]),
            # What EventBridge could not deliver (after its own retries) waits
            # in the same DLQ as what the poller refused.
            targets=[targets.SqsQueue(self.queue, dead_letter_queue=self.dlq)],
        )
        # Who may register jobs is an IAM decision: this policy, attached to an
        # application's role, lets it put registration events on the bus and
        # nothing else there (never an announcement).
        self.put_policy = iam.ManagedPolicy(
            self,
            "PutPolicy",
            managed_policy_name=policy_name,
            description=f"Put '{REGISTRATION_DETAIL_TYPE}' events on the Sume webhooks bus",
            statements=[
                iam.PolicyStatement(
                    actions=["events:PutEvents"],
                    resources=[bus.event_bus_arn],
                    conditions={"StringEquals": {"events:detail-type": REGISTRATION_DETAIL_TYPE}},
                )
            ],
        )

    def watch(self, monitoring: Monitoring) -> None:
        """Alarm on every event that did not register, and graph registrations."""
        monitoring.add_alarm(
            Metric.REGISTRATIONS_REJECTED,
            app_metric(Metric.REGISTRATIONS_REJECTED),
            1,
            "A registration event was refused (unknown or missing field, a status_url "
            "off status_allowed_hosts, bad job_id or metadata): its job is not watched. "
            f"The event waits in the registrations DLQ: `{monitoring.cli} dlq peek "
            "--registrations` shows its reason.",
        )
        dlq_depth = self.dlq.metric_approximate_number_of_messages_visible(
            period=Duration.minutes(1), statistic=cw.Stats.MAXIMUM
        )
        monitoring.add_alarm(
            "RegistrationDlqNotEmpty",
            dlq_depth,
            1,
            "Registration events wait in the registrations DLQ: refused (message "
            "attributes reason and message), failed repeatedly, or undeliverable: "
            f"`{monitoring.cli} dlq peek --registrations` says which. Fix the sender or "
            f"the cause, then `{monitoring.cli} dlq redrive --registrations`.",
        )
        monitoring.dashboard.add_widgets(
            cw.GraphWidget(
                title="Registrations by event",
                left=[
                    app_metric(name)
                    for name in (
                        Metric.JOBS_REGISTERED,
                        Metric.REGISTRATIONS_OF_KNOWN_JOBS,
                        Metric.REGISTRATIONS_REJECTED,
                        Metric.REGISTRATION_RETRIES,
                    )
                ],
                right=[dlq_depth.with_(period=PERIOD, label="DLQ")],
                width=8,
            )
        )
