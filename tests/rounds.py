"""A poller round as Lambda plays it on moto: the schedule's tick, then the shards
queue's event source handing each assignment to the poller, one at a time."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

import poller
from devstack.eventsources import sqs_records
from devstack.resources import queue_arn
from sume.core import aws as clients
from sume.core.names import Env
from sume.polling.fanout import CLAIMED_ROUND
from tests.builders import LambdaContext, scheduled_event


def shards_queue() -> tuple[str, str]:
    url = os.environ[Env.POLL_SHARDS_QUEUE_URL]
    return url, queue_arn(clients.client("sqs"), url)


def assignments() -> list[dict[str, Any]]:
    """The shards queue's messages, taken off it."""
    url, _ = shards_queue()
    sqs, taken = clients.client("sqs"), []
    while batch := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages"):
        taken.extend(batch)
        for message in batch:
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    return taken


def run_assignments(messages: list[dict[str, Any]], context: Any) -> list[dict[str, Any]]:
    """Each message handed to the poller in an SQS event of its own, as batch size 1 does."""
    _, arn = shards_queue()
    runs: list[dict[str, Any]] = []
    for message in messages:
        runs.extend(poller.handler(sqs_records([message], arn), context)["runs"])
    return runs


def merged(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The runs' summaries as one: counts added, complete only if every run was."""
    total: dict[str, Any] = {"complete": all(run["complete"] for run in runs)}
    for run in runs:
        for key, value in run.items():
            if isinstance(value, int) and not isinstance(value, bool):
                total[key] = total.get(key, 0) + value
            elif isinstance(value, tuple | list):
                total[key] = sorted([*total.get(key, []), *value])
    return total


def last_claimed_round() -> int:
    """The latest round any run claimed a shard for in this world's leases table (0: none)."""
    leases = clients.client("dynamodb").scan(TableName=os.environ[Env.SHARD_LEASES_TABLE_NAME])
    return max((int(item[CLAIMED_ROUND]["N"]) for item in leases["Items"]), default=0)


def poller_round(
    timeout_seconds: float = 60, context: Callable[[], Any] | None = None
) -> dict[str, Any]:
    """One scheduled round: the tick, then every assignment it sent; the runs' summary.

    Each run gets an invocation of its own (``context()``, by default a fresh
    ``timeout_seconds`` one), as Lambda gives each message.
    """
    make = context or (lambda: LambdaContext(timeout_seconds=timeout_seconds))
    # A round is named by its tick's second, and the schedule never ticks twice in
    # one: a second tick in the same second as a round this world's leases table
    # holds would be that round, refused. A fresh world has no round to wait out.
    last = last_claimed_round()
    while int(time.time()) <= last:
        time.sleep(0.02)
    poller.handler(scheduled_event(), make())
    runs: list[dict[str, Any]] = []
    for message in assignments():
        runs.extend(run_assignments([message], make()))
    return merged(runs)
