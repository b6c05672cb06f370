"""The receiver's construct (``infra/functions/receiver.py``): environment, grants, SnapStart."""

from __future__ import annotations

from infra import spec
from sume.receiving.settings import ReceiverSettings
from tests.infra.conftest import ITEMS, SECRET, SEND, Cloud, Stage, logs_and_traces, ref_name


def test_the_receiver_answers_well_inside_sumes_ten_seconds(dev: Stage) -> None:
    assert dev.function("Receiver")["Timeout"] <= 8


def test_the_receiver_keeps_sumes_worst_case_at_a_cold_start_for_itself(
    dev: Stage, prod: Stage
) -> None:
    # Dev derives it (infra/capacity.py, receiver_concurrency: 56 at 2 jobs/s), prod sets it.
    assert dev.function("Receiver")["ReservedConcurrentExecutions"] == 56
    assert prod.function("Receiver")["ReservedConcurrentExecutions"] == 80
    # The others draw on the account's shared pool, within their event sources' caps.
    for name in ("Worker", "Poller"):
        assert "ReservedConcurrentExecutions" not in dev.function(name)


def test_the_receiver_environment_satisfies_its_settings(dev: Stage) -> None:
    receiver = ReceiverSettings.from_env(dev.environment("Receiver"))
    assert receiver.table.jobs_table_name == "resolved-JobsTable"
    assert receiver.table.jobs_queue_url == "resolved-JobsQueue"
    assert receiver.signing_secret_arn == "resolved-SecretsSigningSecret"
    assert receiver.signing_secret_value is None
    assert receiver.payloads_bucket_name == "resolved-BucketsPayloads"


def test_the_receiver_may_do_only_what_its_code_does(dev: Stage) -> None:
    assert dev.permissions("Receiver") == {
        **logs_and_traces("Receiver"),
        "JobsTable": ITEMS,
        "JobsQueue": SEND,
        "BucketsPayloads/events/*": {"s3:PutObject"},
        "SecretsSigningSecret": SECRET,
    }


def _snapstart_stages(dev: Stage, prod: Stage, cloud: Cloud) -> list[Stage]:
    return [dev, prod, *cloud.regional.values()]


def test_the_receiver_runs_from_snapstart_snapshots_of_its_published_version(
    dev: Stage, prod: Stage, cloud: Cloud
) -> None:
    for stage in _snapstart_stages(dev, prod, cloud):
        receiver = stage.function("Receiver")
        assert receiver["SnapStart"] == {"ApplyOn": "PublishedVersions"}
        # What SnapStart supports, as deployed: Python 3.12 or later, ephemeral
        # storage within 512 MB (the default when unset), no EFS.
        version = tuple(int(n) for n in receiver["Runtime"].removeprefix("python").split("."))
        assert version >= (3, 12)
        assert receiver.get("EphemeralStorage", {"Size": 512})["Size"] <= 512
        assert "FileSystemConfigs" not in receiver
        # The others are not latency-bound (queue and schedule): no snapshot to pay for.
        for name in ("Worker", "Poller"):
            assert "SnapStart" not in stage.function(name)
        # One version, deleted when a deploy publishes the next, so one snapshot
        # is cached at a time; the alias points at it.
        ((version_id, published),) = stage.of_type("AWS::Lambda::Version").items()
        assert ref_name(published["Properties"]["FunctionName"]) == "FunctionsReceiverFunction"
        assert published["DeletionPolicy"] == "Delete"
        (_, alias) = stage.one("FunctionsReceiverLive", "AWS::Lambda::Alias")
        assert alias["Properties"]["Name"] == spec.RECEIVER_ALIAS
        assert alias["Properties"]["FunctionVersion"] == {"Fn::GetAtt": [version_id, "Version"]}
        # SnapStart does not combine with provisioned concurrency.
        assert "ProvisionedConcurrencyConfig" not in alias["Properties"]
        assert "ProvisionedConcurrencyConfig" not in published["Properties"]
