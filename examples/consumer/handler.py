"""A Lambda handler for that queue: each completed job's work done once, deduplicated
on ``job_id`` by a conditional put in the consumer's own DynamoDB table.

Announcements come at least once: a copy after a crash has the same
``job_id``. The first copy writes the job's marker, every later one finds it
and is dropped. Should the work fail, the marker is removed again and the
message raised back to SQS, so its retry does the work. (Were the function
killed mid-work the marker would stay: make the work itself idempotent, or
keep a lease in the marker, where that matters.)

Environment: ``TABLE_NAME``, a table whose partition key is ``job_id`` (S).
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable
from typing import Any

import boto3

Work = Callable[[dict[str, Any]], None]


def archive_index(detail: dict[str, Any]) -> None:
    """The example's work: say where the job's artifacts are."""
    uris = [artifact["uri"] for artifact in detail["artifacts"]]
    print(json.dumps({"job_id": detail["job_id"], "artifacts": uris}))


class Consumer:
    def __init__(self, dynamodb: Any, table_name: str, work: Work = archive_index) -> None:
        self._dynamodb = dynamodb
        self._table = table_name
        self._work = work

    def consume(self, announcement: dict[str, Any]) -> bool:
        """Do the work for this announcement's job; False when it was a copy."""
        job_id = announcement["detail"]["job_id"]
        key = {"job_id": {"S": job_id}}
        try:
            self._dynamodb.put_item(
                TableName=self._table,
                Item={**key, "event_id": {"S": announcement["id"]}},
                ConditionExpression="attribute_not_exists(job_id)",
            )
        except self._dynamodb.exceptions.ConditionalCheckFailedException:
            return False
        try:
            self._work(announcement["detail"])
        except Exception:
            self._dynamodb.delete_item(TableName=self._table, Key=key)
            raise
        return True


@functools.cache
def consumer() -> Consumer:
    return Consumer(boto3.client("dynamodb"), os.environ["TABLE_NAME"])


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """SQS batch in, the records to retry out (ReportBatchItemFailures on the mapping)."""
    failures = []
    for record in event["Records"]:
        try:
            consumer().consume(json.loads(record["body"]))
        except Exception:
            failures.append({"itemIdentifier": record["messageId"]})
    return {"batchItemFailures": failures}
