"""The poller handler's failing steps: a round not fanned out, a run that could not read its
shards. Each counts PollerErrors once, logs the error and raises, so SQS or the next tick
retries and the function's error alarm sees it."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from botocore.exceptions import ClientError

import poller
from devstack.eventsources import sqs_records
from sume.polling import compose
from sume.polling.fanout import Assignment
from tests.builders import LambdaContext, scheduled_event
from tests.rounds import shards_queue


def down() -> ClientError:
    return ClientError({"Error": {"Code": "ServiceUnavailable", "Message": "down"}}, "Query")


class Broken:
    """A fan-out or a run whose DynamoDB is down."""

    def start(self) -> dict[str, int]:
        raise down()

    def parse(self, body: str) -> Assignment:
        return Assignment.parse(body, read_shards=16)

    def work(self, assignment: Assignment, remaining: Any) -> Any:
        raise down()


def errors(capsys) -> list[list[float]]:
    """PollerErrors in each EMF blob the invocation printed."""
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if "_aws" in line]
    return [blob["PollerErrors"] for blob in lines if "PollerErrors" in blob]


def logged(caplog, message: str) -> logging.LogRecord:
    (record,) = [r for r in caplog.records if r.getMessage() == message]
    return record


def test_a_round_not_fanned_out_counts_one_poller_error_and_raises(
    aws, monkeypatch, capsys, caplog
):
    monkeypatch.setattr(compose, "fanout_service", Broken)
    capsys.readouterr()
    with pytest.raises(ClientError):
        poller.handler(scheduled_event(), LambdaContext(timeout_seconds=60))
    assert errors(capsys) == [[1.0]]
    failed = logged(caplog, "poller round not fanned out")
    assert (failed.levelname, failed.funcName) == ("ERROR", "fan_out")
    assert failed.exc_info and failed.exc_info[0] is ClientError


def test_a_run_that_cannot_read_its_shards_counts_one_poller_error_and_raises(
    aws, monkeypatch, capsys, caplog
):
    monkeypatch.setattr(compose, "shard_run_service", Broken)
    _, arn = shards_queue()
    body = json.dumps({"round": 1900000000, "shards": [0]})
    message = {"MessageId": "m-1", "ReceiptHandle": "r-1", "Body": body}
    capsys.readouterr()
    with pytest.raises(ClientError):
        poller.handler(sqs_records([message], arn), LambdaContext(timeout_seconds=60))
    assert errors(capsys) == [[1.0]]
    failed = logged(caplog, "poller run failed")
    assert (failed.levelname, failed.funcName) == ("ERROR", "run")
    assert failed.__dict__["round"] == 1900000000
    assert failed.exc_info and failed.exc_info[0] is ClientError
