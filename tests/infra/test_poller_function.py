"""The poller's construct (``infra/functions/poller.py``), its schedule and its registrations."""

from __future__ import annotations

from infra import spec
from infra.config import DEFAULTS
from sume.core.names import DUE_INDEX
from sume.polling.settings import PollerSettings, RegistrySettings
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
    }


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
