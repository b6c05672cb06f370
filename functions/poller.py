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
from sume.core.names import EXPIRY_EVENT, Happened, Metric
from sume.core.observability import count, logger, metrics, retried, tracer
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
        count(Metric.REGISTRATIONS_REJECTED)
        logger.error(
            "registration refused; the event is in the registrations DLQ",
            job_event=Happened.REFUSED,
            reason=registration.refused,
            error=registration.message,
            job_id=job_id,
            source=source,
        )
    elif registration.new:
        count(Metric.JOBS_REGISTERED)
        logger.info("job registered", job_event=Happened.REGISTERED, job_id=job_id, source=source)
    else:
        count(Metric.REGISTRATIONS_OF_KNOWN_JOBS)
        logger.info("registration of a known job: nothing changed", job_id=job_id, source=source)


def register_record(record: SQSRecord) -> None:
    logger.append_keys(message_id=record.message_id)
    try:
        with retried(
            Metric.REGISTRATION_RETRIES,
            "registration will be retried, then moved to the registrations DLQ",
            errors=(Exception,),
        ):
            registration = compose.registrations_service().handle(record.body)
    finally:
        logger.remove_keys(["message_id"])
    observe_registration(registration)


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler(capture_response=False)
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    # The one place the invocations are told apart: the schedules hand over
    # an event (the expiry's says so, two regions only), the two queues'
    # event sources SQS records, each with its queue's ARN.
    records = event.get("Records")
    if records is None:
        return expire(context) if event.get(EXPIRY_EVENT) is True else fan_out()
    if records and compose.fanout_settings().is_shards_queue(records[0]["eventSourceARN"]):
        return {"runs": [run(SQSRecord(record), context) for record in records]}
    return dict(
        process_partial_response(
            event=event, record_handler=register_record, processor=batch, context=context
        )
    )


def fan_out() -> dict[str, int]:
    gauge_awaiting()
    gauge_serving()
    # Should it fail, the assignments sent still run; the next tick fans out the round anew.
    with retried(Metric.POLLER_ERRORS, "poller round not fanned out"):
        started = compose.fanout_service().start()
    count(Metric.POLLER_RUNS_STARTED, started["runs"])
    logger.info("poller round fanned out", round=started["round"], runs=started["runs"])
    return started


def run(record: SQSRecord, context: Any) -> dict[str, Any]:
    service = compose.shard_run_service()
    try:
        assignment = service.parse(record.body)
    except InvalidAssignment as exc:
        # Not ours to run, and sent again it would fail again: dropped.
        count(Metric.POLLER_ERRORS)
        logger.error("shard assignment refused", error=str(exc), message_id=record.message_id)
        return {"refused": exc.reason}
    # Should the index or the leases not be read: nothing changed, SQS retries
    # the shards not yet claimed, the next round the rest, and the raised error
    # trips the function's error alarm meanwhile.
    with retried(Metric.POLLER_ERRORS, "poller run failed", round=assignment.round):
        summary = service.work(assignment, time_left(context))
    return observe(summary)


def expire(context: Any) -> dict[str, Any]:
    # Should it fail, the next day's run finds what this one left.
    with retried(Metric.POLLER_ERRORS, "expiry of ended jobs failed"):
        done = compose.expiry_service().run(time_left(context))
    count(Metric.JOBS_EXPIRED, done.deleted)
    result = done.as_dict()
    logger.info("ended jobs past their retention deleted", **result)
    return result


def gauge_awaiting() -> None:
    # Counted by the tick, before its round's polls, so a job the round recovers
    # counts as having waited.
    try:
        awaiting = compose.awaiting_gauge().count()
    except RETRYABLE:
        # The polls may still work. A run without the gauge is no news to the
        # silence alarm (missing data), and PollerStepErrors shows the gap.
        count(Metric.POLLER_STEP_ERRORS)
        logger.exception("awaiting jobs could not be counted")
        return
    # Alarmed (DeliverySilence): jobs wait while no verified delivery comes.
    count(Metric.JOBS_AWAITING, awaiting.jobs)
    if not awaiting.exact:
        logger.info(
            "awaiting jobs counted in part: the gauge is a lower bound", awaiting=awaiting.jobs
        )


def gauge_serving() -> None:
    # Two regions only. Alarmed with the silence alarms: they page only where
    # the failover domain's deliveries go (docs/operations.md, "What to watch").
    probe = compose.serving_probe()
    if probe is not None:
        count(Metric.SERVING, int(probe.serving()))


def observe(summary: RunSummary) -> dict[str, Any]:
    count(Metric.JOBS_POLLED, summary.polled)
    count(Metric.JOBS_RECOVERED_BY_POLL, summary.recovered)
    count(Metric.JOBS_LOST, summary.lost)
    count(Metric.LOST_JOBS_ANNOUNCED, summary.lost_announced)
    count(Metric.SWEPT_JOBS, summary.swept)
    count(Metric.POLLER_STEP_ERRORS, summary.errors)
    count(Metric.STATUS_URL_REFUSED, summary.refused)
    # Alarmed: a job's status_url answered about another job.
    count(Metric.STATUS_ANSWERS_FOR_OTHER_JOBS, summary.other_job_answers)
    # Alarmed: a poll met a configuration fault; the run went on without it.
    count(Metric.POLLER_CONFIGURATION_ERRORS, summary.configuration_errors)
    count(Metric.POLLER_BACKLOG, summary.remaining)
    result = summary.as_dict()
    logger.info("poller run finished", **result)
    return result
