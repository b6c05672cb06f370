"""Ended jobs past their retention, found by the report index and deleted one by one:
what DynamoDB's TTL does for the single-region table, for the MRSC table, which has none."""

from __future__ import annotations

from typing import Any, Final

from sume.core.names import REPORT_INDEX
from sume.store.job import JobAttr, State
from sume.store.jobs import JobsTable
from sume.store.table import expression_values

# Ended, its retention over (``expires_at``, which only a finish writes and a
# replay removes), and no work owed: anything else (re-opened by a replay,
# owed again, never ended) is kept. Checked by the delete itself, so a job
# that changed between the read and the delete is never lost.
IS_EXPIRED: Final = (
    f"#state IN (:processed, :processing_error) AND {JobAttr.EXPIRES_AT} <= :now "
    f"AND attribute_not_exists({JobAttr.DUE_AT})"
)
_READ: Final = (JobAttr.JOB_ID, JobAttr.STATE, JobAttr.EXPIRES_AT, JobAttr.DUE_AT)


class JobExpiry:
    def __init__(self, jobs: JobsTable, client: Any, table_name: str) -> None:
        self._jobs = jobs
        self._client = client
        self._table = table_name

    def entered(self, bucket: str, until: int) -> list[str]:
        """The jobs of one report index partition that entered the window by ``until``."""
        request = {
            "IndexName": REPORT_INDEX,
            "KeyConditionExpression": (
                f"{JobAttr.REPORT_BUCKET} = :bucket AND {JobAttr.REPORT_AT} <= :until"
            ),
            "ExpressionAttributeValues": expression_values(bucket=bucket, until=until),
        }
        job_ids: list[str] = []
        start = None
        while True:
            page = self._jobs.read_page("query", request, start)
            job_ids.extend(job.job_id for job in page.jobs)
            start = page.start
            if not start:
                return job_ids

    def expired(self, job_ids: list[str], now: int) -> list[str]:
        """Those of ``job_ids`` that look expired (eventually consistent): what to delete.

        A read costs a fraction of a failed delete (both are charged by the item's
        size, a delete per KB and on every replica), so the jobs still kept are
        read, not deleted in vain.
        """
        ended = {State.PROCESSED, State.PROCESSING_ERROR}
        return [
            job.job_id
            for job in self._jobs.get_many(job_ids, _READ)
            if job.state in ended
            and job.expires_at is not None
            and job.expires_at <= now
            and job.due_at is None
        ]

    def delete(self, job_id: str, now: int) -> bool:
        """Delete the job if it is still expired at ``now``; False when it was kept."""
        try:
            self._client.delete_item(
                TableName=self._table,
                Key={JobAttr.JOB_ID: {"S": job_id}},
                ConditionExpression=IS_EXPIRED,
                ExpressionAttributeNames={"#state": JobAttr.STATE.value},
                ExpressionAttributeValues=expression_values(
                    processed=State.PROCESSED.value,
                    processing_error=State.PROCESSING_ERROR.value,
                    now=now,
                ),
            )
        except self._client.exceptions.ConditionalCheckFailedException:
            return False
        return True
