"""Lambda handler for the jobs queue (SQS): each job's follow-up work, once.

The message body is only the ``job_id``. A record that raises is reported in
``batchItemFailures`` and retried by SQS; its batch-mates are unaffected.
Permanent problems do not raise: they become processing errors, and so does
work that keeps failing once its attempt budget is spent. On a message's last
receive only a job the worker could not bring to any end raises, parked, so
its message goes to the DLQ (docs/worker.md, "Retries, giving up and the DLQ").
Each record gets the invocation's remaining time: work that could not end
before the function's deadline is not started (or its fetch is cut), the
claim is released and the record is retried.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from sume.core.errors import RETRYABLE, ConfigurationError
from sume.core.ids import InvalidJobId, check_job_id
from sume.core.names import Happened, Metric
from sume.core.observability import count, logger, metrics, tracer
from sume.core.runtime import time_left
from sume.working import compose
from sume.working.errors import Parked
from sume.working.failures import failure_details
from sume.working.results import Action, JobResult

OUTCOME_METRICS = {
    "completed": Metric.JOBS_COMPLETED,
    "failed": Metric.JOBS_FAILED,
    "canceled": Metric.JOBS_CANCELED,
}
# Every record gets a fresh result list; failing the whole batch on an
# all-failed batch would only make Lambda log an error for a normal retry.
batch = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)


def observe(result: JobResult) -> None:
    # Each job event names its job itself: in the local stack, where the three
    # functions share one logger, another thread may clear the appended keys.
    job_id = result.job_id
    if result.action is Action.LEFT_TO_SWEEPER:
        count(Metric.WORKER_RETRIES)
        logger.warning(
            "last receive of the message: acknowledged, the sweeper queues the job again",
            job_event=Happened.SWEEPER,
            job_id=job_id,
            reason=result.reason,
            attempts=result.attempts,
        )
        return
    if result.action is Action.LOST_ANNOUNCED:
        count(Metric.LOST_JOBS_ANNOUNCED)
        logger.info("lost job announced", attempts=result.attempts)
        return
    if result.action is Action.SKIPPED:
        count(Metric.JOBS_SKIPPED)
        log = logger.warning if result.reason in ("absent", "not_received") else logger.info
        log("job skipped", reason=result.reason, stored_outcome=result.outcome)
        return
    if result.action is Action.PROCESSED:
        count(Metric.JOBS_PROCESSED)
        count(OUTCOME_METRICS[str(result.outcome)])
        logger.info(
            "job processed",
            job_event=Happened.REPLAYED if result.replay else Happened.PROCESSED,
            job_id=job_id,
            outcome=result.outcome,
            artifacts=len(result.artifacts),
            artifacts_copied=result.artifacts_copied,
            bytes_copied=result.bytes_copied,
            attempts=result.attempts,
            sequence=result.sequence,
        )
    else:
        count(Metric.PROCESSING_ERRORS)
        logger.error(
            "job processing error",
            job_event=Happened.PROCESSING_ERROR,
            job_id=job_id,
            code=result.reason,
            outcome=result.outcome,
            artifacts_copied=result.artifacts_copied,
            attempts=result.attempts,
            replay=result.replay or None,
            sequence=result.sequence,
        )
    if result.details_dropped:
        logger.error(
            "DynamoDB refused the full finish write: the item holds only the state and codes",
            outcome=result.outcome,
        )
    if result.bytes_copied:
        metrics.add_metric(name=Metric.ARTIFACT_BYTES, unit="Bytes", value=result.bytes_copied)


def receive_count(record: SQSRecord) -> int:
    """How often SQS has handed this message out, this time included (1 if unsaid)."""
    attributes = record.get("attributes") or {}
    count = str(attributes.get("ApproximateReceiveCount", ""))
    return int(count) if count.isdigit() else 1


def record_handler(record: SQSRecord, lambda_context: Any = None) -> None:
    try:
        # The body exactly as sent: an id is never stripped or rewritten.
        job_id = check_job_id(record.body)
    except InvalidJobId as exc:
        # No job can have this id, so a retry cannot help: acknowledge it.
        count(Metric.INVALID_MESSAGES)
        logger.warning(
            "message body is not a job id; dropped",
            reason=exc.reason,
            rule=str(exc),
            message_id=record.message_id,
        )
        return
    logger.append_keys(job_id=job_id, message_id=record.message_id)
    receives = receive_count(record)
    try:
        left = None if lambda_context is None else time_left(lambda_context)
        result = compose.worker_service().process(job_id, left, receives)
    except Parked as exc:
        count(Metric.WORKER_FAILURES)
        cause = exc.__cause__ or exc
        logger.error(
            "job parked on its message's last receive; the message goes to the DLQ",
            job_event=Happened.DLQ,
            job_id=job_id,
            error=failure_details(cause),
            kind=type(cause).__name__,
            receives=receives,
        )
        raise
    except ConfigurationError as error:
        # Deployed wrong: nothing was claimed, and SQS hands the message back
        # until ops fix the setting the log names (never its value).
        count(Metric.WORKER_FAILURES)
        logger.error("worker misconfigured", reason=str(error))
        raise
    except RETRYABLE as exc:
        # A later attempt may fix it: SQS redelivers the message.
        count(Metric.WORKER_RETRIES)
        # Not repr(exc): a fetch error's redacted form keeps presigned
        # query strings out of the logs.
        logger.warning(
            "job will be retried",
            job_event=Happened.RETRY,
            job_id=job_id,
            error=failure_details(exc),
            kind=type(exc).__name__,
            receives=receives,
        )
        raise
    except Exception:
        count(Metric.WORKER_FAILURES)
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
