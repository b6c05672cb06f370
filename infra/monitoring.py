"""Alarms (to one SNS topic) and the operations dashboard."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Aws, Duration, RemovalPolicy, Stack
from aws_cdk import aws_apigatewayv2 as apigw
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.config import SilenceAlarms
from infra.nag import acknowledge
from infra.pausing import paused_alarms, periods, queue_reads, schedule_ticks
from sume.core.names import METRICS_NAMESPACE, SERVICE_NAME, Metric

PERIOD = Duration.minutes(5)
# Oldest job message waiting longer than this means the worker is stuck or
# failing over and over (a poisoned message reaches the DLQ much later).
BACKLOG_AGE_SECONDS = 3600
# Every alarm's text ends by naming its row in the manual's alarm table, whose
# last column is the command that shows the cause.
RUNBOOK = "docs/playbook.md#alarms"


def logs_tail(log_group: logs.ILogGroup, pattern: str | None, since: str = "1h") -> str:
    """The command showing an alarm's cause in a log group of the stack, in the alarm's
    region: the group's name and the region are filled in by CloudFormation at deploy."""
    command = f"aws logs tail {log_group.log_group_name} --region {Aws.REGION} --since {since}"
    if pattern:
        command += f" --filter-pattern '{pattern}'"
    return f"`{command}`"


def stage_cli(stage: str) -> str:
    """The ops CLI as the alarm's reader runs it: for this stage, in the alarm's region
    (a stage in two regions has a stack in each)."""
    return f"sume-webhooks --stage {stage} --region {Aws.REGION}"


# The texts of the alarms about jobs that did not end right, for any CLI invocation
# (``cli``): the stack fills in its stage's, a test the local stack's.


def processing_errors_text(cli: str) -> str:
    return (
        "Follow-up work of jobs could not be done and retrying cannot fix it (state "
        f"processing_error, announced on the bus). `{cli} report` groups them by error "
        "code, each group with the commands that put all of it right, to run as printed: "
        "pause the worker while the cause persists, then the window's replay, a dry run "
        f"first. `{cli} report --check` passes once none is left."
    )


def parked_text(cli: str) -> str:
    return (
        "Jobs the worker could not bring to any end (EventBridge or DynamoDB failing "
        "through all receives, or a bug) are parked, their messages in the DLQ. "
        f"`{cli} report` lists them with the commands to run: `{cli} dlq peek` says why, "
        f"fix the cause, then `{cli} dlq redrive`. Jobs that gave up are processing "
        "errors, not here."
    )


def app_metric(name: str, period: Duration = PERIOD, statistic: str = cw.Stats.SUM) -> cw.Metric:
    """A Powertools metric of the three functions (namespace + ``service`` dimension)."""
    return cw.Metric(
        namespace=METRICS_NAMESPACE,
        metric_name=name,
        dimensions_map={"service": SERVICE_NAME},
        statistic=statistic,
        period=period,
    )


def serving_gate(window: Duration) -> dict[str, cw.IMetric]:
    """Two regions: the ``Serving`` gauge's minimum over a silence alarm's window.

    1 only when every tick of the window found the failover domain answered
    from this region (``sume/polling/serving.py``); a window with a failover in
    it, or with no tick, is 0 (FILL), so only the region that served all of it
    may page. CloudWatch cannot alarm on another region's metrics, so each
    region decides on its own what it would otherwise need both regions' for.
    """
    return {"serving": app_metric(Metric.SERVING, window, cw.Stats.MINIMUM)}


SERVING_CONDITION = "FILL(serving, 0) >= 1 AND "


def poll_recovery_share(silence: SilenceAlarms, *, gated: bool = False) -> cw.MathExpression:
    """Percent of the window's endings whose terminal event a status poll found.

    An ending is a first terminal event recorded: by webhook (the receiver's
    ``NewJobs``) or by poll (``JobsRecoveredByPoll``, emitted by every poller
    run, 0 included). FILL makes a window without webhooks count 0 of them; a
    window with no metric at all has no data point (the stack is idle or not
    running), which the alarm takes as not breaching. Below the minimum of
    endings the share is 0: one recovered job of one is no outage. ``gated``
    (two regions): only while this region serves (``serving_gate``).
    """
    window = Duration.minutes(silence.recovered_window_minutes)
    counts = {
        "webhook": app_metric(Metric.NEW_JOBS, window),
        "polled": app_metric(Metric.JOBS_RECOVERED_BY_POLL, window),
    }
    endings = cw.MathExpression(
        expression="FILL(webhook, 0) + FILL(polled, 0)", using_metrics=counts, period=window
    )
    gate = serving_gate(window) if gated else {}
    condition = (SERVING_CONDITION if gated else "") + f"endings >= {silence.recovered_min_endings}"
    return cw.MathExpression(
        expression=f"IF({condition}, 100 * FILL(polled, 0) / endings, 0)",
        using_metrics={**counts, "endings": endings, **gate},
        label="endings recovered by poll (%)",
        period=window,
    )


def delivery_silence(silence: SilenceAlarms, *, gated: bool = False) -> cw.MathExpression:
    """1 for a window in which jobs awaited and no delivery was verified, else 0.

    ``JobsAwaiting`` is the poller's gauge (every scheduled run; the window
    holds at least two): its maximum says whether any registered job waited.
    ``VerifiedDeliveries`` is missing, not 0, when nothing came, so FILL turns
    silence into 0 and the window breaches. Without the gauge (no poller run:
    ``PollerErrors`` pages for that) there is no data point, and no page.
    ``gated`` (two regions): only while this region serves (``serving_gate``).
    """
    window = Duration.minutes(silence.delivery_silence_minutes)
    condition = (SERVING_CONDITION if gated else "") + "awaiting >= 1 AND FILL(verified, 0) == 0"
    return cw.MathExpression(
        expression=f"IF({condition}, 1, 0)",
        using_metrics={
            "awaiting": app_metric(Metric.JOBS_AWAITING, window, cw.Stats.MAXIMUM),
            "verified": app_metric(Metric.VERIFIED_DELIVERIES, window),
            **(serving_gate(window) if gated else {}),
        },
        label="silent while jobs await",
        period=window,
    )


@dataclass(frozen=True)
class Monitored:
    api: apigw.HttpApi
    api_stage: apigw.HttpStage
    receiver: lambda_.Function
    worker: lambda_.Function
    poller: lambda_.Function
    queue: sqs.Queue
    dlq: sqs.Queue
    schedule: events.Rule
    """The poller's schedule rule."""
    shards_queue: sqs.IQueue
    """The poller's shards queue: its mapping starts a round's runs."""
    access_logs: logs.ILogGroup
    """The webhook API's access log group."""


class Monitoring(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        watched: Monitored,
        dashboard_name: str,
        alarm_email: str | None,
        signature_rejection_threshold: int,
        api_client_error_threshold: int,
        silence: SilenceAlarms,
        removal_policy: RemovalPolicy,
        stage: str,
        serving_gated: bool = False,
    ) -> None:
        """``serving_gated``: a region of a two-region stage, whose silence alarms page
        only while Sume's deliveries come to it (``serving_gate``)."""
        super().__init__(scope, construct_id)
        # The ops CLI as the alarm's reader runs it, for this stage.
        self.cli = cli = stage_cli(stage)
        self._stack_name = Stack.of(self).stack_name
        # CloudWatch cannot publish to a topic encrypted with the AWS managed
        # SNS key, so the topic gets its own key that CloudWatch may use.
        key = kms.Key(
            self,
            "TopicKey",
            description="Encrypts the Sume webhooks alarm topic",
            enable_key_rotation=True,
            removal_policy=removal_policy,
        )
        key.grant(
            iam.ServicePrincipal("cloudwatch.amazonaws.com"), "kms:Decrypt", "kms:GenerateDataKey*"
        )
        self.topic = sns.Topic(
            self,
            "AlarmTopic",
            display_name="Sume webhooks alarms",
            master_key=key,
            enforce_ssl=True,
        )
        if alarm_email:
            self.topic.add_subscription(subscriptions.EmailSubscription(alarm_email))
            acknowledge(
                self.topic,
                "Serverless-SNSRedrivePolicy",
                "A mail SNS cannot deliver has no better use later: the alarm's state stays "
                "on the dashboard and notifies again as it changes, and a DLQ of alarm mails "
                "could only raise its own alarm through this same topic.",
            )

        # Two regions: said once, in both silence alarms' text.
        serving_note = (
            " Two regions: this one served all the window (its Serving gauge), so Sume's "
            "deliveries came here."
            if serving_gated
            else ""
        )
        w = watched
        receiver_logs, worker_logs, poller_logs, api_logs = (
            w.receiver.log_group,
            w.worker.log_group,
            w.poller.log_group,
            w.access_logs,
        )
        errors = {
            fn_id: fn.metric_errors(period=PERIOD, statistic=cw.Stats.SUM)
            for fn_id, fn in (("Receiver", w.receiver), ("Worker", w.worker), ("Poller", w.poller))
        }
        self.alarms = [
            self._alarm(
                "DlqNotEmpty",
                w.dlq.metric_approximate_number_of_messages_visible(
                    period=Duration.minutes(1), statistic=cw.Stats.MAXIMUM
                ),
                1,
                parked_text(cli),
            ),
            self._alarm(
                "ApiServerErrors",
                w.api.metric_server_error(period=PERIOD, statistic=cw.Stats.SUM),
                1,
                "The webhook API answered Sume with 5xx (storage unavailable, receiver "
                "crash or timeout). Sume retries. "
                + logs_tail(api_logs, '{ $.status = "5*" }')
                + " (integrationError says why).",
            ),
            self._alarm(
                "ApiClientErrorSpike",
                w.api_stage.metric_client_error(period=PERIOD, statistic=cw.Stats.SUM),
                api_client_error_threshold,
                "The webhook API answered many 4xx, throttling (429) included: junk "
                "traffic, or Sume itself throttled (check throttle_rate against "
                "sume_peak_jobs_per_second). "
                + logs_tail(api_logs, '{ $.status = "4*" }')
                + " (ip, status).",
            ),
            self._alarm(
                "ReceiverErrors",
                errors["Receiver"],
                1,
                "The receiver raised (a bug or a timeout). Sume retries up to 10 times; "
                "fix it before they run out. " + logs_tail(receiver_logs, '{ $.level = "ERROR" }'),
            ),
            self._alarm(
                "ReceiverConfigurationErrors",
                app_metric(Metric.CONFIGURATION_ERRORS),
                1,
                "The receiver is deployed wrong and answers every delivery 500 "
                "configuration_error (e.g. a signing secret that is empty, or JSON but "
                "not a list of strings). Sume retries up to 10 times; fix the secret or "
                "setting named in the receiver's error log before they run out: "
                + logs_tail(receiver_logs, '{ $.message = "receiver misconfigured" }')
                + " (reason).",
            ),
            self._alarm(
                "StorageErrors",
                app_metric(Metric.STORAGE_ERRORS),
                1,
                "DynamoDB, SQS, S3 or Secrets Manager failed during a delivery (answered 503; "
                "Sume retries). "
                + logs_tail(receiver_logs, '{ $.message = "storage unavailable" }'),
            ),
            self._alarm(
                "SignatureRejectionSpike",
                app_metric(Metric.SIGNATURE_REJECTIONS),
                signature_rejection_threshold,
                "Many deliveries failed signature checks: the signing secret in Secrets "
                "Manager does not match Sume's (or someone is probing the endpoint). "
                f"`{cli} secrets status` shows which secret still verifies.",
            ),
            self._alarm(
                "JobsLost",
                app_metric(Metric.JOBS_LOST),
                1,
                "A registered job never reached a terminal state before its maximum "
                f"polling age and was marked lost. `{cli} report` lists the lost jobs with "
                "the command that shows why polling gave up (last_poll_error).",
            ),
            self._alarm(
                "PollRecoveryShare",
                poll_recovery_share(silence, gated=serving_gated),
                silence.recovered_share_percent,
                f"At least {silence.recovered_share_percent}% of the jobs that ended in "
                f"{silence.recovered_window_minutes} minutes (and at least "
                f"{silence.recovered_min_endings}) were found by status polls: their webhook "
                "never came. Sume's delivery to this URL is disabled or failing (check the "
                "webhook settings on Sume's side, and ApiServerErrors / "
                "SignatureRejectionSpike here). Jobs still end, late by their poll delay. "
                + logs_tail(poller_logs, "{ $.recovered IS TRUE }")
                + f" (job_id); `{cli} status JOB_ID` of one shows deliveries 0."
                + serving_note,
            ),
            self._alarm(
                "DeliverySilence",
                delivery_silence(silence, gated=serving_gated),
                1,
                f"No delivery from Sume verified for {silence.delivery_silence_minutes} "
                "minutes while registered jobs await their terminal event: Sume's "
                "webhooks stopped (disabled on Sume's side, a changed URL or secret, or "
                "the API unreachable). The poller recovers the jobs meanwhile. "
                # Back two windows: it fires one to two windows after the last delivery.
                + logs_tail(api_logs, None, f"{2 * silence.delivery_silence_minutes}m")
                + " shows whether requests still arrive (and what they were answered); "
                "then check Sume's webhook settings.",
            ),
            self._alarm(
                "StatusUrlRefused",
                app_metric(Metric.STATUS_URL_REFUSED),
                1,
                "The poller refused a job's status_url: its host is not on "
                "status_allowed_hosts (the item's last_poll_error says refused_host). "
                "Add Sume's API host to the list, or the job is lost at its cut-off. "
                + logs_tail(poller_logs, '{ $.reason = "refused_host" }')
                + f" (job_id), then `{cli} status JOB_ID` (status url).",
            ),
            self._alarm(
                "StatusAnswersForOtherJobs",
                app_metric(Metric.STATUS_ANSWERS_FOR_OTHER_JOBS),
                1,
                "A job's status_url answered about another job (its job_id or id names "
                "another), so the answer was not recorded (the item's last_poll_error says "
                "job_id_mismatch). The job was registered with another job's status URL: "
                "find who registered it: "
                + logs_tail(poller_logs, '{ $.reason = "job_id_mismatch" }')
                + f" (job_id), then `{cli} status JOB_ID` (status_url, metadata).",
            ),
            self._alarm(
                "WorkerErrors",
                errors["Worker"],
                1,
                "The worker function raised (whole batch failed). "
                + logs_tail(worker_logs, '{ $.level = "ERROR" }'),
            ),
            self._alarm(
                "ProcessingErrors",
                app_metric(Metric.PROCESSING_ERRORS),
                1,
                processing_errors_text(cli),
            ),
            self._alarm(
                "PollerErrors",
                errors["Poller"],
                1,
                "The poller function raised; status polls and the sweep of owed work "
                "are not running. " + logs_tail(poller_logs, '{ $.level = "ERROR" }'),
            ),
            self._alarm(
                "PollerConfigurationErrors",
                app_metric(Metric.POLLER_CONFIGURATION_ERRORS),
                1,
                "A status poll met a configuration fault (e.g. an empty Sume API token "
                "secret). The run went on without it, so affected jobs are not being "
                "polled: fix the configuration. "
                + logs_tail(
                    poller_logs,
                    '{ $.message = "poller step hit a configuration error" }',
                ),
            ),
            self._alarm(
                "JobsQueueBacklog",
                w.queue.metric_approximate_age_of_oldest_message(
                    period=PERIOD, statistic=cw.Stats.MAXIMUM
                ),
                BACKLOG_AGE_SECONDS,
                "A job message has waited over an hour: the worker is stuck, keeps failing, "
                f"or is paused (`{cli} report` says). "
                f"`{cli} list --state owed`, then `{cli} status JOB_ID` (last error, claim).",
            ),
        ]
        # Work left paused: every step of the window idle, no data included.
        self.alarms += [
            self._alarm(
                a.construct_id,
                a.metric,
                1,
                a.text,
                periods=periods(silence.paused_minutes),
                missing=cw.TreatMissingData.BREACHING,
            )
            for a in paused_alarms(w.queue, w.schedule, w.shards_queue, cli, silence.paused_minutes)
        ]
        self.dashboard = self._dashboard(dashboard_name, w, errors)

    def add_alarm(
        self, construct_id: str, metric: cw.IMetric, threshold: int, text: str
    ) -> cw.Alarm:
        """One more alarm on the topic, for a concern whose construct lives elsewhere."""
        alarm = self._alarm(construct_id, metric, threshold, text)
        self.alarms.append(alarm)
        return alarm

    def _alarm(
        self,
        construct_id: str,
        metric: cw.IMetric,
        threshold: int,
        text: str,
        periods: int = 1,
        missing: cw.TreatMissingData = cw.TreatMissingData.NOT_BREACHING,
    ) -> cw.Alarm:
        alarm = cw.Alarm(
            self,
            construct_id,
            metric=metric,
            threshold=threshold,
            evaluation_periods=periods,
            # All steps of a longer window must breach (unset: as CloudWatch's default).
            datapoints_to_alarm=periods if periods > 1 else None,
            comparison_operator=cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=missing,
            # The name a person reads on the pager: the stack (stage), then what.
            alarm_name=f"{self._stack_name}-{construct_id}",
            alarm_description=f"{text} What to run: {RUNBOOK}, row {construct_id}.",
        )
        action = cw_actions.SnsAction(self.topic)
        alarm.add_alarm_action(action)
        alarm.add_ok_action(action)
        return alarm

    def _dashboard(self, name: str, w: Monitored, errors: dict[str, cw.Metric]) -> cw.Dashboard:
        def graph(
            title: str, *metrics: cw.IMetric, right: list[cw.IMetric] | None = None
        ) -> cw.GraphWidget:
            return cw.GraphWidget(title=title, left=list(metrics), right=right or [], width=8)

        def durations(fn: lambda_.Function) -> list[cw.IMetric]:
            return [
                fn.metric_duration(period=PERIOD, statistic="p50", label="p50"),
                fn.metric_duration(period=PERIOD, statistic="p99", label="p99"),
                fn.metric_duration(period=PERIOD, statistic=cw.Stats.MAXIMUM, label="max"),
            ]

        dashboard = cw.Dashboard(self, "Dashboard", dashboard_name=name)
        dashboard.add_widgets(
            cw.AlarmStatusWidget(title="Alarms", alarms=self.alarms, width=24, height=3)
        )
        dashboard.add_widgets(
            graph(
                "Webhook API",
                w.api.metric_count(period=PERIOD, label="requests"),
                w.api.metric_client_error(period=PERIOD, label="4xx"),
                w.api.metric_server_error(period=PERIOD, label="5xx"),
                right=[w.api.metric_latency(period=PERIOD, statistic="p99", label="latency p99")],
            ),
            graph(
                "Deliveries",
                *(
                    app_metric(name)
                    for name in (
                        Metric.DELIVERIES,
                        Metric.VERIFIED_DELIVERIES,
                        Metric.NEW_JOBS,
                        Metric.DUPLICATES,
                        Metric.CONFLICTS,
                        Metric.TEST_PINGS,
                    )
                ),
            ),
            graph(
                "Rejections, storage and configuration errors",
                *(
                    app_metric(name)
                    for name in (
                        Metric.SIGNATURE_REJECTIONS,
                        Metric.REJECTIONS,
                        Metric.STORAGE_ERRORS,
                        Metric.CONFIGURATION_ERRORS,
                    )
                ),
            ),
        )
        dashboard.add_widgets(
            graph(
                "Jobs queue",
                w.queue.metric_approximate_number_of_messages_visible(
                    period=PERIOD, label="waiting"
                ),
                w.queue.metric_approximate_number_of_messages_not_visible(
                    period=PERIOD, label="in flight"
                ),
                w.dlq.metric_approximate_number_of_messages_visible(period=PERIOD, label="DLQ"),
                right=[
                    w.queue.metric_approximate_age_of_oldest_message(
                        period=PERIOD, label="oldest (s)"
                    )
                ],
            ),
            graph(
                "Outcomes",
                *(
                    app_metric(name)
                    for name in (
                        Metric.JOBS_RECOVERED_BY_POLL,
                        Metric.PROCESSING_ERRORS,
                        Metric.JOBS_LOST,
                        Metric.STATUS_URL_REFUSED,
                        Metric.STATUS_ANSWERS_FOR_OTHER_JOBS,
                    )
                ),
                right=[
                    app_metric(Metric.JOBS_AWAITING, statistic=cw.Stats.MAXIMUM).with_(
                        label="awaiting (gauge)"
                    )
                ],
            ),
            graph(
                "Function errors and throttles",
                *(m.with_(label=f"{fn_id} errors") for fn_id, m in errors.items()),
                *(
                    fn.metric_throttles(period=PERIOD, label=f"{fn_id} throttles")
                    for fn_id, fn in (
                        ("Receiver", w.receiver),
                        ("Worker", w.worker),
                        ("Poller", w.poller),
                    )
                ),
            ),
        )
        dashboard.add_widgets(
            graph("Receiver duration (ms)", *durations(w.receiver)),
            graph("Worker duration (ms)", *durations(w.worker)),
            graph("Poller duration (ms)", *durations(w.poller)),
        )
        # A paused work is a line at 0 from the moment it was paused; who and why:
        # `sume-webhooks report`.
        dashboard.add_widgets(
            graph(
                "Work started (0: paused; sume-webhooks report says why)",
                queue_reads(w.queue),
                right=[schedule_ticks(w.schedule)],
            )
        )
        return dashboard
