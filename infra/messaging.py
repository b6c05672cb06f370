"""The jobs queue (+ DLQ) and the event bus for job announcements."""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_events as events
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra import spec


class JobsQueue(Construct):
    """Follow-up work, one message per job (the body is the ``job_id``).

    Timeouts come from ``spec`` (what the local stack uses): the visibility
    timeout covers a whole worker batch, and a message that keeps failing is
    parked in the DLQ after ``MAX_RECEIVES`` attempts.
    """

    def __init__(self, scope: Construct, construct_id: str, *, is_dev: bool) -> None:
        super().__init__(scope, construct_id)
        removal = RemovalPolicy.DESTROY if is_dev else RemovalPolicy.RETAIN
        self.dlq = sqs.Queue(
            self,
            "DeadLetters",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=Duration.seconds(spec.DLQ_RETENTION_SECONDS),
            removal_policy=removal,
        )
        self.queue = sqs.Queue(
            self,
            "Queue",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            visibility_timeout=Duration.seconds(spec.QUEUE_VISIBILITY_TIMEOUT),
            dead_letter_queue=sqs.DeadLetterQueue(
                queue=self.dlq, max_receive_count=spec.MAX_RECEIVES
            ),
            removal_policy=removal,
        )


class AnnouncementBus(Construct):
    """Custom bus: subscribers match ``source`` = ``sume.names.EVENT_SOURCE``."""

    def __init__(self, scope: Construct, construct_id: str, *, bus_name: str) -> None:
        super().__init__(scope, construct_id)
        self.bus = events.EventBus(
            self,
            "Bus",
            event_bus_name=bus_name,
            description="Sume job announcements (completed, failed, canceled, processing error)",
        )
