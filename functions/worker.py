"""Lambda handler for the jobs queue (SQS): each job's follow-up work, once.

The message body is only the ``job_id``. A record that raises is reported in
``batchItemFailures`` and retried by SQS (then the DLQ); its batch-mates are
unaffected. Permanent problems do not raise: they become processing errors.
Each record gets the invocation's remaining time: work that could not end
before the function's deadline is not started (or its fetch is cut), the
claim is released and the record is retried.
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
from sume.announce import AnnounceFailed, Announcer
from sume.artifacts import ArtifactStore
from sume.fetch import SafeHttp, TransientFetchError
from sume.jobs import JobsTable
from sume.observability import logger, metrics, tracer
from sume.payloads import PayloadStore
from sume.processing import (
    Action,
    JobBusy,
    JobProcessor,
    JobResult,
    LeaseRunningOut,
    OutOfTime,
    TimeLeft,
    failure_details,
)
from sume.settings import WorkerSettings

OUTCOME_METRICS = {"completed": "JobsCompleted", "failed": "JobsFailed", "canceled": "JobsCanceled"}
# Failures a later attempt may fix: SQS redelivers the message.
RETRYABLE = (
    JobBusy,
    LeaseRunningOut,
    OutOfTime,
    TransientFetchError,
    AnnounceFailed,
    ClientError,
    BotoCoreError,
)

# Every record gets a fresh result list; failing the whole batch on an
# all-failed batch would only make Lambda log an error for a normal retry.
batch = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)


def build_processor(
    settings: WorkerSettings,
    client: Callable[..., Any] = aws.client,
    clock: Callable[[], float] = time.time,
) -> JobProcessor:
    s3 = client("s3", patient=True)
    http = SafeHttp(
        settings.url_policy,
        settings.connect_timeout_seconds,
        settings.read_timeout_seconds,
        total_timeout=settings.total_timeout_seconds,
    )
    return JobProcessor(
        jobs=JobsTable(
            client("dynamodb", patient=True),
            settings.table.jobs_table_name,
            settings.table.due_shards,
        ),
        # get() reads the bucket from the s3:// reference stored on the item.
        payloads=PayloadStore(lambda: s3, settings.payloads_bucket_name or ""),
        artifacts=ArtifactStore(
            s3,
            settings.artifacts_bucket_name,
            http,
            settings.max_artifact_bytes,
            settings.part_size_bytes,
            connections=settings.artifact_connections,
            uploads=settings.artifact_uploads,
            planned_bytes_per_second=settings.artifact_planned_bytes_per_second,
        ),
        announcer=Announcer(client("events", patient=True), settings.event_bus_name),
        clock=clock,
        lease_seconds=settings.lease_seconds,
        retention_days=settings.retention_days,
        max_attempts=settings.max_attempts,
        time_reserve_seconds=settings.time_reserve_seconds,
    )


@functools.cache
def processor() -> JobProcessor:
    return build_processor(WorkerSettings.from_env())


def observe(result: JobResult) -> None:
    if result.action is Action.SKIPPED:
        metrics.add_metric(name="JobsSkipped", unit="Count", value=1)
        log = logger.warning if result.reason in ("absent", "not_received") else logger.info
        log("job skipped", reason=result.reason, stored_outcome=result.outcome)
        return
    if result.action is Action.PROCESSED:
        metrics.add_metric(name="JobsProcessed", unit="Count", value=1)
        metrics.add_metric(name=OUTCOME_METRICS[str(result.outcome)], unit="Count", value=1)
        logger.info(
            "job processed",
            outcome=result.outcome,
            artifacts=len(result.artifacts),
            artifacts_copied=result.artifacts_copied,
            bytes_copied=result.bytes_copied,
            attempts=result.attempts,
        )
    else:
        metrics.add_metric(name="ProcessingErrors", unit="Count", value=1)
        logger.error(
            "job processing error",
            code=result.reason,
            outcome=result.outcome,
            artifacts_copied=result.artifacts_copied,
            attempts=result.attempts,
        )
    if result.details_dropped:
        logger.error(
            "DynamoDB refused the full finish write: the item holds only the state and codes",
            outcome=result.outcome,
        )
    if result.bytes_copied:
        metrics.add_metric(name="ArtifactBytes", unit="Bytes", value=result.bytes_copied)


def remaining_time(context: Any) -> TimeLeft | None:
    """Seconds left in the invocation, from the Lambda context (None without one)."""
    if context is None:
        return None
    return lambda: context.get_remaining_time_in_millis() / 1000


def record_handler(record: SQSRecord, lambda_context: Any = None) -> None:
    job_id = record.body.strip()
    logger.append_keys(job_id=job_id, message_id=record.message_id)
    try:
        result = processor().process(job_id, remaining_time(lambda_context))
    except RETRYABLE as exc:
        metrics.add_metric(name="WorkerRetries", unit="Count", value=1)
        # Not repr(exc): a fetch error's redacted form keeps presigned
        # query strings out of the logs.
        logger.warning("job will be retried", error=failure_details(exc), kind=type(exc).__name__)
        raise
    except Exception:
        metrics.add_metric(name="WorkerFailures", unit="Count", value=1)
        logger.exception("job failed unexpectedly; SQS retries it, then the DLQ")
        raise
    else:
        observe(result)
    finally:
        logger.remove_keys(["job_id", "message_id"])


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler(capture_response=False)
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return dict(
        process_partial_response(
            event=event, record_handler=record_handler, processor=batch, context=context
        )
    )
