"""Lambda handler for the poller: a round's fan-out (EventBridge schedule), its runs of
status polls and sweeps (the shards queue's SQS event source), and registrations by
event (the registrations queue's SQS event source).

A run that raises (the index or the leases table could not be read) is retried
by SQS; the retry works only the shards no run of that round has claimed.

A registration that raises is reported in ``batchItemFailures`` and retried
by SQS, then moved to the registrations DLQ; a refused one is parked there at
once by ``sume.polling.registration`` and does not raise.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from sume.core.errors import RETRYABLE
from sume.core.names import Metric
from sume.core.observability import logger, metrics, tracer
from sume.core.runtime import time_left
from sume.polling import compose
from sume.polling.fanout import InvalidAssignment
from sume.polling.poller import RunSummary
from sume.polling.registration import Registration

# As the worker's: a fresh result list per record, and no error for a batch
# whose every record will simply be retried.
batch = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)


def observe_registration(registration: Registration) -> None:
    # Never the metadata: it is the application's, and may be personal.
    job_id, source = registration.job_id, registration.source
    if registration.refused:
        # Alarmed: the event is in the registrations DLQ and its job is not watched.
        metrics.add_metric(name=Metric.REGISTRATIONS_REJECTED, unit="Count", value=1)
        logger.error(
            "registration refused; the event is in the registrations DLQ",
            reason=registration.refused,
            error=registration.message,
            job_id=job_id,
            source=source,
        )
    elif registration.new:
        metrics.add_metric(name=Metric.JOBS_REGISTERED, unit="Count", value=1)
        logger.info("job registered", job_id=job_id, source=source)
    else:
        metrics.add_metric(name=Metric.REGISTRATIONS_OF_KNOWN_JOBS, unit="Count", value=1)
        logger.info("registration of a known job: nothing changed", job_id=job_id, source=source)


def register_record(record: SQSRecord) -> None:
    logger.append_keys(message_id=record.message_id)
    try:
        registration = compose.registrations_service().handle(record.body)
    except Exception:
        metrics.add_metric(name=Metric.REGISTRATION_RETRIES, unit="Count", value=1)
        logger.exception("registration will be retried, then moved to the registrations DLQ")
        raise
    finally:
        logger.remove_keys(["message_id"])
    observe_registration(registration)


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler(capture_response=False)
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    # The one place the three invocations are told apart: the schedule hands
    # over an event, the two queues' event sources SQS records, each with
    # its queue's ARN.
    records = event.get("Records")
    if records is None:
        return fan_out()
    if records and compose.fanout_settings().is_shards_queue(records[0]["eventSourceARN"]):
        return {"runs": [run(SQSRecord(record), context) for record in records]}
    return dict(
        process_partial_response(
            event=event, record_handler=register_record, processor=batch, context=context
        )
    )


def fan_out() -> dict[str, int]:
    gauge_awaiting()
    try:
        started = compose.fanout_service().start()
    except RETRYABLE:
        # The assignments sent still run; the next tick fans out the round anew.
        metrics.add_metric(name=Metric.POLLER_ERRORS, unit="Count", value=1)
        logger.exception("poller round not fanned out")
        raise
    metrics.add_metric(name=Metric.POLLER_RUNS_STARTED, unit="Count", value=started["runs"])
    logger.info("poller round fanned out", round=started["round"], runs=started["runs"])
    return started


def run(record: SQSRecord, context: Any) -> dict[str, Any]:
    service = compose.shard_run_service()
    try:
        assignment = service.parse(record.body)
    except InvalidAssignment as exc:
        # Not ours to run, and sent again it would fail again: dropped.
        metrics.add_metric(name=Metric.POLLER_ERRORS, unit="Count", value=1)
        logger.error("shard assignment refused", error=str(exc), message_id=record.message_id)
        return {"refused": exc.reason}
    try:
        summary = service.work(assignment, time_left(context))
    except RETRYABLE:
        # The index or the leases could not be read: nothing changed, SQS
        # retries the shards not yet claimed, the next round the rest, and
        # the raised error trips the function's error alarm meanwhile.
        metrics.add_metric(name=Metric.POLLER_ERRORS, unit="Count", value=1)
        logger.exception("poller run failed", round=assignment.round)
        raise
    return observe(summary)


def gauge_awaiting() -> None:
    # Counted by the tick, before its round's polls, so a job the round recovers
    # counts as having waited.
    try:
        awaiting = compose.awaiting_gauge().count()
    except RETRYABLE:
        # The polls may still work. A run without the gauge is no news to the
        # silence alarm (missing data), and PollerStepErrors shows the gap.
        metrics.add_metric(name=Metric.POLLER_STEP_ERRORS, unit="Count", value=1)
        logger.exception("awaiting jobs could not be counted")
        return
    # Alarmed (DeliverySilence): jobs wait while no verified delivery comes.
    metrics.add_metric(name=Metric.JOBS_AWAITING, unit="Count", value=awaiting.jobs)
    if not awaiting.exact:
        logger.info(
            "awaiting jobs counted in part: the gauge is a lower bound", awaiting=awaiting.jobs
        )


def observe(summary: RunSummary) -> dict[str, Any]:
    metrics.add_metric(name=Metric.JOBS_POLLED, unit="Count", value=summary.polled)
    metrics.add_metric(name=Metric.JOBS_RECOVERED_BY_POLL, unit="Count", value=summary.recovered)
    metrics.add_metric(name=Metric.JOBS_LOST, unit="Count", value=summary.lost)
    metrics.add_metric(name=Metric.SWEPT_JOBS, unit="Count", value=summary.swept)
    metrics.add_metric(name=Metric.POLLER_STEP_ERRORS, unit="Count", value=summary.errors)
    metrics.add_metric(name=Metric.STATUS_URL_REFUSED, unit="Count", value=summary.refused)
    # Alarmed: a job's status_url answered about another job.
    metrics.add_metric(
        name=Metric.STATUS_ANSWERS_FOR_OTHER_JOBS, unit="Count", value=summary.other_job_answers
    )
    # Alarmed: a poll met a configuration fault; the run went on without it.
    metrics.add_metric(
        name=Metric.POLLER_CONFIGURATION_ERRORS, unit="Count", value=summary.configuration_errors
    )
    metrics.add_metric(name=Metric.POLLER_BACKLOG, unit="Count", value=summary.remaining)
    result = summary.as_dict()
    logger.info("poller run finished", **result)
    return result
