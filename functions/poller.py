"""Lambda handler for the poller (EventBridge schedule): status polls and sweeps."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from sume import aws
from sume.intake import build_intake
from sume.jobs import JobsTable
from sume.names import Metric
from sume.observability import logger, metrics, tracer
from sume.polling import Poller, PollPolicy
from sume.queue import JobQueue
from sume.secrets import SecretsUnavailable
from sume.settings import PollerSettings
from sume.status import StatusClient, api_token, status_getter


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


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler(capture_response=False)
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    margin = settings().time_budget_margin_seconds

    def time_left() -> float:
        return context.get_remaining_time_in_millis() / 1000 - margin

    try:
        summary = poller().run(time_left)
    except (ClientError, BotoCoreError, SecretsUnavailable):
        # The index could not be read: nothing changed, the next run retries,
        # and the raised error trips the function's error alarm meanwhile.
        metrics.add_metric(name=Metric.POLLER_ERRORS, unit="Count", value=1)
        logger.exception("poller run failed")
        raise
    metrics.add_metric(name=Metric.JOBS_POLLED, unit="Count", value=summary.polled)
    metrics.add_metric(name=Metric.JOBS_RECOVERED_BY_POLL, unit="Count", value=summary.recovered)
    metrics.add_metric(name=Metric.JOBS_LOST, unit="Count", value=summary.lost)
    metrics.add_metric(name=Metric.SWEPT_JOBS, unit="Count", value=summary.swept)
    metrics.add_metric(name=Metric.POLLER_STEP_ERRORS, unit="Count", value=summary.errors)
    metrics.add_metric(name=Metric.STATUS_URL_REFUSED, unit="Count", value=summary.refused)
    # Alarmed: a poll met a configuration fault; the run went on without it.
    metrics.add_metric(
        name=Metric.POLLER_CONFIGURATION_ERRORS, unit="Count", value=summary.configuration_errors
    )
    metrics.add_metric(name=Metric.POLLER_BACKLOG, unit="Count", value=summary.remaining)
    result = summary.as_dict()
    logger.info("poller run finished", **result)
    return result
