"""Lambda handler for the poller (EventBridge schedule): status polls and sweeps."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from sume import services
from sume.observability import logger, metrics, tracer
from sume.polling import RunSummary
from sume.secrets import SecretsUnavailable


def observe(summary: RunSummary) -> dict[str, Any]:
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


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler(capture_response=False)
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    try:
        summary = services.poller_service().run(
            lambda: context.get_remaining_time_in_millis() / 1000
        )
    except (ClientError, BotoCoreError, SecretsUnavailable):
        # The index could not be read: nothing changed, the next run retries,
        # and the raised error trips the function's error alarm meanwhile.
        metrics.add_metric(name="PollerErrors", unit="Count", value=1)
        logger.exception("poller run failed")
        raise
    return observe(summary)
