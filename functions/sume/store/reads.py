"""The jobs table's reads beyond one job: a batch of jobs, a page of a Query or Scan,
the due-work index's due jobs and its count of awaiting ones.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from sume.store.codec import job_from_item
from sume.store.conditions import IS_AWAITING
from sume.store.errors import IncompleteRead
from sume.store.job import Job, JobAttr, State
from sume.store.table import TableBase, expression_names, expression_values

# BatchGetItem's most keys per call, and the calls made for keys it leaves unprocessed.
BATCH_KEYS = 100
BATCH_ATTEMPTS = 5


@dataclass(frozen=True)
class Page:
    """One page of a listing."""

    jobs: list[Job]
    read: int
    """Items DynamoDB read to answer (the cost); the filter may have dropped most."""
    start: dict[str, Any] | None
    """Where the next page starts; None after the last one."""


class Reads(TableBase):
    """The reads that hand back many ``Job``s, or count them."""

    def get_many(self, job_ids: list[str], attributes: tuple[str, ...]) -> list[Job]:
        """The jobs of ``job_ids`` that exist, ``attributes`` only, eventually consistent.

        BatchGetItem, 100 keys a call; keys DynamoDB leaves unprocessed (throttling)
        are asked again after a growing pause, and ``IncompleteRead`` is raised
        if some are still left after ``BATCH_ATTEMPTS`` calls for them.
        """
        names = {f"#p{i}": attribute for i, attribute in enumerate(attributes)}
        found: list[Job] = []
        for first in range(0, len(job_ids), BATCH_KEYS):
            keys: list[dict[str, Any]] = [
                {JobAttr.JOB_ID: {"S": job_id}} for job_id in job_ids[first : first + BATCH_KEYS]
            ]
            for attempt in range(BATCH_ATTEMPTS):
                if attempt:
                    time.sleep(0.05 * 2**attempt)
                request = {
                    "Keys": keys,
                    "ProjectionExpression": ", ".join(names),
                    "ExpressionAttributeNames": names,
                }
                response = self._client.batch_get_item(RequestItems={self._table: request})
                found.extend(
                    job_from_item(item) for item in response["Responses"].get(self._table, [])
                )
                keys = response.get("UnprocessedKeys", {}).get(self._table, {}).get("Keys", [])
                if not keys:
                    break
            if keys:
                raise IncompleteRead(f"{len(keys)} job(s) left unread by DynamoDB (throttled)")
        return found

    def read_page(
        self,
        operation: Literal["query", "scan"],
        request: dict[str, Any],
        start: dict[str, Any] | None,
    ) -> Page:
        """One page of a Query or Scan of the table: ``request`` less the table's name."""
        read: Callable[..., Any] = getattr(self._client, operation)
        request = {**request, "TableName": self._table}
        if start:
            request["ExclusiveStartKey"] = start
        response = read(**request)
        return Page(
            [job_from_item(i) for i in response.get("Items", [])],
            response.get("ScannedCount", 0),
            response.get("LastEvaluatedKey"),
        )

    def due(
        self, shard: int, now: int, limit: int = 100, start: dict[str, Any] | None = None
    ) -> tuple[list[Job], dict[str, Any] | None]:
        """Jobs of one shard whose due time has come, oldest first; each has its ``due_at``."""
        request: dict[str, Any] = {
            "IndexName": self._due_index,
            "KeyConditionExpression": f"{JobAttr.DUE_SHARD} = :shard AND {JobAttr.DUE_AT} <= :now",
            "ExpressionAttributeValues": expression_values(shard=shard, now=now),
            "Limit": limit,
        }
        page = self.read_page("query", request, start)
        return page.jobs, page.start

    def count_awaiting(self, shard: int, limit: int) -> tuple[int, bool]:
        """Awaiting jobs among the first ``limit`` items of one due-work shard, and
        whether those were all of its items (else the count is a lower bound).

        ``Select=COUNT`` returns no items, but reading still costs what the
        ``limit`` items weigh: the bound is what keeps the gauge cheap.
        """
        response = self._client.query(
            TableName=self._table,
            IndexName=self._due_index,
            KeyConditionExpression=f"{JobAttr.DUE_SHARD} = :shard",
            FilterExpression=IS_AWAITING,
            ExpressionAttributeNames=expression_names(IS_AWAITING),
            ExpressionAttributeValues=expression_values(shard=shard, awaiting=State.AWAITING.value),
            Select="COUNT",
            Limit=limit,
        )
        return int(response.get("Count", 0)), "LastEvaluatedKey" not in response
