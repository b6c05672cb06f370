"""``make run DYNAMODB=local``: the local stack's tables on Amazon's DynamoDB Local, the
rest on moto, and every tool finding them through the banner's variables."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from dataclasses import replace

import boto3
import pytest

from devstack import dynamodb_local
from devstack.simulator import Sume
from devstack.stack import DevStack
from sume.store.job import State
from sume_cli.main import main
from tests.integration.conftest import local_stack_settings, stop_shared_stacks


@pytest.fixture(scope="module")
def stack() -> Iterator[DevStack]:
    """One for the module: it starts an engine of its own, beside the worker's."""
    stop_shared_stacks()
    settings = replace(local_stack_settings(), dynamodb=dynamodb_local.ENGINE)
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("SUME_COM_WEBHOOK_SIGNING_SECRET", raising=False)
        with DevStack(settings) as running:
            yield running


def test_the_tables_live_on_dynamodb_local_and_a_job_flows_through(
    stack: DevStack, capsys: pytest.CaptureFixture[str]
) -> None:
    assert stack.names is not None
    banner = list(stack.describe())
    assert "DynamoDB Local" in banner[0]
    (line,) = [line for line in banner if line.startswith("  any AWS SDK/CLI:")]
    variables = dict(word.split("=", 1) for word in line.partition(":")[2].split())
    assert variables["AWS_ENDPOINT_URL_DYNAMODB"] == stack.dynamodb_endpoint_url
    assert variables["AWS_ENDPOINT_URL"] == stack.endpoint_url

    # The tables are the engine's, not moto's.
    on_moto = boto3.client("dynamodb", endpoint_url=stack.endpoint_url)
    on_local = boto3.client("dynamodb", endpoint_url=stack.dynamodb_endpoint_url)
    assert stack.names.table not in on_moto.list_tables()["TableNames"]
    assert stack.names.table in on_local.list_tables()["TableNames"]

    with Sume(stack.url, [stack.signing_secret], api_token=stack.api_token) as sume:
        job = sume.new_job(artifacts=1)
        assert sume.deliver(job).delivered
        while getattr(stack.jobs().get(job.job_id), "state", None) != State.PROCESSED:
            time.sleep(0.05)  # pytest's timeout bounds a hang

    # The ops CLI, told where the tables are as the banner tells every tool (the
    # stack set the banner's variables in this process).
    assert os.environ["AWS_ENDPOINT_URL_DYNAMODB"] == stack.dynamodb_endpoint_url
    capsys.readouterr()
    deployment = ["--endpoint-url", stack.endpoint_url, "--prefix", stack.prefix]
    code = main([*deployment, "status", job.job_id, "--output", "json"])
    assert code == 0
    assert json.loads(capsys.readouterr().out)["state"] == "processed"


def test_without_the_tables_endpoint_the_cli_says_where_to_look(
    stack: DevStack, capsys: pytest.CaptureFixture[str]
) -> None:
    # By hand, not monkeypatch: its undo would put the stack's value back after the
    # stack restored the environment it found.
    saved = os.environ.pop("AWS_ENDPOINT_URL_DYNAMODB")
    try:
        capsys.readouterr()
        code = main(["--endpoint-url", stack.endpoint_url, "--prefix", stack.prefix, "list"])
        err = capsys.readouterr().err
    finally:
        os.environ["AWS_ENDPOINT_URL_DYNAMODB"] = saved
    assert code == 1
    assert "AWS_ENDPOINT_URL_DYNAMODB" in err
    assert "DYNAMODB=local" in err
