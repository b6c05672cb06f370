"""The jobs queue (+ DLQ) and the event bus for job announcements."""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_events as events
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra import spec
from infra.nag import acknowledge


class JobsQueue(Construct):
    """Follow-up work, one message per job (the body is the ``job_id``).

    Timeouts come from ``spec`` (what the local stack uses): the visibility
    timeout covers a whole worker batch, and a message that keeps failing is
    parked in the DLQ after ``MAX_RECEIVES`` attempts.
    """

    def __init__(self, scope: Construct, construct_id: str, *, is_dev: bool) -> None:
        super().__init__(scope, construct_id)
        self.queue, self.dlq = queue_with_dlq(
            self, visibility_timeout_seconds=spec.QUEUE_VISIBILITY_TIMEOUT, is_dev=is_dev
        )


def queue_with_dlq(
    scope: Construct, *, visibility_timeout_seconds: int, is_dev: bool
) -> tuple[sqs.Queue, sqs.Queue]:
    """``scope``'s ``Queue`` and its ``DeadLetters``, where a message goes after
    ``spec.MAX_RECEIVES`` receives: encrypted, TLS only, kept with the data."""
    removal = RemovalPolicy.DESTROY if is_dev else RemovalPolicy.RETAIN
    dlq = sqs.Queue(
        scope,
        "DeadLetters",
        encryption=sqs.QueueEncryption.SQS_MANAGED,
        enforce_ssl=True,
        retention_period=Duration.seconds(spec.DLQ_RETENTION_SECONDS),
        removal_policy=removal,
    )
    acknowledge(
        dlq,
        "Serverless-SQSRedrivePolicy",
        "This is the dead-letter queue: its messages wait here to be inspected and redriven "
        "(sume-webhooks dlq peek / redrive) under an alarm, with nowhere further to go.",
    )
    queue = sqs.Queue(
        scope,
        "Queue",
        encryption=sqs.QueueEncryption.SQS_MANAGED,
        enforce_ssl=True,
        visibility_timeout=Duration.seconds(visibility_timeout_seconds),
        dead_letter_queue=sqs.DeadLetterQueue(queue=dlq, max_receive_count=spec.MAX_RECEIVES),
        removal_policy=removal,
    )
    return queue, dlq


class AnnouncementBus(Construct):
    """Custom bus: subscribers match ``source`` = ``sume.core.names.EVENT_SOURCE``.

    Its archive keeps the project's own announcements (not the applications'
    registration events) for ``archive_days``, so an integrator whose consumer was
    down longer than EventBridge retries its target replays the window to its own
    rule (``sume-webhooks announcements replay``): the same events, nothing redone.
    A replay onto the archive's own bus needs no role, so the stack grants nothing.
    """

    def __init__(
        self, scope: Construct, construct_id: str, *, bus_name: str, archive_days: int
    ) -> None:
        super().__init__(scope, construct_id)
        self.bus = events.EventBus(
            self,
            "Bus",
            event_bus_name=bus_name,
            description="Sume job announcements (completed, failed, canceled, processing error)",
        )
        self.archive = events.Archive(
            self,
            "Archive",
            source_event_bus=self.bus,
            event_pattern=events.EventPattern(source=list(spec.ANNOUNCEMENTS_PATTERN["source"])),
            retention=Duration.days(archive_days),
            description="Every announcement, for replays to one subscriber's rule",
        )
