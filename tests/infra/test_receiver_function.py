"""The receiver's construct (``infra/functions/receiver.py``): environment and grants."""

from __future__ import annotations

from sume.receiving.settings import ReceiverSettings
from tests.infra.conftest import ITEMS, SECRET, SEND, Stage, logs_and_traces


def test_the_receiver_answers_well_inside_sumes_ten_seconds(dev: Stage) -> None:
    assert dev.function("Receiver")["Timeout"] <= 8


def test_the_receiver_keeps_what_the_api_throttle_admits_for_itself(
    dev: Stage, prod: Stage
) -> None:
    # throttle_burst + throttle_rate x 1 s: dev derives it (100 + 50), prod sets it.
    assert dev.function("Receiver")["ReservedConcurrentExecutions"] == 150
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
