"""Alarms for work left paused (``sume-webhooks pause``, docs/operations.md "Pausing the work").

Each watches the switch itself, not the pause record: whoever turned it (the
CLI, the console, a deploy gone wrong), work that stays off is found. The
worker's event source mapping long-polls the jobs queue without pause while
enabled, so a window with no receive at all, empty ones included, is a mapping
that reads nothing; so does the poller's shards queue mapping, which starts a
round's runs (a poller paused there by hand, its schedule still ticking, is
found too). The poller's schedule rule is invoked every ``poll_rate_minutes``;
a window with no invocation is a schedule that does not tick. Missing data is
such a window too: SQS stops publishing for a queue nobody calls. No metric is
the receiver's, whose hot path reads nothing of this.
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_events as events
from aws_cdk import aws_sqs as sqs

# The alarms' step: the window is this many minutes times the periods.
STEP_MINUTES = 5


@dataclass(frozen=True)
class PausedAlarm:
    construct_id: str
    metric: cw.IMetric
    """1 in a step the work was not started, else 0."""
    text: str


def periods(minutes: int) -> int:
    """Steps of the window: every one must be idle before the alarm fires."""
    return max(1, -(-minutes // STEP_MINUTES))


def queue_reads(
    queue: sqs.IQueue, label: str = "jobs queue receives (0: the worker is paused)"
) -> cw.MathExpression:
    step = Duration.minutes(STEP_MINUTES)
    return cw.MathExpression(
        expression="FILL(received, 0) + FILL(empty, 0)",
        using_metrics={
            "received": queue.metric_number_of_messages_received(period=step),
            "empty": queue.metric_number_of_empty_receives(period=step),
        },
        label=label,
        period=step,
    )


def schedule_ticks(rule: events.IRule) -> cw.Metric:
    return cw.Metric(
        namespace="AWS/Events",
        metric_name="Invocations",
        dimensions_map={"RuleName": rule.rule_name},
        statistic=cw.Stats.SUM,
        period=Duration.minutes(STEP_MINUTES),
        label="poller schedule ticks (0: the poller is paused)",
    )


def _idle(metric: cw.IMetric, label: str) -> cw.MathExpression:
    return cw.MathExpression(
        expression="IF(FILL(work, 0) == 0, 1, 0)",
        using_metrics={"work": metric},
        label=label,
        period=Duration.minutes(STEP_MINUTES),
    )


def paused_alarms(
    queue: sqs.IQueue, schedule: events.IRule, shards: sqs.IQueue, cli: str, minutes: int
) -> list[PausedAlarm]:
    """``shards``: the poller's shards queue, whose mapping starts each round's runs."""
    report = f"`{cli} report` says who paused it, since when and why"
    return [
        PausedAlarm(
            "WorkerPaused",
            _idle(queue_reads(queue), "nothing read the jobs queue"),
            f"Nothing has read the jobs queue for {minutes} minutes: the worker's event "
            "source mapping is disabled (paused, or by hand) or gone. Deliveries are still "
            f"verified and stored, but no job is worked. {report}; once the cause is fixed, "
            f"`{cli} resume worker`, then `{cli} report --check`.",
        ),
        PausedAlarm(
            "PollerPaused",
            _idle(schedule_ticks(schedule), "the poller's schedule did not tick"),
            f"The poller's schedule has not ticked for {minutes} minutes: its rule is "
            "disabled (paused, or by hand). No status_url is polled and no owed work "
            f"swept. {report}; once the cause is fixed, `{cli} resume poller`.",
        ),
        PausedAlarm(
            "PollerRoundsPaused",
            _idle(
                queue_reads(shards, "shards queue receives (0: the poller's rounds are paused)"),
                "nothing read the poller's shards queue",
            ),
            f"Nothing has read the poller's shards queue for {minutes} minutes: the "
            "poller's shards mapping is disabled (paused, or by hand) or gone. The "
            "schedule may tick, but no round's run starts: no status_url is polled and "
            f"no owed work swept. {report}; once the cause is fixed, "
            f"`{cli} resume poller`.",
        ),
    ]
