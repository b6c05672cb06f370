"""A Lambda handler for that queue: each announcement's work done once, deduplicated
on (``job_id``, ``sequence``) by a conditional put in the consumer's own DynamoDB table.

Announcements come at least once: a copy (after a worker crash, or EventBridge
delivering twice) has the same ``job_id`` and ``sequence``. A later announcement
of the same job (an operator's replay, or the completion of a job announced lost
before) has a higher ``sequence``: it is new, and supersedes the earlier one. So
the table keeps, per job, the highest ``sequence`` worked: a put conditional on
the stored one being lower takes the new ones and drops copies, and an older
announcement that arrives late (EventBridge does not keep order). Should the
work fail, the marker before it is put back and the message raised back to SQS,
so its retry does the work. (Were the function killed mid-work the marker would
stay: make the work itself idempotent, or keep a lease in the marker, where
that matters.)

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
    """The example's work: say where the job's artifacts are, or that it was lost."""
    uris = [artifact["uri"] for artifact in detail.get("artifacts", [])]
    line = {"job_id": detail["job_id"], "sequence": detail["sequence"], "artifacts": uris}
    print(json.dumps({**line, "lost_at": detail["lost_at"]}))


class Consumer:
    def __init__(self, dynamodb: Any, table_name: str, work: Work = archive_index) -> None:
        self._dynamodb = dynamodb
        self._table = table_name
        self._work = work

    def consume(self, announcement: dict[str, Any]) -> bool:
        """Do the work for this announcement; False when it was a copy or superseded."""
        detail = announcement["detail"]
        marker = {
            "job_id": {"S": detail["job_id"]},
            "sequence": {"N": str(detail["sequence"])},
            "event_id": {"S": announcement["id"]},
        }
        try:
            before = self._dynamodb.put_item(
                TableName=self._table,
                Item=marker,
                # "sequence" is a DynamoDB reserved word.
                ConditionExpression="attribute_not_exists(job_id) OR #s < :s",
                ExpressionAttributeNames={"#s": "sequence"},
                ExpressionAttributeValues={":s": marker["sequence"]},
                ReturnValues="ALL_OLD",
            ).get("Attributes")
        except self._dynamodb.exceptions.ConditionalCheckFailedException:
            return False
        try:
            self._work(detail)
        except Exception:
            self._restore(marker, before)
            raise
        return True

    def _restore(self, marker: dict[str, Any], before: dict[str, Any] | None) -> None:
        """Put back the marker this announcement replaced, if it is still ours."""
        ours: dict[str, Any] = {
            "ConditionExpression": "event_id = :id",
            "ExpressionAttributeValues": {":id": marker["event_id"]},
        }
        if before:
            self._dynamodb.put_item(TableName=self._table, Item=before, **ours)
        else:
            key = {"job_id": marker["job_id"]}
            self._dynamodb.delete_item(TableName=self._table, Key=key, **ours)


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
