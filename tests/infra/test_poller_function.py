"""The poller's construct (``infra/functions/poller.py``), its schedule and its registrations."""

from __future__ import annotations

from infra import spec
from infra.config import DEFAULTS
from sume.core.names import DUE_INDEX, DUE_INDEX_BEFORE
from sume.polling.settings import FanOutSettings, PollerSettings, RegistrySettings
from tests.infra.conftest import (
    CONSUME,
    ITEMS,
    SECRET,
    SEND,
    Stage,
    logs_and_traces,
    ref_name,
)


def test_the_poller_environment_satisfies_its_settings(prod: Stage) -> None:
    poller = PollerSettings.from_env(prod.environment("Poller"))
    assert poller.api_token_arn == "resolved-SecretsSumeApiToken"
    assert poller.api_token_value is None
    assert poller.payloads_bucket_name == "resolved-BucketsPayloads"
    assert poller.url_policy.allowed_hosts == ("api.sume.example",)

    registration = RegistrySettings.from_env(prod.environment("Poller"))
    assert registration.dead_letters() == "resolved-RegistrationsDeadLetters"
    # Registration refuses what the poller's fetch would: the same policy.
    assert registration.status_urls == poller.url_policy
    assert registration.status_urls.allow_http is False
    assert registration.event_bus() == "resolved-AnnouncementsBus"


def test_the_poller_may_do_only_what_its_code_does(dev: Stage) -> None:
    assert dev.permissions("Poller") == {
        **logs_and_traces("Poller"),
        "JobsTable": ITEMS,
        f"JobsTable/index/{DUE_INDEX}": {"dynamodb:Query"},
        "JobsQueue": SEND,
        "BucketsPayloads/events/*": {"s3:PutObject"},
        "SecretsSumeApiToken": SECRET,
        "RegistrationsQueue": CONSUME,
        "RegistrationsDeadLetters": SEND,
        # Refused registrations are announced.
        "AnnouncementsBus": {"events:PutEvents"},
        # The round's assignments: sent by the tick, taken by the runs.
        "PollerScheduleShards": CONSUME | SEND,
        "PollerScheduleLeases": {"dynamodb:PutItem", "dynamodb:UpdateItem"},
        # The sweep holds owed work while the worker is paused.
        worker_switch(dev): {"lambda:GetEventSourceMapping"},
    }


def test_a_migrating_poller_reads_the_due_index_it_had_until_the_switch(
    dev: Stage, prod: Stage
) -> None:
    # prod: due_index_migration=add, the new index is being built; dev: none.
    assert PollerSettings.from_env(prod.environment("Poller")).table.due_index == DUE_INDEX_BEFORE
    assert PollerSettings.from_env(dev.environment("Poller")).table.due_index == DUE_INDEX
    assert "DUE_INDEX_NAME" not in dev.environment("Poller")
    granted = {name for name in prod.permissions("Poller") if "/index/" in name}
    assert granted == {f"JobsTable/index/{DUE_INDEX}", f"JobsTable/index/{DUE_INDEX_BEFORE}"}


def test_a_round_fans_out_one_run_per_group_of_shards(dev: Stage, prod: Stage) -> None:
    # dev: the default 16 shards, one a run; prod: 8 shards while the 16 of
    # before drain, 4 a run.
    for stage, shards, previous, per_run, runs in ((dev, 16, None, 1, 16), (prod, 8, 16, 4, 4)):
        env = stage.environment("Poller")
        assert PollerSettings.from_env(env).table.due_shards == shards
        assert env.get("DUE_SHARDS_PREVIOUS") == (previous and str(previous))
        fanout = FanOutSettings.from_env(env)
        assert fanout.shards_queue_url == "resolved-PollerScheduleShards"
        assert fanout.leases_table_name == "resolved-PollerScheduleLeases"
        assert (fanout.read_shards, fanout.shards_per_run) == (16, per_run)
        # Every writer spreads items over the same count.
        for writer in ("Receiver", "Worker"):
            assert stage.environment(writer)["DUE_SHARDS"] == str(shards)
        source = stage.event_source("PollerScheduleShards")
        assert ref_name(source["FunctionName"]) == "FunctionsPollerFunction"
        assert source["BatchSize"] == 1
        assert "FunctionResponseTypes" not in source
        assert source["ScalingConfig"] == {"MaximumConcurrency": runs}


def test_an_assignment_lives_one_round_and_is_retried_within_it(dev: Stage, prod: Stage) -> None:
    for stage, retention in ((dev, 300), (prod, 600)):
        props = stage.one("PollerScheduleShards", "AWS::SQS::Queue")[1]["Properties"]
        assert props["VisibilityTimeout"] == spec.POLLER_TIMEOUT
        assert props["MessageRetentionPeriod"] == retention
        assert "RedrivePolicy" not in props
    leases = dev.one("PollerScheduleLeases", "AWS::DynamoDB::Table")[1]["Properties"]
    assert leases["KeySchema"] == [{"AttributeName": "due_shard", "KeyType": "HASH"}]
    assert leases["BillingMode"] == "PAY_PER_REQUEST"


def test_poller_runs_on_a_configurable_schedule(dev: Stage, prod: Stage) -> None:
    assert DEFAULTS["poll_rate_minutes"] == spec.DEFAULT_POLL_RATE_MINUTES == 5
    for stage, rate in ((dev, "rate(5 minutes)"), (prod, "rate(10 minutes)")):
        props = stage.one("PollerScheduleRule", "AWS::Events::Rule")[1]["Properties"]
        assert props["ScheduleExpression"] == rate
        assert props["State"] == "ENABLED"
        (target,) = props["Targets"]
        assert ref_name(target["Arn"]) == "FunctionsPollerFunction"
        assert target["RetryPolicy"]["MaximumRetryAttempts"] == 0
    (invoke,) = dev.of_type("AWS::Lambda::EventInvokeConfig").values()
    assert ref_name(invoke["Properties"]["FunctionName"]) == "FunctionsPollerFunction"
    assert invoke["Properties"]["MaximumRetryAttempts"] == 0


def test_the_poller_takes_registrations_from_their_queue(dev: Stage, prod: Stage) -> None:
    props = dev.event_source("RegistrationsQueue")
    assert ref_name(props["FunctionName"]) == "FunctionsPollerFunction"
    assert props["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert props["BatchSize"] == 10
    # Whoever may register jobs cannot scale the poller past this: derived from
    # the default estimate in dev (2 jobs/s x 0.1 s, at least 2), set in prod.
    for stage, cap in ((dev, 2), (prod, 3)):
        assert stage.event_source("RegistrationsQueue")["ScalingConfig"] == {
            "MaximumConcurrency": cap
        }


def worker_mapping(stage: Stage) -> str:
    """The logical id of the worker's jobs queue mapping."""
    (mapping_id,) = [
        key
        for key, mapping in stage.of_type("AWS::Lambda::EventSourceMapping").items()
        if ref_name(mapping["Properties"]["EventSourceArn"]) == "JobsQueue"
    ]
    return mapping_id


def worker_switch(stage: Stage) -> str:
    """The worker's mapping's ARN, as ``Stage.permissions`` names resources."""
    return "arn:AWS::Partition:lambda:AWS::Region:AWS::AccountId:event-source-mapping:" + ref_name(
        {"Ref": worker_mapping(stage)}
    )


def test_the_sweep_reads_only_the_workers_switch(dev: Stage) -> None:
    # The worker's jobs queue mapping, by its id; the poller may read that one only.
    variables = dev.function("Poller")["Environment"]["Variables"]
    assert variables["WORKER_EVENT_SOURCE_MAPPING"] == {"Ref": worker_mapping(dev)}
    lambda_calls = {
        resource: actions
        for resource, actions in dev.permissions("Poller").items()
        if any(action.startswith("lambda:") for action in actions)
    }
    assert lambda_calls == {worker_switch(dev): {"lambda:GetEventSourceMapping"}}
