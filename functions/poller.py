"""Lambda handler for the poller: status polls and sweeps (EventBridge schedule), and
registrations by event (the registrations queue's SQS event source).

A registration that raises is reported in ``batchItemFailures`` and retried
by SQS, then moved to the registrations DLQ; a refused one is parked there at
once by ``sume.registration`` and does not raise.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any

from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from botocore.exceptions import BotoCoreError, ClientError

from sume import aws
from sume.intake import build_intake
from sume.jobs import JobsTable
from sume.observability import logger, metrics, tracer
from sume.polling import Poller, PollPolicy
from sume.queue import DeadLetterQueue, JobQueue
from sume.registration import Registration, Registrations
from sume.registry import Registry
from sume.secrets import SecretsUnavailable
from sume.settings import PollerSettings, RegistrationSettings
from sume.status import StatusClient, api_token, status_getter

# As the worker's: a fresh result list per record, and no error for a batch
# whose every record will simply be retried.
batch = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)


@functools.cache
def settings() -> PollerSettings:
    return PollerSettings.from_env()


def build_poller(config: PollerSettings, clock: Callable[[], float] = time.time) -> Poller:
    table = config.table
    jobs = JobsTable(aws.client("dynamodb"), table.jobs_table_name, table.due_shards)
    queue = JobQueue(aws.client("sqs"), table.jobs_queue_url)
    intake = build_intake(
        table,
        config.payloads_bucket_name,
        config.redeliver_grace_seconds,
        config.sweep_after_seconds,
        aws.client,
    )
    token = api_token(
        config.api_token_arn,
        config.api_token_value,
        config.secret_cache_seconds,
        aws.client("secretsmanager") if config.api_token_arn else None,
    )
    getter = status_getter(
        config.url_policy,
        config.connect_timeout_seconds,
        config.read_timeout_seconds,
        config.total_timeout_seconds,
    )
    status = StatusClient(getter, token, config.url_policy.allowed_hosts)
    policy = PollPolicy(
        initial_seconds=config.poll_initial_seconds,
        max_interval_seconds=config.poll_max_interval_seconds,
        max_age_seconds=config.max_poll_age_seconds,
        sweep_after_seconds=config.sweep_after_seconds,
        poll_timeout_seconds=config.total_timeout_seconds,
    )
    return Poller(
        jobs,
        intake,
        queue,
        status.check,
        policy,
        shards=table.due_shards,
        max_parallel_polls=config.max_parallel_polls,
        clock=clock,
    )


@functools.cache
def poller() -> Poller:
    return build_poller(settings())


@functools.cache
def registrations() -> Registrations:
    config = RegistrationSettings.from_env()
    registry = config.registry
    jobs = JobsTable(aws.client("dynamodb"), registry.jobs_table_name, registry.due_shards)
    return Registrations(
        Registry(jobs, registry.poll_initial_seconds, allowed_hosts=registry.status_allowed_hosts),
        DeadLetterQueue(aws.client("sqs"), config.dead_letter_queue_url),
    )


def observe(registration: Registration) -> None:
    # Never the metadata: it is the application's, and may be personal.
    job_id, source = registration.job_id, registration.source
    if registration.refused:
        # Alarmed: the event is in the registrations DLQ and its job is not watched.
        metrics.add_metric(name="RegistrationsRejected", unit="Count", value=1)
        logger.error(
            "registration refused; the event is in the registrations DLQ",
            reason=registration.refused,
            error=registration.message,
            job_id=job_id,
            source=source,
        )
    elif registration.new:
        metrics.add_metric(name="JobsRegistered", unit="Count", value=1)
        logger.info("job registered", job_id=job_id, source=source)
    else:
        metrics.add_metric(name="RegistrationsOfKnownJobs", unit="Count", value=1)
        logger.info("registration of a known job: nothing changed", job_id=job_id, source=source)


def register_record(record: SQSRecord) -> None:
    logger.append_keys(message_id=record.message_id)
    try:
        registration = registrations().handle(record.body)
    except Exception:
        metrics.add_metric(name="RegistrationRetries", unit="Count", value=1)
        logger.exception("registration will be retried, then moved to the registrations DLQ")
        raise
    finally:
        logger.remove_keys(["message_id"])
    observe(registration)


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler(capture_response=False)
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    # The one place the two invocations are told apart: the registrations
    # queue's event source hands over SQS records, the schedule an event.
    if "Records" in event:
        return dict(
            process_partial_response(
                event=event, record_handler=register_record, processor=batch, context=context
            )
        )
    return run(context)


def run(context: Any) -> dict[str, Any]:
    margin = settings().time_budget_margin_seconds

    def time_left() -> float:
        return context.get_remaining_time_in_millis() / 1000 - margin

    try:
        summary = poller().run(time_left)
    except (ClientError, BotoCoreError, SecretsUnavailable):
        # The index could not be read: nothing changed, the next run retries,
        # and the raised error trips the function's error alarm meanwhile.
        metrics.add_metric(name="PollerErrors", unit="Count", value=1)
        logger.exception("poller run failed")
        raise
    metrics.add_metric(name="JobsPolled", unit="Count", value=summary.polled)
    metrics.add_metric(name="JobsRecoveredByPoll", unit="Count", value=summary.recovered)
    metrics.add_metric(name="JobsLost", unit="Count", value=summary.lost)
    metrics.add_metric(name="SweptJobs", unit="Count", value=summary.swept)
    metrics.add_metric(name="PollerStepErrors", unit="Count", value=summary.errors)
    metrics.add_metric(name="StatusUrlRefused", unit="Count", value=summary.refused)
    # Alarmed: a poll met a configuration fault; the run went on without it.
    metrics.add_metric(
        name="PollerConfigurationErrors", unit="Count", value=summary.configuration_errors
    )
    metrics.add_metric(name="PollerBacklog", unit="Count", value=summary.remaining)
    result = summary.as_dict()
    logger.info("poller run finished", **result)
    return result
