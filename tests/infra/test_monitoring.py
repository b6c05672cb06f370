"""Alarms to one encrypted topic, and the dashboard (``infra/monitoring.py``)."""

from __future__ import annotations

import json
import re
from typing import Any

from sume.core.names import METRICS_NAMESPACE, SERVICE_NAME, Metric
from tests.infra.conftest import ROOT, Stage, base_name, ref_name

PAUSED = ("WorkerPaused", "PollerPaused", "PollerRoundsPaused")
# The longest name CloudFormation gives a log group of these stacks: the stack's name
# (at most 128), the logical id, a 13-character suffix. An alarm's text must fit
# CloudWatch's 1024 characters with every name it is given at deploy.
LONGEST_LOG_GROUP = 128 + 1 + 40 + 13
LOG_GROUPS = ("FunctionsReceiverLogs", "FunctionsWorkerLogs", "FunctionsPollerLogs")


def described(props: dict[str, Any], name: Any = ref_name) -> str:
    """An alarm's text, each name CloudFormation fills in at deploy given by ``name``
    (by default its base logical id, ``AWS::Region`` for the region)."""
    text = props["AlarmDescription"]
    if isinstance(text, str):
        return text
    return "".join(part if isinstance(part, str) else name(part) for part in text["Fn::Join"][1])


def longest(part: dict[str, Any]) -> str:
    return "x" * (LONGEST_LOG_GROUP if part.get("Ref") != "AWS::Region" else len("ap-southeast-2"))


def commands(text: str) -> list[str]:
    return re.findall(r"`((?:sume-webhooks|aws) [^`]*)`", text)


def test_alarms_cover_every_failure_and_notify_the_topic(dev: Stage, prod: Stage) -> None:
    alarms = dev.alarms()
    custom = {
        "StorageErrors": "StorageErrors",
        "SignatureRejectionSpike": "SignatureRejections",
        "JobsLost": "JobsLost",
        "ProcessingErrors": "ProcessingErrors",
        "ReceiverConfigurationErrors": "ConfigurationErrors",
        "StatusUrlRefused": "StatusUrlRefused",
        "StatusAnswersForOtherJobs": "StatusAnswersForOtherJobs",
    }
    for alarm_id, metric in custom.items():
        props = alarms[alarm_id]
        assert props["Namespace"] == METRICS_NAMESPACE
        assert props["MetricName"] == metric
        assert props["Dimensions"] == [{"Name": "service", "Value": SERVICE_NAME}]
        assert props["Statistic"] == "Sum"
    for fn in ("Receiver", "Worker", "Poller"):
        props = alarms[f"{fn}Errors"]
        assert (props["Namespace"], props["MetricName"]) == ("AWS/Lambda", "Errors")
        # FunctionName alone adds up every version and alias: the receiver's
        # alarm counts what its SnapStart alias runs.
        (dimension,) = props["Dimensions"]
        assert dimension["Name"] == "FunctionName"
        assert ref_name(dimension["Value"]) == f"Functions{fn}Function"
    dlq = alarms["DlqNotEmpty"]
    assert (dlq["Namespace"], dlq["MetricName"]) == (
        "AWS/SQS",
        "ApproximateNumberOfMessagesVisible",
    )
    assert ref_name(dlq["Dimensions"][0]["Value"]) == "JobsQueueDeadLetters"
    assert (dlq["Threshold"], dlq["ComparisonOperator"]) == (1, "GreaterThanOrEqualToThreshold")
    # What its messages are, and the operator's commands for them, for its stage and region.
    cli = "sume-webhooks --stage dev --region AWS::Region"
    for words in ("parked", f"`{cli} report`", f"`{cli} dlq peek`", f"`{cli} dlq redrive`"):
        assert words in described(dlq)
    api = alarms["ApiServerErrors"]
    assert (api["Namespace"], api["MetricName"]) == ("AWS/ApiGateway", "5xx")
    assert ref_name(api["Dimensions"][0]["Value"]) == "WebhookApi"
    assert alarms["JobsLost"]["Threshold"] == 1
    assert alarms["SignatureRejectionSpike"]["Threshold"] == 20
    assert prod.alarms()["SignatureRejectionSpike"]["Threshold"] == 7
    assert alarms["ReceiverConfigurationErrors"]["Threshold"] == 1
    assert alarms["StatusAnswersForOtherJobs"]["Threshold"] == 1
    for name, props in alarms.items():
        assert [ref_name(a) for a in props["AlarmActions"]] == ["MonitoringAlarmTopic"]
        # Work left paused is seen by its silence (test_work_left_paused_pages).
        missing = "breaching" if name in PAUSED else "notBreaching"
        assert props["TreatMissingData"] == missing, name
        # What the pager shows: the stack (stage), then what.
        assert props["AlarmName"] == f"SumeWebhooks-dev-{name}"
        assert described(props)


def test_an_alarm_fires_on_a_spike_of_4xx_throttles_included(dev: Stage, prod: Stage) -> None:
    for stage, threshold in ((dev, 100), (prod, 30)):
        spike = stage.alarms()["ApiClientErrorSpike"]
        # HTTP APIs publish "4xx" (429 included), per API and per stage.
        assert (spike["Namespace"], spike["MetricName"], spike["Statistic"]) == (
            "AWS/ApiGateway",
            "4xx",
            "Sum",
        )
        dimensions = {d["Name"]: d["Value"] for d in spike["Dimensions"]}
        assert set(dimensions) == {"ApiId", "Stage"}
        assert ref_name(dimensions["ApiId"]) == "WebhookApi"
        assert dimensions["Stage"] == "$default"
        assert (spike["Threshold"], spike["Period"]) == (threshold, 300)


def test_a_poll_configuration_error_is_alarmed(dev: Stage) -> None:
    props = dev.alarms()["PollerConfigurationErrors"]
    assert (props["Namespace"], props["MetricName"]) == (
        METRICS_NAMESPACE,
        "PollerConfigurationErrors",
    )
    assert props["Dimensions"] == [{"Name": "service", "Value": SERVICE_NAME}]
    assert (props["Statistic"], props["Threshold"]) == ("Sum", 1)
    assert props["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    assert [ref_name(a) for a in props["AlarmActions"]] == ["MonitoringAlarmTopic"]


def test_alarm_topic_is_encrypted_and_email_is_optional(dev: Stage, prod: Stage) -> None:
    for stage in (dev, prod):
        _, topic = stage.one("MonitoringAlarmTopic", "AWS::SNS::Topic")
        assert ref_name(topic["Properties"]["KmsMasterKeyId"]) == "MonitoringTopicKey"
        _, key = stage.one("MonitoringTopicKey", "AWS::KMS::Key")
        assert key["Properties"]["EnableKeyRotation"] is True
        statements = key["Properties"]["KeyPolicy"]["Statement"]
        assert any(s["Principal"] == {"Service": "cloudwatch.amazonaws.com"} for s in statements)
    assert not dev.of_type("AWS::SNS::Subscription")
    prod.assertions().has_resource_properties(
        "AWS::SNS::Subscription", {"Protocol": "email", "Endpoint": "ops@example.com"}
    )


def test_dashboard_shows_the_key_metrics(dev: Stage) -> None:
    _, dashboard = dev.one("MonitoringDashboard", "AWS::CloudWatch::Dashboard")
    assert dashboard["Properties"]["DashboardName"] == "SumeWebhooks-dev"
    body = json.dumps(dashboard["Properties"]["DashboardBody"])
    for metric in (
        "Deliveries",
        "NewJobs",
        "Duplicates",
        "SignatureRejections",
        "StorageErrors",
        "ConfigurationErrors",
        "ProcessingErrors",
        "StatusUrlRefused",
        "StatusAnswersForOtherJobs",
        "JobsLost",
        "ApproximateNumberOfMessagesVisible",
        "ApproximateAgeOfOldestMessage",
        "5xx",
        "Duration",
        "Throttles",
        "JobsRegistered",
        "RegistrationsRejected",
        "VerifiedDeliveries",
        "JobsRecoveredByPoll",
        "JobsAwaiting",
    ):
        assert f'\\"{metric}\\"' in body, metric


def alarm_rows() -> dict[str, str]:
    """The rows of docs/playbook.md's alarm table, by the alarm each names first."""
    text = (ROOT / "docs" / "playbook.md").read_text(encoding="utf-8")
    section = text.split("## Alarms", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        if match := re.match(r"\| `(\w+)` \|", line):
            rows[match.group(1)] = line
    return rows


def test_the_manual_names_every_alarm_with_the_command_that_shows_its_cause(
    dev: Stage, prod: Stage
) -> None:
    rows = alarm_rows()
    alarms = dev.alarms().keys() | prod.alarms().keys()
    assert sorted(alarms - rows.keys()) == [], "alarms docs/playbook.md does not list"
    assert sorted(rows.keys() - alarms) == [], "rows naming no alarm of the template"
    for name, row in rows.items():
        cause = row.rstrip(" |").rsplit(" | ", 1)[1]
        assert re.search(r"`(sume-webhooks|aws) ", cause), f"{name}: no command in {cause!r}"


def metric_math(props: dict[str, Any]) -> tuple[str, dict[str, dict[str, Any]]]:
    """A metric-math alarm's returned expression, and its other queries by id."""
    (returned,) = [q for q in props["Metrics"] if q.get("ReturnData", True)]
    return returned["Expression"], {q["Id"]: q for q in props["Metrics"] if q is not returned}


def app_stat(query: dict[str, Any]) -> tuple[str, str, int]:
    stat = query["MetricStat"]
    metric = stat["Metric"]
    assert metric["Namespace"] == METRICS_NAMESPACE
    assert metric["Dimensions"] == [{"Name": "service", "Value": SERVICE_NAME}]
    return metric["MetricName"], stat["Stat"], stat["Period"]


def test_polls_recovering_a_share_of_the_endings_page(dev: Stage, prod: Stage) -> None:
    for stage, (share, window, least) in ((dev, (50, 60, 5)), (prod, (30, 120, 20))):
        props = stage.alarms()["PollRecoveryShare"]
        expression, queries = metric_math(props)
        assert expression == f"IF(endings >= {least}, 100 * FILL(polled, 0) / endings, 0)"
        assert queries["endings"]["Expression"] == "FILL(webhook, 0) + FILL(polled, 0)"
        # The receiver's first records and the poller's, summed over one window.
        assert app_stat(queries["webhook"]) == (Metric.NEW_JOBS, "Sum", window * 60)
        assert app_stat(queries["polled"]) == (Metric.JOBS_RECOVERED_BY_POLL, "Sum", window * 60)
        assert (props["Threshold"], props["ComparisonOperator"]) == (
            share,
            "GreaterThanOrEqualToThreshold",
        )
        assert (props["EvaluationPeriods"], props["TreatMissingData"]) == (1, "notBreaching")


def test_no_verified_delivery_while_jobs_await_pages(dev: Stage, prod: Stage) -> None:
    for stage, window in ((dev, 60), (prod, 180)):
        props = stage.alarms()["DeliverySilence"]
        expression, queries = metric_math(props)
        # Nothing verified is no data point at all: FILL makes it 0, which breaches
        # while the poller's gauge says a job awaits; no gauge, no data, no page.
        assert expression == "IF(awaiting >= 1 AND FILL(verified, 0) == 0, 1, 0)"
        assert app_stat(queries["awaiting"]) == (Metric.JOBS_AWAITING, "Maximum", window * 60)
        assert app_stat(queries["verified"]) == (Metric.VERIFIED_DELIVERIES, "Sum", window * 60)
        assert (props["Threshold"], props["EvaluationPeriods"]) == (1, 1)
        assert props["TreatMissingData"] == "notBreaching"
        assert [ref_name(a) for a in props["OKActions"]] == ["MonitoringAlarmTopic"]


def test_each_alarm_says_what_to_run(dev: Stage, prod: Stage) -> None:
    from infra.monitoring import RUNBOOK

    # The page an operator gets at 3 a.m. names the command, or the manual's row with it.
    rows = alarm_rows()
    for name, props in (dev.alarms() | prod.alarms()).items():
        size = len(described(props, longest))
        assert size <= 1024, f"{name}: {size}, over CloudWatch's 1024 characters"
        text = described(props)
        assert text.endswith(f"What to run: {RUNBOOK}, row {name}."), name
        assert name in rows, name
        assert commands(text), f"{name}: no command in {text!r}"
        # Nothing to fill in by hand: every name is CloudFormation's to give.
        assert not re.search(r"<[^>]*>", text), text
    # The runbook's anchor is a heading of the page it names, the alarm table's.
    page, anchor = RUNBOOK.split("#")
    headings = re.findall(r"^#+ (.+)$", (ROOT / page).read_text(encoding="utf-8"), re.M)
    assert anchor in [h.lower().replace(" ", "-") for h in headings]
    assert anchor == "alarms"


def test_work_left_paused_pages_whoever_turned_it_off(dev: Stage, prod: Stage) -> None:
    # prod sets paused_alarm_minutes (synth_stages); dev has the default, four hours.
    for stage, stage_name, minutes in ((dev, "dev", 240), (prod, "prod", 120)):
        alarms = stage.alarms()
        for name, work in (
            ("WorkerPaused", "worker"),
            ("PollerPaused", "poller"),
            ("PollerRoundsPaused", "poller"),
        ):
            props = alarms[name]
            expression, _ = metric_math(props)
            # Each five-minute step in which nothing started the work is 1; all of
            # the window's steps must be, no data counting as idle.
            assert expression == "IF(FILL(work, 0) == 0, 1, 0)"
            assert (props["Threshold"], props["ComparisonOperator"]) == (
                1,
                "GreaterThanOrEqualToThreshold",
            )
            assert props["EvaluationPeriods"] == props["DatapointsToAlarm"] == minutes // 5
            assert props["TreatMissingData"] == "breaching"
            assert [ref_name(a) for a in props["OKActions"]] == ["MonitoringAlarmTopic"]
            text = described(props)
            assert f"for {minutes} minutes" in text
            cli = f"sume-webhooks --stage {stage_name} --region AWS::Region"
            assert f"`{cli} resume {work}`" in text
            assert f"`{cli} report`" in text
        # A mapping reads its queue without pause while enabled: the worker's the jobs
        # queue, the poller's rounds the shards queue (paused there by hand, its
        # schedule still ticking, only this alarm sees it).
        for name, queue_name in (
            ("WorkerPaused", "JobsQueue"),
            ("PollerRoundsPaused", "PollerScheduleShards"),
        ):
            _, reader = metric_math(alarms[name])
            assert reader["work"]["Expression"] == "FILL(received, 0) + FILL(empty, 0)"
            reads = {q: reader[q]["MetricStat"] for q in ("received", "empty")}
            assert {q: r["Metric"]["MetricName"] for q, r in reads.items()} == {
                "received": "NumberOfMessagesReceived",
                "empty": "NumberOfEmptyReceives",
            }
            for read in reads.values():
                (queue,) = read["Metric"]["Dimensions"]
                assert queue["Name"] == "QueueName"
                assert ref_name(queue["Value"]) == queue_name
                assert (read["Stat"], read["Period"]) == ("Sum", 300)
        _, poller = metric_math(alarms["PollerPaused"])
        ticks = poller["work"]["MetricStat"]
        assert (ticks["Metric"]["Namespace"], ticks["Metric"]["MetricName"]) == (
            "AWS/Events",
            "Invocations",
        )
        (rule,) = ticks["Metric"]["Dimensions"]
        assert rule["Name"] == "RuleName"
        assert ref_name(rule["Value"]) == "PollerScheduleRule"


def test_the_log_commands_read_the_stack_s_own_log_groups(dev: Stage) -> None:
    groups = {base_name(k) for k in dev.of_type("AWS::Logs::LogGroup")}
    for name, props in dev.alarms().items():
        for command in commands(described(props)):
            if command.startswith("aws logs tail "):
                group = command.split()[3]
                assert group in groups, (name, group)
                assert group in (*LOG_GROUPS, "WebhookApiAccessLogs"), (name, group)
                assert "--region AWS::Region " in command, command


def test_the_playbook_gives_each_alarm_s_commands_as_its_text_does(dev: Stage) -> None:
    """The row of docs/playbook.md names the same commands, for any stage: the stage,
    region and log groups as the page's variables and its log_group function."""
    rows = alarm_rows()
    for name, props in dev.alarms().items():
        for command in commands(described(props)):
            general = command.replace("--stage dev", "--stage $STAGE")
            general = general.replace("AWS::Region", "$REGION")
            for group in (*LOG_GROUPS, "WebhookApiAccessLogs"):
                general = general.replace(f"tail {group} ", f'tail "$(log_group {group})" ')
            assert f"`{general}`" in rows[name], (name, general)
